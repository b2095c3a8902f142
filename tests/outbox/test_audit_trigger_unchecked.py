"""A job audit row left open while the audit trigger could not be checked: the verdict of ``trace_job`` says
"could not be checked" and why (never "found no cause"), and ``reconcile_outbox`` refuses to close the row.

Each database is built by the migration chain up to its latest trigger (tests/outbox/migration_chain.py), then
the trigger is made one the live check cannot read: an INSERT without a column list, a write through
``EXECUTE``, a helper function called with ``PERFORM``, or no trigger at all. The job ran and succeeded
(its ``job:completed`` guard is set) but its COMPLETED update of job_audit was lost.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from tests.helpers import in_process_client
from tests.outbox import migration_chain as mc
from tests.outbox.test_audit_closure import chain_db, chain_settings

pytestmark = pytest.mark.anyio

_FUNCTION = """CREATE OR REPLACE FUNCTION notify_job_audit_status_change() RETURNS trigger AS $$
BEGIN
  IF NEW.status NOT IN ('COMPLETED', 'FAILED') THEN RETURN NEW; END IF;
  {body}
  RETURN NEW;
END; $$ LANGUAGE plpgsql"""

_POSITIONAL = _FUNCTION.format(body="""INSERT INTO event_queue
    SELECT gen_random_uuid(), 'PENDING', 'event:job:outbox:success', NEW.emitter, NEW.job_id::uuid,
           jsonb_build_object('before', to_jsonb(OLD), 'after', to_jsonb(NEW));""")

_DYNAMIC = _FUNCTION.format(body="""EXECUTE format('INSERT INTO %I (type, emitter, payload, version, target_services)
    VALUES ($1, $2, $3, 1, $4)', 'event_queue')
    USING 'event:job:outbox:success', NEW.emitter, jsonb_build_object('before', to_jsonb(OLD), 'after', to_jsonb(NEW)),
          ARRAY['event:job:outbox:success'];""")

_HELPER = """CREATE FUNCTION write_job_outcome(old_row job_audit, new_row job_audit) RETURNS void AS $$
BEGIN
  INSERT INTO event_queue (type, emitter, payload, version, target_services)
  VALUES ('event:job:outbox:success', new_row.emitter,
          jsonb_build_object('before', to_jsonb(old_row), 'after', to_jsonb(new_row)), 1,
          ARRAY['event:job:outbox:success']);
END; $$ LANGUAGE plpgsql"""

_PERFORM = _FUNCTION.format(body="PERFORM write_job_outcome(OLD, NEW);")

VARIANTS = {
    "insert_without_column_list": ([_POSITIONAL], "the INSERT has no column list"),
    "write_through_execute": ([_DYNAMIC], "writes through dynamic SQL (EXECUTE)"),
    "helper_called_with_perform": ([_HELPER, _PERFORM], "holds a literal INSERT INTO event_queue"),
    "no_trigger_at_all": (["DROP TRIGGER job_audit_status_trigger ON job_audit"], "job_audit has no enabled trigger"),
}


def succeeded_but_update_lost(url: str, redis_client) -> str:
    """The handler succeeded (guard set); the worker's COMPLETED update of job_audit never ran."""
    with psycopg.connect(url, autocommit=True) as conn:
        job_id = mc.service_write_job(conn, age_s=910)
        mc.runner_claim_jobs(conn)
        mc.runner_push_job(conn, redis_client, job_id)
        mc.worker_start(conn, redis_client, job_id, started_age_s=900)
    redis_client.set(mc.GUARD_KEY.format(job_id=job_id), "true", ex=86400)
    return job_id


@pytest.mark.parametrize("variant", list(VARIANTS))
async def test_a_trigger_that_could_not_be_checked_is_said_so_and_its_audit_row_is_not_closed(
    variant: str, tmp_path: Path, make_pg_db: Callable[[], str], redis_url: str, redis_client
) -> None:
    statements, why = VARIANTS[variant]
    url = chain_db(make_pg_db, mc.LATEST)
    with psycopg.connect(url, autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement)
    job_id = succeeded_but_update_lost(url, redis_client)
    async with in_process_client(chain_settings(tmp_path, url, redis_url)) as client:
        traced = await client.call_tool("trace_job", {"job_id": job_id, "service": "event"})
        proposed = await client.call_tool("propose_remediation",
                                          {"symptom": "reconcile_outbox", "service": "event", "ids": [job_id]})
    verdict = traced.structured_content["verdict"]
    assert verdict["code"] == "audit_not_closed", verdict
    assert "could not be checked: " in verdict["sentence"] and why in verdict["sentence"], verdict["sentence"]
    assert "found no cause" not in verdict["sentence"]
    assert "reconcile_outbox" in verdict["next_step"] and "proves the trigger fine" in verdict["next_step"]
    assert proposed.is_error, proposed.structured_content  # no plan closes the audit row
    text = proposed.content[0].text
    assert "could not be checked" in text and why in text and "no audit row closed" in text, text
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT status FROM job_audit WHERE job_id = %s", (job_id,)).fetchone() == ("PROCESSING",)
