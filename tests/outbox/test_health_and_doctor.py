"""outbox_health verdicts and thresholds; doctor schema, trigger and index checks."""

from __future__ import annotations

import psycopg
import pytest

from server.doctor import run_doctor
from server.runtime import Runtime
from tests.outbox import sim
from tests.outbox.conftest import apply_schema
from tests.outbox.test_query_outbox import OLDER_SCHEMA

pytestmark = pytest.mark.anyio


async def test_counts_ages_failed_by_type_and_verdicts(db, r, outbox_settings, tools_for) -> None:
    sim.insert_job(db, age_s=1000)                         # late PENDING
    sim.insert_job(db, age_s=5000, scheduled_in_s=3600)    # scheduled for later: not late
    sim.insert_job(db, status="PROCESSING", age_s=50, updated_age_s=40)
    sim.insert_job(db, status="COMPLETED")
    sim.insert_event(db, age_s=10)
    for error in ("a", "b"):
        job_id = sim.insert_job(db, type="users.geocode")
        sim.runner_push_job(db, r, job_id)
        sim.worker_take(db, r, job_id, "user-queue")
        sim.worker_fail(db, r, job_id, "user-queue", error)
    async with tools_for(outbox_settings()) as tools:
        report = await tools.health()
    assert not report.ok
    (svc,) = report.services
    tables = {t.table: t for t in svc.tables}
    jobs = tables["jobs_outbox"]
    assert jobs.counts == {"COMPLETED": 3, "PENDING": 2, "PROCESSING": 1} and jobs.total == 6
    assert 990 < jobs.oldest_pending_age_s < 1100
    assert 35 < jobs.oldest_processing_age_s < 60
    assert [v.code for v in jobs.verdicts] == ["pending_in_outbox"]
    audit = tables["job_audit"]
    assert audit.failed_by_type == {"users.geocode": 2}
    assert [v.code for v in audit.verdicts] == ["handler_failed"]
    events = tables["event_queue"]
    assert events.counts == {"PENDING": 3}  # our event + the two failure events of the trigger
    assert [v.code for v in events.verdicts] == ["ok"]
    assert [v.code for v in svc.verdicts] == ["pending_in_outbox", "handler_failed"]


async def test_thresholds_come_from_config(db, r, outbox_settings, tools_for) -> None:
    sim.insert_event(db, age_s=100)
    sim.insert_event(db, status="PROCESSING", age_s=100, updated_age_s=90)
    sim.insert_event(db, status="FAILED", age_s=100)
    relaxed = outbox_settings(limits={"failed_alert_count": 2})
    strict = outbox_settings(limits={"pending_ageing_s": 60, "processing_ageing_s": 60})
    async with tools_for(relaxed) as tools:
        calm = await tools.health("user")
    async with tools_for(strict) as tools:
        alarmed = await tools.health("user")
    assert calm.ok and calm.thresholds["failed_alert_count"] == 2
    codes = [v.code for v in alarmed.services[0].verdicts]
    assert codes == ["event_pending", "stuck_processing", "push_failed"]


async def test_down_service_is_named_and_others_answer(make_outbox_db, r, outbox_settings, tools_for,
                                                       down_dsn, make_pg_db) -> None:
    settings = outbox_settings(services={"user": {"postgres": make_outbox_db()}, "ranking": {"postgres": down_dsn},
                                         "bare": {"postgres": make_pg_db()}})
    async with tools_for(settings) as tools:
        report = await tools.health()
    by_name = {s.service: s for s in report.services}
    assert by_name["user"].available and [v.code for v in by_name["user"].verdicts] == []
    assert not by_name["ranking"].available and "ranking" in by_name["ranking"].error
    assert by_name["ranking"].verdicts[0].code == "unavailable"
    assert {v.code for v in by_name["bare"].verdicts} == {"table_missing"}
    assert not report.ok


async def _doctor(settings) -> dict[str, list]:
    runtime = Runtime(settings)
    try:
        report = await run_doctor(runtime)
    finally:
        await runtime.aclose()
    out: dict[str, list] = {}
    for check in report.checks:
        out.setdefault(check.name, []).append(check)
    return out


async def test_doctor_prints_missing_index_ddl_and_never_runs_it(outbox_db, r, outbox_settings) -> None:
    checks = await _doctor(outbox_settings())
    assert checks["schema:user"][0].status == "ok"
    assert checks["trigger:user"][0].status == "ok"
    ddl = [c.fix for c in checks["index:user:event_queue"]]
    assert ("CREATE INDEX CONCURRENTLY ON event_queue (((payload -> 'after') ->> 'job_id')) "
            "WHERE ((payload -> 'after') ->> 'job_id') IS NOT NULL;") in ddl
    assert "CREATE INDEX CONCURRENTLY ON event_queue (status, created_at, id) INCLUDE (type);" in ddl
    with psycopg.connect(outbox_db, autocommit=True) as conn:
        count = conn.execute("SELECT count(*) FROM pg_indexes WHERE tablename = 'event_queue'").fetchone()[0]
        assert count == 1  # only the primary key: the doctor created nothing
        stats = checks["stats:user:jobs_outbox"][0]
        assert stats.fix == "CREATE STATISTICS jobs_outbox_type_status (mcv) ON type, status FROM jobs_outbox;"
        for fixes in (checks["index:user:event_queue"], checks["index:user:jobs_outbox"],
                      checks["index:user:job_audit"], checks["stats:user:jobs_outbox"],
                      checks["stats:user:event_queue"], checks["stats:user:job_audit"]):
            for check in fixes:
                conn.execute(check.fix)
    again = await _doctor(outbox_settings())
    assert not any(name.startswith(("index:user", "stats:user")) for name in again)
    assert again["indexes:user"][0].status == "ok"


async def test_doctor_on_older_schema_and_missing_trigger(make_pg_db, r, outbox_settings) -> None:
    url = make_pg_db()
    apply_schema(url, OLDER_SCHEMA)
    checks = await _doctor(outbox_settings(services={"user": {"postgres": url}}))
    schema = checks["schema:user"][0]
    assert schema.status == "warn" and "traceparent" in schema.detail and "the tools adapt" in schema.detail
    assert checks["trigger:user"][0].status == "warn"
    assert "job_audit" in {c.detail.split(" ")[3] for c in checks["index:user:job_audit"]}


async def test_doctor_on_missing_tables_and_down_service(make_pg_db, r, outbox_settings, down_dsn) -> None:
    checks = await _doctor(outbox_settings(services={"user": {"postgres": make_pg_db()},
                                                     "ranking": {"postgres": down_dsn}}))
    assert checks["schema:user"][0].status == "fail" and "jobs_outbox missing" in checks["schema:user"][0].detail
    assert checks["schema:ranking"][0].status == "warn" and "not checked" in checks["schema:ranking"][0].detail
