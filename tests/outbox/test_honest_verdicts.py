"""Answers that never claim more than was seen (issue 22, sections 2, 5 and 6 with the sim's states).

The real-BullMQ versions of the queue states are in tests/outbox/test_real_bullmq.py.
"""

from __future__ import annotations

import uuid

import psycopg
import pytest

from tests.helpers import in_process_client
from tests.outbox import sim

pytestmark = pytest.mark.anyio

QUEUE = "user-queue"


def hop(report, name):
    return next(h for h in report.hops if h.name == name)


async def test_unreachable_service_makes_an_all_services_miss_inconclusive(
    make_outbox_db, outbox_settings, tools_for, down_dsn
) -> None:
    settings = outbox_settings(services={"user": {"postgres": make_outbox_db()},
                                         "event": {"postgres": make_outbox_db()},
                                         "ranking": {"postgres": down_dsn}})
    missing = str(uuid.uuid4())
    async with tools_for(settings) as tools:
        job = await tools.trace_job(missing, service=None)
        event = await tools.trace_event(missing, service=None)
    for report in (job, event):
        assert report.verdict.code == "inconclusive", report.verdict
        assert report.searched_services == ["event", "user"]  # ranking was not searched
        assert [p.service for p in report.unavailable] == ["ranking"]
        assert "ranking" in report.verdict.sentence and "could not be searched" in report.verdict.sentence
    # every service answered: then, and only then, "not found"
    settings = outbox_settings(services={"user": {"postgres": make_outbox_db()}})
    async with tools_for(settings) as tools:
        assert (await tools.trace_job(missing, service=None)).verdict.code == "not_found"
        assert (await tools.trace_event(missing, service=None)).verdict.code == "not_found"


async def test_redis_down_makes_a_job_miss_inconclusive(db, outbox_settings, tools_for) -> None:
    from server.demo.embedded import free_port

    settings = outbox_settings(redis={"url": f"redis://127.0.0.1:{free_port()}/0"})
    async with tools_for(settings) as tools:
        report = await tools.trace_job(str(uuid.uuid4()))
    assert report.verdict.code == "inconclusive" and "redis" in report.verdict.sentence


async def test_job_audit_rows_show_the_job_id_to_trace(db, r, outbox_settings) -> None:
    job_id = sim.insert_job(db, age_s=100)
    sim.runner_push_job(db, r, job_id, pushed_age_s=90)
    sim.worker_take(db, r, job_id, QUEUE, age_s=10)
    audit_id = str(db.execute("SELECT id FROM job_audit WHERE job_id = %s", (job_id,)).fetchone()[0])
    assert audit_id != job_id
    async with in_process_client(outbox_settings()) as client:
        result = await client.call_tool("query_outbox", {"table": "job_audit", "service": "user"})
        by_audit_id = await client.call_tool("trace_job", {"detail": "full", "job_id": audit_id, "service": "user"})
    text = result.content[0].text
    assert f"job_id={job_id} (trace_job id; audit row {audit_id})" in text
    (row,) = result.structured_content["rows"]
    assert row["job_id"] == job_id and row["id"] == audit_id
    # given the audit row's id, trace_job finds the job through it and says which id to use
    traced = by_audit_id.structured_content
    assert traced["id"] == job_id
    assert f"its job_id is {job_id}" in traced["id_note"]
    assert by_audit_id.content[0].text.startswith("note: ")
    assert traced["verdict"]["code"] == "running"


async def test_worker_died_mid_job_is_stalled_never_ok(db, r, outbox_settings, tools_for) -> None:
    job_id = sim.insert_job(db, age_s=1000)
    sim.runner_push_job(db, r, job_id, pushed_age_s=990)
    sim.worker_take(db, r, job_id, QUEUE, age_s=900, lock=False)  # the worker died: its lock expired
    # the runner's clock is in another time zone: updated_at is an hour in the future for the database
    db.execute("UPDATE job_audit SET updated_at = now() + interval '1 hour' WHERE job_id = %s", (job_id,))
    async with tools_for(outbox_settings()) as tools:
        report = await tools.trace_job(job_id)
    assert (report.verdict.code, report.verdict.severity) == ("stalled", "error")
    assert "lock" in report.verdict.sentence and "no worker of queue 'user-queue' is connected" in \
        report.verdict.sentence
    assert hop(report, "bullmq_job").healthy is False
    assert hop(report, "bullmq_job").bull.lock_exists is False


async def test_no_ok_while_a_hop_is_unhealthy(db, r, outbox_settings, tools_for) -> None:
    from tools.outbox.model import Hop
    from tools.outbox.verdicts import overall, verdict

    sick = Hop(name="bullmq_job", ref="bull:q:1", found=True, state="failed", healthy=False, detail="failed")
    fine = Hop(name="job_audit", ref="job_audit 1", found=True, state="COMPLETED", healthy=True, detail="ok")
    assert overall([verdict("ok", "ok", "fine")], "all good", [fine]).code == "ok"
    judged = overall([verdict("ok", "ok", "fine")], "all good", [fine, sick])
    assert judged.code == "inconclusive" and "bullmq_job bull:q:1 is failed" in judged.sentence


async def test_running_job_with_its_lock_is_running(db, r, outbox_settings, tools_for) -> None:
    job_id = sim.insert_job(db, age_s=100)
    sim.runner_push_job(db, r, job_id, pushed_age_s=90)
    sim.worker_take(db, r, job_id, QUEUE, age_s=20)
    async with tools_for(outbox_settings()) as tools:
        report = await tools.trace_job(job_id)
    assert (report.verdict.code, report.verdict.severity) == ("running", "info")
    assert "attempts made 0" in hop(report, "bullmq_job").detail  # no atm yet: 0, not "?"


async def test_named_audit_id_of_other_service_is_found(make_outbox_db, r, outbox_settings, tools_for) -> None:
    other = make_outbox_db()
    with psycopg.connect(other, autocommit=True) as conn:
        job_id = sim.insert_job(conn, age_s=100)
        sim.runner_push_job(conn, r, job_id, pushed_age_s=90)
        sim.worker_take(conn, r, job_id, QUEUE, age_s=10)
        audit_id = str(conn.execute("SELECT id FROM job_audit WHERE job_id = %s", (job_id,)).fetchone()[0])
    settings = outbox_settings(services={"user": {"postgres": make_outbox_db()}, "event": {"postgres": other}})
    async with tools_for(settings) as tools:
        report = await tools.trace_job(audit_id, service=None)
    assert report.id == job_id and report.service == "event" and report.id_note
