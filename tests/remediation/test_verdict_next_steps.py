"""Issue 31, item 4: every verdict whose next step names a ``propose_remediation`` symptom gets a plan for that
very item from that symptom. Each state is real (a database built by the migration chain, written the way the
services, runners and workers write; a real Redis), each verdict comes from ``trace_job`` / ``trace_event``
through an MCP client, and the symptom its next step names is then proposed through the same client."""

from __future__ import annotations

import json
import re
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest

from server.config import Settings, load_settings
from tests.helpers import in_process_client
from tests.outbox import migration_chain as mc
from tests.outbox import sim
from tests.remediation.conftest import approve
from tools.outbox.model import VerdictCode

pytestmark = pytest.mark.anyio

SYMPTOM = re.compile(r"propose_remediation\(symptom='(\w+)'")
GROUP = "post-processors"


def settings_for(tmp_path: Path, url: str, redis_url: str) -> Settings:
    return load_settings(environ={}, overrides={
        "state_dir": str(tmp_path / "state"), "services": {"event": {"postgres": url}}, "redis": {"url": redis_url},
        "enable_remediation": True, "approval": {"secret_file": str(tmp_path / "secret" / "approval.key")},
        "limits": {"dead_consumer_idle_ms": 1000}, "conventions": {"claim_interval_ms": 100}})


def chain_db(make_pg_db, upto: str) -> str:
    url = make_pg_db()
    mc.apply_chain(url, upto)
    return url


async def walk(client: Any, tool: str, item: str, code: VerdictCode, args: dict[str, Any],
               meanwhile: Any = None) -> dict[str, Any]:
    """Trace ``item``, expect ``code``, propose the symptom its next step names with ``args``; the plan.

    ``meanwhile`` runs between the two (what the world does in the meantime)."""
    key = "job_id" if tool == "trace_job" else "event_id"
    traced = await client.call_tool(tool, {key: item, "service": "event"})
    assert not traced.is_error, traced.content[0].text
    verdict = traced.structured_content["verdict"]
    assert verdict["code"] == code, verdict
    named = SYMPTOM.findall(verdict["next_step"])
    assert len(named) == 1, verdict["next_step"]
    if meanwhile is not None:
        meanwhile()
    proposed = await client.call_tool("propose_remediation", {"symptom": named[0], "detail": "full", **args})
    assert not proposed.is_error, f"{code} -> {named[0]}: {proposed.content[0].text}"
    plan = proposed.structured_content
    assert plan["symptom"] == named[0] and plan["steps"], plan
    return plan


async def apply(client: Any, settings: Settings, plan: dict[str, Any]) -> dict[str, Any]:
    token = approve(settings, plan["plan_id"])
    applied = await client.call_tool("apply_remediation", {"plan_id": plan["plan_id"], "approval_token": token})
    assert not applied.is_error, applied.content[0].text
    report = applied.structured_content
    assert report["status"] == "completed", report
    return report


def backed_up(settings: Settings, plan: dict[str, Any]) -> list[dict[str, Any]]:
    from tools.remediation.backups import backup_path, read_backup

    return read_backup(backup_path(settings, plan["plan_id"]))


def ids_in(plan: dict[str, Any]) -> set[str]:
    out: set[str] = set()
    for step in plan["steps"]:
        op = step["operation"]
        out |= {r["id"] for r in op.get("rows", [])} | set(op.get("ids", [])) | set(op.get("job_ids", []))
    return out


def pushed_job(conn: psycopg.Connection, r: Any, age_s: float = 1000) -> str:
    job_id = mc.service_write_job(conn, age_s=age_s)
    conn.execute("UPDATE jobs_outbox SET status = 'PROCESSING', updated_at = now() - make_interval(secs => %s) "
                 "WHERE id = %s", (age_s - 5, job_id))
    mc.runner_push_job(conn, r, job_id)
    return job_id


