"""trace_job on databases built by the migration chain (tests/outbox/migration_chain.py), lifecycles driven
the way the real runner, worker and post-processors do: the job-outcome rows are the real trigger's
(``payload = {before, after}``, the job id at ``payload.after.job_id``), in each trigger version.

- a job that ran and was cleaned: ``ok``, its success event among the hops;
- a succeeded job whose outbox row remains: the success event is found and its own state is the verdict
  (PENDING: ``event_pending``; pushed, not consumed: ``pushed_not_consumed``; consumed but the row kept:
  ``success_not_cleaned`` naming the delivered event), never "the audit trigger did not write one";
- the first two trigger versions send the outcome to ``stream:ms-event``, which no group reads;
- a failed job: ``handler_failed`` with its failure events (one per attempt) traced, and the P4 mismatch
  named (the failure post-processor accepts only ``...failed`` types, the trigger writes ``:failure``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from tests.outbox import migration_chain as mc
from tests.outbox.migration_chain import chain_dbs  # noqa: F401  (the session's chain databases)

pytestmark = pytest.mark.anyio

SUCCESS_GROUP = "job-outbox-success"
FAILURE_GROUP = "job-outbox-failed"


@pytest.fixture
def chain(chain_dbs, make_settings, redis_url: str, redis_client, tools_for) -> Iterator[Any]:  # noqa: F811
    """``chain(upto)`` -> (connection, tools context) on the database migrated up to ``upto``."""
    opened: list[psycopg.Connection] = []

    def make(upto: str = mc.LATEST):
        url = chain_dbs.url(upto)
        conn = psycopg.connect(url, autocommit=True)
        opened.append(conn)
        settings = make_settings(services={"event": {"postgres": url}}, redis={"url": redis_url})
        return conn, tools_for(settings)

    yield make
    for conn in opened:
        conn.close()


def succeed(conn: psycopg.Connection, r) -> tuple[str, dict[str, Any]]:
    """A job pushed, run and audited COMPLETED; returns its id and its success row."""
    job_id = mc.service_write_job(conn)
    mc.runner_claim_jobs(conn)
    mc.runner_push_job(conn, r, job_id)
    mc.worker_start(conn, r, job_id)
    assert mc.worker_succeed(conn, r, job_id) is None
    (row,) = mc.outcome_rows(conn, job_id)
    return job_id, row


def age(conn: psycopg.Connection, table: str, row_id: str, seconds: float) -> None:
    conn.execute(f"UPDATE {table} SET created_at = created_at - make_interval(secs => %s), "
                 "updated_at = updated_at - make_interval(secs => %s) WHERE id = %s", (seconds, seconds, row_id))


def outcome_hops(report) -> list[str]:
    return [h.row.id for h in report.hops if h.name == "outcome_event" and h.row is not None]


async def test_job_ran_and_was_cleaned_shows_its_success_event(chain, redis_client) -> None:
    conn, tools_cm = chain()
    job_id, success = succeed(conn, redis_client)
    mc.runner_claim_events(conn)
    (stream, _entry), = mc.runner_push_event(conn, redis_client, str(success["id"]))
    mc.group_consume(redis_client, stream, SUCCESS_GROUP)
    mc.success_post_processor(conn, str(success["id"]), feedback_type="event:geocoded", ws_target="ws:job:success")
    async with tools_cm as tools:
        report = await tools.trace_job(job_id, service="event")
    assert report.verdict.code == "ok", report.verdict
    assert outcome_hops(report) == [str(success["id"])]
    assert any(h.ref == f"{stream}" or stream in h.ref for h in report.hops if h.name.startswith("outcome_event."))


async def test_success_event_still_pending_is_the_verdict(chain, redis_client) -> None:
    conn, tools_cm = chain()
    job_id, success = succeed(conn, redis_client)
    age(conn, "event_queue", str(success["id"]), 3600)
    async with tools_cm as tools:
        report = await tools.trace_job(job_id, service="event")
    assert report.verdict.code == "event_pending", report.verdict
    assert str(success["id"]) in report.verdict.sentence
    assert "did not write" not in " ".join(f.sentence for f in report.findings)
    assert outcome_hops(report) == [str(success["id"])]


async def test_success_event_pushed_not_consumed(chain, redis_client) -> None:
    conn, tools_cm = chain()
    job_id, success = succeed(conn, redis_client)
    mc.runner_claim_events(conn)
    (stream, _entry), = mc.runner_push_event(conn, redis_client, str(success["id"]))
    redis_client.xgroup_create(stream, SUCCESS_GROUP, id="0")  # the group exists but has not read it
    async with tools_cm as tools:
        report = await tools.trace_job(job_id, service="event")
    assert report.verdict.code == "pushed_not_consumed", report.verdict
    assert stream in report.verdict.sentence
    assert outcome_hops(report) == [str(success["id"])]


async def test_success_event_consumed_but_row_kept(chain, redis_client) -> None:
    conn, tools_cm = chain()
    job_id, success = succeed(conn, redis_client)
    mc.runner_claim_events(conn)
    (stream, _entry), = mc.runner_push_event(conn, redis_client, str(success["id"]))
    mc.group_consume(redis_client, stream, SUCCESS_GROUP)
    age(conn, "jobs_outbox", job_id, 3600)
    conn.execute("UPDATE job_audit SET started_at = started_at - interval '1 hour', "
                 "finished_at = finished_at - interval '1 hour' WHERE job_id = %s", (job_id,))
    async with tools_cm as tools:
        report = await tools.trace_job(job_id, service="event")
    assert report.verdict.code == "success_not_cleaned", report.verdict
    assert str(success["id"]) in report.verdict.sentence and "acknowledged" in report.verdict.sentence
    assert "did not write" not in report.verdict.sentence


@pytest.mark.parametrize("upto", [mc.V1, mc.V2])
async def test_older_trigger_sends_the_outcome_to_a_stream_nobody_reads(chain, redis_client, upto) -> None:
    conn, tools_cm = chain(upto)
    job_id, success = succeed(conn, redis_client)
    assert success["type"] == mc.outcome_type("COMPLETED", upto)
    mc.runner_claim_events(conn)
    (stream, _entry), = mc.runner_push_event(conn, redis_client, str(success["id"]))
    assert stream == "stream:ms-event"
    async with tools_cm as tools:
        report = await tools.trace_job(job_id, service="event")
    assert report.verdict.code == "pushed_not_consumed", report.verdict
    assert "stream:ms-event" in report.verdict.sentence
    assert outcome_hops(report) == [str(success["id"])]


async def test_handler_failed_traces_its_failure_events_and_names_the_p4_mismatch(chain, redis_client) -> None:
    conn, tools_cm = chain()
    job_id = mc.service_write_job(conn)
    mc.runner_claim_jobs(conn)
    mc.runner_push_job(conn, redis_client, job_id)
    mc.run_failing_job(conn, redis_client, job_id, "geocoder down")
    failures = mc.outcome_rows(conn, job_id)
    assert [r["type"] for r in failures] == ["event:job:outbox:failure"] * 3
    mc.runner_claim_events(conn)
    for row in failures:
        mc.runner_push_event(conn, redis_client, str(row["id"]))
    # the failure post-processor reads the stream and acknowledges what it does not accept
    mc.group_consume(redis_client, "stream:event:job:outbox:failure", FAILURE_GROUP)
    async with tools_cm as tools:
        report = await tools.trace_job(job_id, service="event")
    assert report.verdict.code == "handler_failed", report.verdict
    assert "geocoder down" in report.verdict.sentence
    assert outcome_hops(report) == [str(r["id"]) for r in failures]
    text = " ".join(f.sentence for f in report.findings)
    assert "event:job:outbox:failure" in text and "event:job:outbox:failed" in text and "P4" in text


# -- trace_request starting from an outcome row ----------------------------------------------------------


async def _request(make_settings, url: str, redis_url: str, start: str):
    from server.runtime import Runtime
    from tools.outbox.mcp_tools import catalog_of
    from tools.trace_request.service import trace_request

    settings = make_settings(services={"event": {"postgres": url}}, redis={"url": redis_url})
    runtime = Runtime(settings)
    try:
        return await trace_request(runtime.connections, settings, catalog_of(runtime), start=start)
    finally:
        await runtime.aclose()


async def test_trace_request_from_a_success_row_reaches_its_job(chain_dbs, make_settings, redis_url,  # noqa: F811
                                                                redis_client) -> None:
    url = chain_dbs.url()
    with psycopg.connect(url, autocommit=True) as conn:
        job_id, success = succeed(conn, redis_client)
        age(conn, "event_queue", str(success["id"]), 3600)
    report = await _request(make_settings, url, redis_url, f"event:event_queue:{success['id']}")
    assert [(i.key, i.link.split(" ")[0]) for i in report.items] == [(f"event:jobs_outbox:{job_id}", "outcome")]
    assert outcome_hops(report.items[0]) == [str(success["id"])]
    assert report.verdict.code == "event_pending", report.verdict


async def test_trace_request_from_a_failure_row_shows_every_failure_event(chain_dbs, make_settings,  # noqa: F811
                                                                          redis_url, redis_client) -> None:
    url = chain_dbs.url()
    with psycopg.connect(url, autocommit=True) as conn:
        job_id = mc.service_write_job(conn)
        mc.runner_claim_jobs(conn)
        mc.runner_push_job(conn, redis_client, job_id)
        mc.run_failing_job(conn, redis_client, job_id, "geocoder down")
        failures = [str(r["id"]) for r in mc.outcome_rows(conn, job_id)]
    report = await _request(make_settings, url, redis_url, f"event:event_queue:{failures[1]}")
    assert [i.key for i in report.items] == [f"event:jobs_outbox:{job_id}"]
    assert outcome_hops(report.items[0]) == failures
    assert report.verdict.code == "handler_failed" and "P4" in report.verdict.sentence


# -- the lookup is index-friendly ------------------------------------------------------------------------


async def test_the_recommended_outcome_index_is_recognised_and_serves_the_lookup(chain, redis_client) -> None:
    from server.config import Conventions
    from tools.outbox.indexes import missing_indexes, recommended_indexes
    from tools.outbox.queries import outcome_events_query

    conn, tools_cm = chain(mc.V3)
    job_id, _success = succeed(conn, redis_client)
    conv = Conventions()
    ddl = [r.ddl for r in recommended_indexes(_schema_of(conn), conv) if r.partial]
    assert ddl == ["CREATE INDEX CONCURRENTLY ON event_queue (((payload -> 'after') ->> 'job_id')) "
                   "WHERE ((payload -> 'after') ->> 'job_id') IS NOT NULL;"]
    conn.execute(ddl[0])
    async with tools_cm as tools:
        events = (await tools.catalog.tables("event", with_indexes=True))["event_queue"]
    assert [r for r in missing_indexes(events, conv) if r.partial] == []
    conn.execute("SET enable_seqscan = off")  # a scratch table is small: ask whether the index CAN serve it
    query, params = outcome_events_query(events, conv, ["event:job:outbox:success"], job_id, 4096, 10)
    plan = "\n".join(r[0] for r in conn.execute(b"EXPLAIN " + query.as_bytes(conn), params).fetchall())
    conn.execute("RESET enable_seqscan")
    assert "Index" in plan and "job_id" in plan, plan


def _schema_of(conn: psycopg.Connection):
    """The TableSchema of event_queue with its columns only (what recommended_indexes needs)."""
    from tools.outbox.schema_discovery import TableSchema

    cols = dict(conn.execute("SELECT column_name, data_type FROM information_schema.columns "
                             "WHERE table_name = 'event_queue' ORDER BY ordinal_position").fetchall())
    return TableSchema(kind="event_queue", name="event_queue", exists=True, columns=cols)
