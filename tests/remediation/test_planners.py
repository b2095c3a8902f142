"""Each symptom's plan, built from live state and applied against real Redis and PostgreSQL."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import psycopg
import pytest
import redis

from server.approval.audit import audit_log
from server.connections import Connections
from server.errors import InvalidArgument, NotFound
from tests.remediation.conftest import GROUP, STREAM, Poison, approve, event_status, settings_for
from tests.remediation.target_sim import ConsumerThread, LiveConsumer, PostProcessor, new_event, push_event
from tools.remediation.backups import BackupFile, read_backup
from tools.remediation.executor import apply_plan
from tools.remediation.model import SqlRow, SqlUpdateOp, Step
from tools.remediation.planner import Request, propose
from tools.remediation.runners import Drift, RunContext, run_step

DLQ = f"{STREAM}-dlq"


async def _propose(settings, symptom, **kw):
    connections = Connections(settings)
    try:
        return await propose(settings, connections, Request(symptom, kw.get("stream"), kw.get("group"),
                                                            kw.get("service"), kw.get("queue"), kw.get("ids")))
    finally:
        await connections.aclose()


async def _apply(settings, plan):
    connections = Connections(settings)
    try:
        return await apply_plan(settings, connections, plan.plan_id, approve(settings, plan.plan_id))
    finally:
        await connections.aclose()


@pytest.mark.anyio
async def test_replay_rebuilt_from_the_dead_letter_when_the_original_was_trimmed(settings, poison, redis_client):
    redis_client.xdel(STREAM, poison.message_id)
    plan = await _propose(settings, "dlq_replay", stream=STREAM)
    message = plan.steps[1].operation.messages[0]
    assert message.source == "dlq_payload"
    fields = dict(message.fields)
    for name in ("id", "type", "emitter", "correlationId", "traceId"):
        assert fields[name] == str(poison.event[name])
    assert json.loads(fields["event"]) == poison.event
    assert any("trimmed" in n for n in plan.notes)
    poison.fixed = True
    with ConsumerThread(poison.processor):
        report = await _apply(settings, plan)
    assert report.status == "completed", report.summary_text()
    assert poison.processor.processed[-1][1] == poison.event["id"]


@pytest.mark.anyio
async def test_unfixed_replay_stops_keeps_the_dead_letter_and_is_not_replayed_twice(settings, poison, redis_client):
    plan = await _propose(settings, "dlq_replay", stream=STREAM, service="event")
    with ConsumerThread(poison.processor):  # the cause was NOT fixed: the replay fails all over again
        report = await _apply(settings, plan)
    assert report.status == "stopped"
    assert [s.status for s in report.steps[:4]] == ["done", "done", "drift", "not_run"]
    assert "dead-lettered" in report.steps[2].detail
    assert redis_client.xrange(DLQ, poison.dlq_id, poison.dlq_id)  # the original dead letter is kept
    assert redis_client.xlen(DLQ) == 2
    assert event_status(settings.services["event"].postgres, poison.event["id"]) == "FAILED"
    again = await _propose(settings, "dlq_replay", stream=STREAM)
    assert any(poison.dlq_id in w and "not replayed again" in w for w in again.warnings)
    assert [m.dlq_id for m in again.steps[1].operation.messages] != [poison.dlq_id]


@pytest.mark.anyio
async def test_cleanup_only_after_a_confirmed_replay(tmp_path, outbox_db, redis_url, redis_client):
    settings = settings_for(tmp_path, outbox_db, redis_url, limits={"replay_confirm_timeout_ms": 500})
    poison = Poison(redis_client, outbox_db, settings)
    plan = await _propose(settings, "dlq_replay", stream=STREAM)
    poison.fixed = True
    report = await _apply(settings, plan)  # no consumer runs: the replay is not confirmed in time
    assert report.status == "stopped" and "not confirmed" in report.steps[2].detail
    poison.processor.step()  # the consumer comes back and processes the replay
    cleanup = await _propose(settings, "dlq_replay", stream=STREAM)
    assert [s.action for s in cleanup.steps][:2] == ["export", "xdel_dlq"]
    assert any("only its cleanup" in n for n in cleanup.notes)
    assert (await _apply(settings, cleanup)).status == "completed"
    assert redis_client.xlen(DLQ) == 0


def _dead_consumer(client: redis.Redis, count: int) -> list[str]:
    """``count`` entries read by ``pp-dead``, which then stops reading for longer than the 1 s threshold."""
    client.xgroup_create(STREAM, GROUP, id="0", mkstream=True)
    ids = [push_event(client, STREAM, new_event()) for _ in range(count)]
    client.xreadgroup(GROUP, "pp-dead", {STREAM: ">"})
    time.sleep(1.1)
    return ids


@pytest.mark.anyio
async def test_claim_dead_consumer(tmp_path, outbox_db, topology):
    redis_client = topology.client  # on a cluster: the stream and its locks live in different slots
    settings = settings_for(tmp_path, outbox_db, topology.redis, limits={"dead_consumer_idle_ms": 1000})
    m1, m2, m3 = _dead_consumer(redis_client, 3)
    lock = f"idempotency:post-processor:{GROUP}:{m1}"
    redis_client.set(lock, "processing", ex=86400)
    redis_client.xdel(STREAM, m3)  # trimmed: nothing left to process
    with LiveConsumer(redis_client, STREAM, GROUP, "pp-live"):  # alive however slow the machine is
        plan = await _propose(settings, "claim_dead_consumer", stream=STREAM)
        assert [s.action for s in plan.steps] == ["export", "delete_stale_locks", "xclaim", "xack"]
        xclaim = plan.steps[2]
        assert xclaim.command == f"XCLAIM {STREAM} {GROUP} pp-live 1000 {m1} {m2} JUSTID"
        report = await _apply(settings, plan)
    assert report.status == "completed", report.summary_text()
    owners = {p["message_id"].decode(): p["consumer"].decode()
              for p in redis_client.xpending_range(STREAM, GROUP, "-", "+", 10)}
    assert owners == {m1: "pp-live", m2: "pp-live"}
    assert not redis_client.exists(lock)
    backup = read_backup(Path(report.backup_file))
    assert any(r["kind"] == "key" and r["target"] == lock and r["data"]["value"] == "processing" for r in backup)


@pytest.mark.anyio
async def test_clear_stale_lock_lets_the_restart_process_the_message(tmp_path, outbox_db, topology):
    redis_client = topology.client
    settings = settings_for(tmp_path, outbox_db, topology.redis, conventions={"claim_interval_ms": 100})
    handled: list[str] = []
    processor = PostProcessor(redis_client, STREAM, GROUP, "pp-1", lambda e, m: handled.append(e["id"]))
    processor.ensure_group()
    event = new_event()
    message_id = push_event(redis_client, STREAM, event)
    redis_client.xreadgroup(GROUP, "pp-1", {STREAM: ">"})  # read, then Redis went away mid-processing:
    lock = f"idempotency:post-processor:{GROUP}:{message_id}"
    redis_client.set(lock, "processing", ex=86400)  # the lock was never released
    time.sleep(0.15)
    plan = await _propose(settings, "clear_stale_lock", stream=STREAM)
    assert [s.action for s in plan.steps] == ["export", "delete_stale_locks"]
    assert any("restart" in n for n in plan.notes)
    assert (await _apply(settings, plan)).status == "completed"
    processor.restart()
    assert handled == [event["id"]]  # processed, not skipped as "already processed"


def _insert(pg: str, table: str, row_id: str, status: str, *, age_s: int = 0, **extra) -> None:
    cols = {"id": row_id, "status": status, "type": "t", "emitter": "ms-event", **extra}
    if table == "jobs_outbox":
        cols.setdefault("target", "event-queue")
    names = ", ".join(f'"{c}"' for c in cols)
    with psycopg.connect(pg, autocommit=True) as conn:
        conn.execute(f"INSERT INTO {table} ({names}, updated_at) VALUES ({', '.join(['%s'] * len(cols))}, "
                     f"now() - make_interval(secs => %s))", [*cols.values(), age_s])


def _status(pg: str, table: str, row_id: str) -> str:
    with psycopg.connect(pg) as conn:
        return conn.execute(f"SELECT status FROM {table} WHERE id = %s", (row_id,)).fetchone()[0]


@pytest.mark.anyio
async def test_reconcile_outbox(settings, outbox_db):
    e1, e2, j1, j2, ghost = (str(uuid.uuid4()) for _ in range(5))
    _insert(outbox_db, "event_queue", e1, "FAILED")
    _insert(outbox_db, "event_queue", e2, "COMPLETED")
    _insert(outbox_db, "jobs_outbox", j1, "FAILED")
    _insert(outbox_db, "jobs_outbox", j2, "FAILED")
    with psycopg.connect(outbox_db, autocommit=True) as conn:
        conn.execute("INSERT INTO job_audit (job_id, job_type, status, emitter) VALUES (%s, 't', 'COMPLETED', "
                     "'ms-event'), (%s, 't', 'FAILED', 'ms-event')", (j1, j2))
    plan = await _propose(settings, "reconcile_outbox", service="event", ids=[e1, e2, j1, j2, ghost])
    assert [s.operation.table for s in plan.steps] == ["event_queue", "jobs_outbox"]
    assert [r.id for r in plan.steps[1].operation.rows] == [j1]
    assert any(j2 in w and "did not succeed" in w for w in plan.warnings)
    assert any(ghost in w for w in plan.warnings)
    assert plan.steps[0].params == [["COMPLETED", e1, "FAILED"]]
    report = await _apply(settings, plan)
    assert report.status == "completed"
    assert [_status(outbox_db, t, i) for t, i in
            (("event_queue", e1), ("event_queue", e2), ("jobs_outbox", j1), ("jobs_outbox", j2))] == [
        "COMPLETED", "COMPLETED", "COMPLETED", "FAILED"]


@pytest.mark.anyio
async def test_reconcile_drift_updates_nothing(settings, outbox_db):
    e1, e2 = str(uuid.uuid4()), str(uuid.uuid4())
    _insert(outbox_db, "event_queue", e1, "FAILED")
    _insert(outbox_db, "event_queue", e2, "FAILED")
    plan = await _propose(settings, "reconcile_outbox", service="event", ids=[e1, e2])
    with psycopg.connect(outbox_db, autocommit=True) as conn:
        conn.execute("UPDATE event_queue SET status = 'PENDING' WHERE id = %s", (e2,))
    report = await _apply(settings, plan)
    assert report.status == "stopped" and "now PENDING" in report.steps[0].detail
    assert _status(outbox_db, "event_queue", e1) == "FAILED"


@pytest.mark.anyio
async def test_sql_step_is_one_transaction(settings, outbox_db, tmp_path):
    """A guard failing on the second row rolls the first row back too (runner called directly)."""
    e1, e2 = str(uuid.uuid4()), str(uuid.uuid4())
    _insert(outbox_db, "event_queue", e1, "FAILED")
    _insert(outbox_db, "event_queue", e2, "PENDING")
    op = SqlUpdateOp(service="event", table="event_queue", set_status="COMPLETED", expect_status="FAILED",
                     rows=[SqlRow(id=e1), SqlRow(id=e2)])
    step = Step(number=1, action="reconcile_sql", description="", command="", target="", precondition="",
                backup=None, reversible=True, operation=op)
    connections = Connections(settings)
    try:
        ctx = RunContext(settings, connections, BackupFile(tmp_path / "b.jsonl", "p", "h"), {},
                         audit_log(settings), "test")
        with pytest.raises(Drift, match="rolled back"):
            await run_step(ctx, step)
    finally:
        await connections.aclose()
    assert _status(outbox_db, "event_queue", e1) == "FAILED"
    assert len(read_backup(tmp_path / "b.jsonl")) == 2  # both rows were backed up before the UPDATEs


@pytest.mark.anyio
async def test_requeue_stuck_job(tmp_path, outbox_db, topology):
    redis_client = topology.client
    settings = settings_for(tmp_path, outbox_db, topology.redis)
    pushed, lost, recent = (str(uuid.uuid4()) for _ in range(3))
    for row_id, age in ((pushed, 900), (lost, 900), (recent, 5)):
        _insert(outbox_db, "jobs_outbox", row_id, "PROCESSING", age_s=age)
    redis_client.hset(f"bull:event-queue:{pushed}", mapping={"name": "t", "data": "{}"})
    redis_client.lpush("bull:event-queue:wait", pushed)
    plan = await _propose(settings, "requeue_stuck_job", service="event")
    assert plan.candidates_found == 2  # the recent one is not stuck
    assert [(s.operation.set_status, [r.id for r in s.operation.rows]) for s in plan.steps] == [
        ("COMPLETED", [pushed]), ("PENDING", [lost])]
    assert plan.steps[0].command.endswith('AND "updated_at" = $4')
    report = await _apply(settings, plan)
    assert report.status == "completed"
    assert [_status(outbox_db, "jobs_outbox", i) for i in (pushed, lost, recent)] == [
        "COMPLETED", "PENDING", "PROCESSING"]


@pytest.mark.anyio
async def test_retry_failed_bullmq_job(settings, redis_client):
    q = "bull:event-queue"
    redis_client.hset(f"{q}:meta", mapping={"version": "bullmq:5.12.1", "opts.maxLenEvents": "10000"})
    redis_client.hset(f"{q}:j1", mapping={
        "name": "events.geocode_event", "data": "{}", "opts": json.dumps({"attempts": 3}), "attemptsMade": "3",
        "failedReason": "geocoder down", "processedOn": "1", "finishedOn": "2", "stacktrace": "[]"})
    redis_client.zadd(f"{q}:failed", {"j1": 2})
    plan = await _propose(settings, "retry_failed_job", queue="event-queue")
    assert plan.steps[0].command.splitlines() == [
        "MULTI", f"ZREM {q}:failed j1", f"HDEL {q}:j1 finishedOn processedOn failedReason", f"LPUSH {q}:wait j1",
        f"ZADD {q}:marker 0 0", f"XADD {q}:events MAXLEN ~ 10000 * event waiting jobId j1 prev failed", "EXEC"]
    assert any("used its 3 attempts" in n for n in plan.notes)
    report = await _apply(settings, plan)
    assert report.status == "completed"
    assert redis_client.zscore(f"{q}:failed", "j1") is None
    assert redis_client.lrange(f"{q}:wait", 0, -1) == [b"j1"]
    job = redis_client.hgetall(f"{q}:j1")
    assert b"failedReason" not in job and job[b"attemptsMade"] == b"3"
    assert redis_client.xrange(f"{q}:events")[-1][1][b"event"] == b"waiting"
    backup = read_backup(Path(report.backup_file))
    assert backup[0]["data"]["hash"]["failedReason"] == "geocoder down"


@pytest.mark.anyio
async def test_arguments_are_validated(settings, redis_client):
    redis_client.xgroup_create(STREAM, "g1", id="0", mkstream=True)
    redis_client.xgroup_create(STREAM, "g2", id="0")
    cases = [
        (dict(symptom="fix_everything"), InvalidArgument, "unknown symptom"),
        (dict(symptom="dlq_replay"), InvalidArgument, "needs stream"),
        (dict(symptom="dlq_replay", stream=STREAM, ids=["nope"]), InvalidArgument, "stream entry ids"),
        (dict(symptom="dlq_replay", stream=STREAM, ids=[f"{i}-0" for i in range(101)]), InvalidArgument,
         "at most 100"),
        (dict(symptom="reconcile_outbox", service="event"), InvalidArgument, "needs ids"),
        (dict(symptom="reconcile_outbox", service="nope", ids=[str(uuid.uuid4())]), InvalidArgument,
         "unknown service"),
        (dict(symptom="dlq_replay", stream=STREAM), InvalidArgument, "several consumer groups"),
        (dict(symptom="dlq_replay", stream="stream:nope"), NotFound, "no stream"),
        (dict(symptom="dlq_replay", stream=STREAM, group="g1"), NotFound, "no dead letter"),
    ]
    for kw, error, text in cases:
        symptom = kw.pop("symptom")
        with pytest.raises(error, match=text):
            await _propose(settings, symptom, **kw)
    assert not (settings.resolved_state_dir / "plans").exists()  # no plan was written


@pytest.mark.anyio
async def test_plan_cap(tmp_path, outbox_db, redis_url, redis_client):
    settings = settings_for(tmp_path, outbox_db, redis_url, limits={"max_plan_messages": 2})
    processor = PostProcessor(redis_client, STREAM, GROUP, "pp-1", lambda e, m: (_ for _ in ()).throw(ValueError()))
    processor.ensure_group()
    for _ in range(3):
        push_event(redis_client, STREAM, new_event())
    processor.run_until(lambda: redis_client.xlen(DLQ) == 3)
    plan = await _propose(settings, "dlq_replay", stream=STREAM)
    assert plan.truncated and plan.candidates_found == 3 and plan.blast_radius.messages == 2
    assert plan.plan_sha256 == plan.content_hash()