async def test_job_verdicts_lead_to_plans_for_their_job(tmp_path: Path, make_pg_db, redis_url: str,
                                                        redis_client) -> None:
    url = chain_db(make_pg_db, mc.LATEST)
    r = redis_client
    with psycopg.connect(url, autocommit=True) as conn:
        gave_up = mc.service_write_job(conn, age_s=600)
        conn.execute("""UPDATE jobs_outbox SET status = 'FAILED', "lastError" = 'ECONNREFUSED' WHERE id = %s""",
                     (gave_up,))
        claimed = mc.service_write_job(conn, age_s=1000)
        conn.execute("UPDATE jobs_outbox SET status = 'PROCESSING', updated_at = now() - interval '900 seconds' "
                     "WHERE id = %s", (claimed,))
        lost = pushed_job(conn, r)
        mc.worker_start(conn, None, lost, started_age_s=900)  # the worker died; then BullMQ lost the job
        r.delete(f"{mc.BULL}:{mc.QUEUE}:{lost}")
        r.lrem(f"{mc.BULL}:{mc.QUEUE}:wait", 0, lost)
        stalled = pushed_job(conn, r)
        mc.worker_start(conn, r, stalled, started_age_s=900)
        r.delete(f"{mc.BULL}:{mc.QUEUE}:{stalled}:lock")  # its worker died: the lock expired
        failed = pushed_job(conn, r)
        mc.run_failing_job(conn, r, failed, "geocoder said 500")
        done = pushed_job(conn, r)
        mc.worker_start(conn, r, done, started_age_s=5)
        assert mc.worker_succeed(conn, r, done) is None
        (success,) = [e for e in mc.outcome_rows(conn, done) if e["type"].endswith(":success")]
        mc.runner_claim_events(conn)
        ((stream, _entry),) = mc.runner_push_event(conn, r, str(success["id"]))
        assert mc.group_consume(r, stream, GROUP)  # delivered and acknowledged; nobody deleted the outbox row
        conn.execute("UPDATE job_audit SET started_at = now() - interval '900 seconds' WHERE job_id = %s", (done,))
    settings = settings_for(tmp_path, url, redis_url)
    async with in_process_client(settings) as client:
        ev = {"service": "event"}
        plan = await walk(client, "trace_job", gave_up, "pending_in_outbox", {**ev, "ids": [gave_up]})
        assert ids_in(plan) == {gave_up} and plan["steps"][0]["params"][0][0] == "PENDING"
        plan = await walk(client, "trace_job", claimed, "stuck_processing", {**ev, "ids": [claimed]})
        assert ids_in(plan) == {claimed}
        plan = await walk(client, "trace_job", lost, "stuck_processing", {**ev, "ids": [lost]})
        assert ids_in(plan) == {lost} and plan["steps"][0]["params"][0][:3] == ["PENDING", lost, "COMPLETED"]
        plan = await walk(client, "trace_job", stalled, "stalled", {**ev, "ids": [stalled]})
        assert ids_in(plan) == {stalled} and plan["steps"][0]["action"] == "bullmq_requeue_stalled"
        await apply(client, settings, plan)
        assert r.lrange(f"{mc.BULL}:{mc.QUEUE}:active", 0, -1) == []
        assert stalled.encode() in r.lrange(f"{mc.BULL}:{mc.QUEUE}:wait", 0, -1)
        assert [b["kind"] for b in backed_up(settings, plan)] == ["bull_job"]
        plan = await walk(client, "trace_job", failed, "handler_failed", {"queue": mc.QUEUE, "ids": [failed]})
        assert ids_in(plan) == {failed}
        plan = await walk(client, "trace_job", done, "success_not_cleaned", {**ev, "ids": [done]})
        assert ids_in(plan) == {done} and plan["steps"][0]["action"] == "delete_sql"
        assert plan["steps"][0]["command"].startswith('DELETE FROM "jobs_outbox"')
        await apply(client, settings, plan)
    (record,) = backed_up(settings, plan)
    assert record["kind"] == "sql_row" and record["data"]["row"]["id"] == done
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT count(*) FROM jobs_outbox WHERE id = %s", (done,)).fetchone() == (0,)


def push_event(conn: psycopg.Connection, r: Any, target: str) -> tuple[str, str, str]:
    event_id = str(uuid.uuid4())
    conn.execute("""INSERT INTO event_queue (id, type, emitter, "emitterId", payload, target_services)
                    VALUES (%s, 'event.created', 'ms-event', %s, %s, %s)""",
                 (event_id, str(uuid.uuid4()), json.dumps({"eventId": event_id}), [target]))
    mc.runner_claim_events(conn)
    ((stream, entry),) = mc.runner_push_event(conn, r, event_id)
    return event_id, stream, entry


