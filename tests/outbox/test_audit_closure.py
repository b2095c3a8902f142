"""Issue 31, items 2, 3 and 5: the audit trigger checked live against event_queue, ``audit_not_closed``, and the
ages of job_audit rows taken from the columns the worker writes (``started_at``), on databases built by the
migration chain in the reference system's shapes (tests/outbox/migration_chain.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest

from server.config import Settings, load_settings
from server.doctor import run_doctor
from server.runtime import Runtime
from tests.helpers import in_process_client
from tests.outbox import migration_chain as mc

pytestmark = pytest.mark.anyio


def chain_settings(tmp_path: Path, url: str, redis_url: str) -> Settings:
    return load_settings(environ={}, overrides={
        "state_dir": str(tmp_path / "state"), "services": {"event": {"postgres": url}},
        "redis": {"url": redis_url}})


def chain_db(make_pg_db: Callable[[], str], upto: str) -> str:
    url = make_pg_db()
    mc.apply_chain(url, upto)
    return url


def completed_but_not_closed(url: str, r: Any, started_age_s: float = 900) -> str:
    """A job that ran and succeeded on a database whose trigger raises: guard set, audit row PROCESSING."""
    with psycopg.connect(url, autocommit=True) as conn:
        job_id = mc.service_write_job(conn, age_s=started_age_s + 10)
        mc.runner_claim_jobs(conn)
        mc.runner_push_job(conn, r, job_id)
        mc.worker_start(conn, r, job_id, started_age_s=started_age_s)
        error = mc.worker_succeed(conn, r, job_id)
        assert error is not None and "emitterId" in str(error)  # the worker swallows this
        status = conn.execute("SELECT status, updated_at FROM job_audit WHERE job_id = %s", (job_id,)).fetchone()
        assert status == ("PROCESSING", None)
    return job_id


async def _doctor(settings: Settings) -> dict[str, Any]:
    runtime = Runtime(settings)
    try:
        report = await run_doctor(runtime)
    finally:
        await runtime.aclose()
    return {c.name: c for c in report.checks}


async def test_doctor_fails_on_the_trigger_that_raises_and_names_column_and_migration(
    tmp_path: Path, make_pg_db, redis_url: str
) -> None:
    raising = await _doctor(chain_settings(tmp_path, chain_db(make_pg_db, mc.RAISING), redis_url))
    check = raising["trigger:event"]
    assert check.status == "fail", check
    assert '"emitterId"' in check.detail and "notify_job_audit_status_change()" in check.detail
    assert "raises on every COMPLETED/FAILED update" in check.detail
    assert "CREATE OR REPLACE FUNCTION" in check.fix and '"emitterId" = NEW.job_id::uuid' in check.fix
    # before the NOT NULL migration and after the trigger version that sets it: fine, and says why
    for upto in (mc.V2, mc.LATEST):
        fine = (await _doctor(chain_settings(tmp_path, chain_db(make_pg_db, upto), redis_url)))["trigger:event"]
        assert fine.status == "ok", fine
        assert "sets every NOT NULL column" in fine.detail


async def test_trace_of_a_job_whose_audit_row_could_not_be_closed(
    tmp_path: Path, make_pg_db, redis_url: str, redis_client
) -> None:
    url = chain_db(make_pg_db, mc.RAISING)
    job_id = completed_but_not_closed(url, redis_client)
    async with in_process_client(chain_settings(tmp_path, url, redis_url)) as client:
        result = await client.call_tool("trace_job", {"job_id": job_id, "service": "event"})
    assert not result.is_error, result.content[0].text
    verdict = result.structured_content["verdict"]
    assert verdict["code"] == "audit_not_closed", verdict
    assert "the handler succeeded" in verdict["sentence"] and "could not be closed" in verdict["sentence"]
    assert '"emitterId"' in verdict["sentence"] and "notify_job_audit_status_change" in verdict["sentence"]
    assert "since its started_at" in verdict["sentence"] and "updated_at" not in verdict["sentence"]
    assert "worker died" not in verdict["sentence"]
    assert "reconcile_outbox" in verdict["next_step"] and job_id in verdict["next_step"]
    assert "audit_not_closed" in result.content[0].text
    async with in_process_client(chain_settings(tmp_path, url, redis_url)) as client:  # trace_request says the same
        request = await client.call_tool("trace_request", {"start": f"event:jobs_outbox:{job_id}"})
    assert not request.is_error, request.content[0].text
    assert request.structured_content["verdict"]["code"] == "audit_not_closed", request.structured_content["verdict"]


async def test_dead_worker_is_aged_by_started_at_never_by_a_null_updated_at(
    tmp_path: Path, make_pg_db, redis_url: str, redis_client
) -> None:
    url = chain_db(make_pg_db, mc.LATEST)
    with psycopg.connect(url, autocommit=True) as conn:
        job_id = mc.service_write_job(conn, age_s=1000)
        mc.runner_claim_jobs(conn)
        mc.runner_push_job(conn, redis_client, job_id)
        mc.worker_start(conn, None, job_id, started_age_s=900)  # the job audit row written now, started 900 s ago
    redis_client.delete(f"{mc.BULL}:{mc.QUEUE}:{job_id}")  # the worker died and the job is gone from BullMQ
    redis_client.lrem(f"{mc.BULL}:{mc.QUEUE}:wait", 0, job_id)
    async with in_process_client(chain_settings(tmp_path, url, redis_url)) as client:
        result = await client.call_tool("trace_job", {"job_id": job_id, "service": "event"})
    verdict = result.structured_content["verdict"]
    assert verdict["code"] == "stuck_processing", verdict
    assert "since its started_at" in verdict["sentence"] and "updated_at" not in verdict["sentence"]


async def test_outbox_health_sees_an_audit_row_processing_for_15_minutes(
    tmp_path: Path, make_pg_db, redis_url: str
) -> None:
    url = chain_db(make_pg_db, mc.LATEST)
    with psycopg.connect(url, autocommit=True) as conn:
        job_id = mc.service_write_job(conn, age_s=910)
        mc.runner_claim_jobs(conn)
        mc.runner_push_job(conn, None, job_id)
        mc.worker_start(conn, None, job_id, started_age_s=900)
    async with in_process_client(chain_settings(tmp_path, url, redis_url)) as client:
        health = await client.call_tool("outbox_health", {"service": "event"})
        rows = await client.call_tool("query_outbox", {"service": "event", "table": "job_audit"})
    tables = {t["table"]: t for t in health.structured_content["services"][0]["tables"]}
    audit = tables["job_audit"]
    assert [v["code"] for v in audit["verdicts"]] == ["stuck_processing"], audit["verdicts"]
    assert 890 < audit["oldest_processing_age_s"] < 1000 and audit["processing_age_column"] == "started_at"
    assert "since its started_at" in audit["verdicts"][0]["sentence"]
    assert "trace_job" in audit["verdicts"][0]["next_step"]
    assert not health.structured_content["ok"]
    (row,) = rows.structured_content["rows"]
    assert row["since_column"] == "started_at" and 890 < row["since_s"] < 1000 and row["updated_at"] is None
    assert "PROCESSING for" in row["hint"] and "since its started_at" in row["hint"]


async def test_doctor_never_calls_a_trigger_it_could_not_read_fine(tmp_path: Path, make_pg_db, redis_url: str) -> None:
    url = chain_db(make_pg_db, mc.RAISING)
    settings = chain_settings(tmp_path, url, redis_url)
    with psycopg.connect(url, autocommit=True) as conn:  # a BEFORE INSERT trigger of event_queue may fill the column
        conn.execute("""CREATE FUNCTION fill_emitter_id() RETURNS trigger AS $$
                        BEGIN NEW."emitterId" := coalesce(NEW."emitterId", gen_random_uuid()); RETURN NEW; END;
                        $$ LANGUAGE plpgsql""")
        conn.execute("CREATE TRIGGER fill_emitter_id BEFORE INSERT ON event_queue FOR EACH ROW "
                     "EXECUTE FUNCTION fill_emitter_id()")
    filled = (await _doctor(settings))["trigger:event"]
    assert filled.status == "warn" and "fill_emitter_id" in filled.detail and '"emitterId"' in filled.detail
    with psycopg.connect(url, autocommit=True) as conn:  # values by position: no column list to check
        conn.execute("DROP TRIGGER fill_emitter_id ON event_queue")
        conn.execute("""CREATE OR REPLACE FUNCTION notify_job_audit_status_change() RETURNS trigger AS $$
                        BEGIN
                          -- INSERT INTO event_queue (type) is only a comment
                          INSERT INTO event_queue VALUES (DEFAULT, DEFAULT, DEFAULT, NULL, 'x', NEW.emitter, '{}');
                          RETURN NEW;
                        END; $$ LANGUAGE plpgsql""")
    positional = (await _doctor(settings))["trigger:event"]
    assert positional.status == "warn" and "no column list" in positional.detail