async def test_event_verdicts_lead_to_plans_for_their_message(tmp_path: Path, make_pg_db, redis_url: str,
                                                              redis_client) -> None:
    url = chain_db(make_pg_db, mc.LATEST)
    r = redis_client
    with psycopg.connect(url, autocommit=True) as conn:
        gave_up = str(uuid.uuid4())
        conn.execute("""INSERT INTO event_queue (id, type, emitter, "emitterId", payload, target_services, status,
                                                 "lastError")
                        VALUES (%s, 'event.created', 'ms-event', %s, '{}', '{ms-social}', 'FAILED', 'NOAUTH')""",
                     (gave_up, str(uuid.uuid4())))
        dead_letter, dlq_stream, dlq_entry = push_event(conn, r, "ms-poison")
        sim.ensure_group(r, dlq_stream, GROUP)
        sim.consumer_read(r, dlq_stream, GROUP, "c1")
        sim.consumer_dead_letter(r, dlq_stream, GROUP, dlq_entry, "boom")
        orphan, dead_stream, dead_entry = push_event(conn, r, "ms-dead")
        sim.ensure_group(r, dead_stream, GROUP)
        sim.consumer_read(r, dead_stream, GROUP, "gone")
        locked, lock_stream, lock_entry = push_event(conn, r, "ms-lock")
        sim.ensure_group(r, lock_stream, GROUP)
        sim.consumer_read(r, lock_stream, GROUP, "c1")
        sim.consumer_lock_during_outage(r, GROUP, lock_entry)
    time.sleep(1.1)  # the consumers' idle time passes dead_consumer_idle_ms, the PEL entries claim_interval_ms

    def live_consumer() -> None:  # a consumer of the group that reads: the dead one's entry is claimed to it
        r.xadd(dead_stream, {"id": str(uuid.uuid4()), "type": "event.created"})
        sim.consumer_read(r, dead_stream, GROUP, "alive")
    async with in_process_client(settings_for(tmp_path, url, redis_url)) as client:
        plan = await walk(client, "trace_event", orphan, "dead_consumer",
                          {"stream": dead_stream, "group": GROUP, "ids": [dead_entry]}, live_consumer)
        assert dead_entry in json.dumps(plan["steps"])
        plan = await walk(client, "trace_event", gave_up, "event_pending", {"service": "event", "ids": [gave_up]})
        assert ids_in(plan) == {gave_up} and plan["steps"][0]["params"][0][0] == "PENDING"
        plan = await walk(client, "trace_event", dead_letter, "in_dlq",
                          {"stream": dlq_stream, "group": GROUP, "ids": [dlq_entry]})
        assert dlq_entry in json.dumps(plan["steps"])
        plan = await walk(client, "trace_event", locked, "idempotency_lock_stale",
                          {"stream": lock_stream, "group": GROUP, "ids": [lock_entry]})
        assert lock_entry in json.dumps(plan["steps"])


async def test_audit_not_closed_leads_to_closing_the_audit_row_once_the_trigger_is_fixed(
    tmp_path: Path, make_pg_db, redis_url: str, redis_client
) -> None:
    url = chain_db(make_pg_db, mc.RAISING)
    with psycopg.connect(url, autocommit=True) as conn:
        job_id = pushed_job(conn, redis_client)
        mc.worker_start(conn, redis_client, job_id, started_age_s=900)
        assert mc.worker_succeed(conn, redis_client, job_id) is not None
    settings = settings_for(tmp_path, url, redis_url)
    async with in_process_client(settings) as client:
        args = {"symptom": "reconcile_outbox", "service": "event", "ids": [job_id]}
        refused = await client.call_tool("propose_remediation", args)
        assert refused.is_error and '"emitterId"' in refused.content[0].text  # the trigger still raises: no plan
        with psycopg.connect(url, autocommit=True) as conn:  # the migration doctor names
            for statement in mc.up_statements(mc.MIGRATIONS_DIR / f"{mc.V3}.ts"):
                conn.execute(statement)
        plan = await walk(client, "trace_job", job_id, "audit_not_closed", {"service": "event", "ids": [job_id]})
        (step,) = plan["steps"]
        assert step["target"] == "event.job_audit" and step["params"][0][0] == "COMPLETED"
        assert {c["kind"] for c in step["checks"]} == {"row_matches", "key_unchanged"}
        await apply(client, settings, plan)
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT status FROM job_audit WHERE job_id = %s", (job_id,)).fetchone() == ("COMPLETED",)
        (event,) = mc.outcome_rows(conn, job_id)  # the fixed trigger wrote the success event
        assert event["type"] == "event:job:outbox:success" and str(event["emitterId"]) == job_id
