"""Promise: a plan follows the team's runbook, never deletes without a backup and preconditions, and
records each precondition with the values it was planned on.

The runbook (``target-system.md``, "Remediation runbook, in order"; ``seeds/skill-async-remediation``):
export what is about to be touched first, claim (XCLAIM from a dead consumer, idle longer than the
threshold) or acknowledge, clear a stale lock before the re-read, replay, confirm the replay was
processed, only then XDEL from the DLQ, delete the retry keys and ZREM the retry queue, and reconcile
the SQL rows with guarded UPDATEs. Every plan built here (real Redis and PostgreSQL) goes through
:func:`assert_safe`: each destructive step has a backup and machine preconditions, and comes after
the export of what it deletes. The precondition arguments are compared whole, values included (the
pending entry's owner *and* its idle time, the key digests, the confirm step).
"""

from __future__ import annotations

import json
import time
import uuid
from datetime import datetime, timedelta

import psycopg
import pytest
import redis

from server.connections import Connections
from server.errors import NotFound
from tests.remediation.conftest import GROUP, STREAM, Poison, settings_for
from tests.remediation.target_sim import LiveConsumer, new_event, push_event
from tools.remediation import redis_reads as rr
from tools.remediation import store
from tools.remediation.model import Check, Plan
from tools.remediation.planner import Request, propose
from tools.streams.keys import idempotency_key, retry_attempt_key, retry_key, retry_last_error_key, retry_queue_key

pytestmark = pytest.mark.anyio

DLQ = f"{STREAM}-dlq"
DESTRUCTIVE = {"xdel_dlq", "delete_retry_keys", "zrem_retry_queue", "delete_stale_locks", "xclaim", "xack",
               "reconcile_sql", "requeue_sql", "bullmq_retry"}
DEAD_MS = 2500  # dead-consumer threshold: sleeps only age past it, live consumers beat every 50 ms
SQL_BACKUP = "every column of each row, read inside the transaction before the UPDATE"
STREAM_CHANGES = {"xdel_dlq", "delete_stale_locks", "xclaim", "xack"}


def assert_safe(plan: Plan) -> None:
    """No destructive step without a backup and preconditions; stream changes only after the export."""
    actions = [s.action for s in plan.steps]
    assert [s.number for s in plan.steps] == list(range(1, len(plan.steps) + 1))
    for step in plan.steps:
        if step.action in DESTRUCTIVE:
            assert step.backup, f"step {step.number} ({step.action}) has no backup"
            assert step.checks, f"step {step.number} ({step.action}) has no precondition"
            assert step.precondition
        if step.action in STREAM_CHANGES:
            assert "export" in actions[: step.number - 1], f"step {step.number} ({step.action}) before the export"
    assert plan.plan_sha256 == plan.content_hash()


async def _propose(settings, symptom, **kw) -> Plan:
    connections = Connections(settings)
    try:
        plan = await propose(settings, connections, Request(symptom, kw.get("stream"), kw.get("group"),
                                                            kw.get("service"), kw.get("queue"), kw.get("ids")))
    finally:
        await connections.aclose()
    assert_safe(plan)
    return plan


def texts(plan: Plan) -> list[tuple]:
    """What the human approves, per step: action, description, target, precondition, backup, reversible."""
    return [(s.action, s.description, s.target, s.precondition, s.backup, s.reversible) for s in plan.steps]


def _check(kind: str, **args) -> Check:
    return Check(kind=kind, args=args)


async def test_dlq_replay_plan_is_the_runbook_in_order_with_its_values(settings, poison: Poison, redis_client) -> None:
    conv = settings.conventions
    mid = poison.message_id
    lock = idempotency_key(conv, GROUP, mid)
    redis_client.set(lock, "processing", ex=600)
    queue = retry_queue_key(conv, GROUP)
    redis_client.zadd(queue, {mid: 1})
    dlq_digest = rr.digest(rr.fields_pairs(redis_client.xrange(DLQ)[0][1]))
    retry_keys = [k for k in (retry_key(conv, GROUP, mid), retry_attempt_key(conv, GROUP, mid),
                              retry_last_error_key(conv, GROUP, mid), lock) if redis_client.exists(k)]
    assert lock in retry_keys and retry_attempt_key(conv, GROUP, mid) in retry_keys
    digests = {}
    async_redis = redis.asyncio.Redis.from_url(settings.redis.url)
    try:
        for k in retry_keys:
            digests[k] = (await rr.key_snapshot(async_redis, k)).digest
    finally:
        await async_redis.aclose()

    plan = await _propose(settings, "dlq_replay", stream=STREAM, service="event")
    assert [s.action for s in plan.steps] == [
        "export", "replay", "confirm_replay", "xdel_dlq", "delete_retry_keys", "zrem_retry_queue", "reconcile_sql"]
    export, replay, confirm, xdel, delete, zrem, sql = plan.steps
    assert texts(plan) == [
        ("export", f"save 1 dead letter(s) of {DLQ} and 1 original(s) to the backup file", DLQ,
         "each dead letter is still in the DLQ, unchanged", "the dead letters and the original entries, exact fields",
         True),
        ("replay", f"XADD 1 message(s) back into {STREAM} with their original fields", STREAM,
         "the dead letters are unchanged, and the cause of the failure was fixed (runbook step 3)", None, False),
        ("confirm_replay", f"wait until group {GROUP} has processed every replay (acknowledged, not dead-lettered)",
         f"{STREAM} group {GROUP}", "step 2 added the replays", None, True),
        ("xdel_dlq", f"delete the 1 handled dead letter(s) from {DLQ}", DLQ,
         "the replays were processed (previous step) and the dead letters are unchanged",
         "each dead letter's exact fields, read back before the XDEL", False),
        ("delete_retry_keys", f"delete {len(retry_keys)} retry/idempotency key(s) of group {GROUP}",
         ", ".join(retry_keys), "each key unchanged (or expired)",
         "type, value, TTL and DUMP of each key (RESTORE-able)", True),
        ("zrem_retry_queue", f"remove 1 message(s) from {queue}", queue, "still scheduled (or gone)",
         "each member with its score", True),
        ("reconcile_sql", "event_queue: 1 row(s) FAILED -> COMPLETED (replay confirmed), one transaction",
         "event.event_queue", "each row still FAILED", SQL_BACKUP, True),
    ]
    unchanged = _check("entry_unchanged", key=DLQ, id=poison.dlq_id, digest=dlq_digest)
    confirmed = _check("step_ok", step=3, output_key="confirmed")
    assert [(e.key, e.id) for e in export.operation.entries] == [(DLQ, poison.dlq_id), (STREAM, mid)]
    assert export.checks == [unchanged] and export.reversible
    assert replay.checks == [unchanged, _check("step_ok", step=1, output_key=None)] and not replay.reversible
    assert replay.operation.stream == STREAM and replay.operation.maxlen == conv.stream_maxlen
    assert [(m.dlq_id, m.message_id, m.source) for m in replay.operation.messages] == [(poison.dlq_id, mid, "stream")]
    assert confirm.checks == [_check("step_ok", step=2, output_key=None)]
    assert (confirm.operation.replay_step, confirm.operation.group) == (2, GROUP)
    assert confirm.operation.timeout_ms == settings.limits.replay_confirm_timeout_ms
    assert xdel.checks == [unchanged, confirmed] and xdel.operation.ids == [poison.dlq_id] and not xdel.reversible
    assert delete.operation.keys == retry_keys
    assert delete.checks == [_check("key_unchanged", key=k, digest=digests[k], allow_missing=True)
                             for k in retry_keys] + [confirmed]
    assert zrem.operation.key == queue and zrem.operation.members == [mid]
    assert zrem.checks == [_check("zset_member", key=queue, member=mid, allow_missing=True), confirmed]
    assert sql.checks == [_check("row_matches", service="event", table="event_queue", id=poison.event["id"],
                                 status="FAILED", updated_at=None), confirmed]
    assert sql.params == [["COMPLETED", poison.event["id"], "FAILED"]]
    br = plan.blast_radius
    assert (br.messages, br.rows, br.keys) == (1, 1, len(retry_keys) + 1)
    assert br.streams == sorted([STREAM, DLQ]) and br.tables == ["event.event_queue"]
    assert br.consumer_groups_reached == [GROUP]
    assert plan.summary == (f"replay 1 dead letter(s) of {DLQ} into {STREAM} for group {GROUP}, then clean up "
                            "1 dead letter(s) and their retry bookkeeping")
    assert plan.candidates_found == 1 and not plan.truncated and plan.warnings == []
    assert ("runbook step 3: approve only once the cause of the failure is fixed; an unfixed replay fails again, "
            "the confirm step then stops the plan and the dead letter is kept") in plan.notes  # what the human reads
    assert "runbook step 6: record the lesson once the incident is closed" in plan.notes
    assert plan.inputs == {"stream": STREAM, "group": None, "service": "event", "queue": None, "ids": None}
    assert not any(n.startswith("Redis Cluster") for n in plan.notes)  # slots are reviewed on a cluster only


async def test_a_replay_reaches_every_group_and_says_so(settings, poison: Poison, redis_client) -> None:
    redis_client.xgroup_create(STREAM, "audit", id="0")
    plan = await _propose(settings, "dlq_replay", stream=STREAM, group=GROUP)
    assert plan.blast_radius.consumer_groups_reached == sorted(["audit", GROUP])
    assert any("delivered to every group" in w and "not only pp-event" in w for w in plan.warnings)


async def test_dead_letters_picked_by_entry_id_or_by_message_id(settings, poison: Poison, redis_client) -> None:
    by_dlq_id = await _propose(settings, "dlq_replay", stream=STREAM, ids=[poison.dlq_id])
    by_message = await _propose(settings, "dlq_replay", stream=STREAM, ids=[poison.message_id, "1-1"])
    for plan in (by_dlq_id, by_message):
        first = plan.steps[0].operation.entries[0]
        assert (first.key, first.id) == (DLQ, poison.dlq_id)
    assert by_message.warnings == [f"1-1 is neither an entry id nor a messageId of {DLQ}"]
    with pytest.raises(NotFound, match=f"no dead letter to replay in {DLQ}"):
        await _propose(settings, "dlq_replay", stream=STREAM, ids=["1-1"])
    # the DLQ key itself names the same stream
    assert (await _propose(settings, "dlq_replay", stream=DLQ)).steps[1].operation.stream == STREAM


def _dead_and_live(client: redis.Redis, count: int, threshold_s: float) -> list[str]:
    client.xgroup_create(STREAM, GROUP, id="0", mkstream=True)
    ids = [push_event(client, STREAM, new_event()) for _ in range(count)]
    client.xreadgroup(GROUP, "pp-dead", {STREAM: ">"})
    time.sleep(threshold_s + 0.1)
    return ids


async def test_claim_records_each_entry_s_owner_and_idle_time(tmp_path, outbox_db, redis_url, redis_client) -> None:
    settings = settings_for(tmp_path, outbox_db, redis_url, limits={"dead_consumer_idle_ms": DEAD_MS})
    m1, m2, m3 = _dead_and_live(redis_client, 3, DEAD_MS / 1000)
    lock = idempotency_key(settings.conventions, GROUP, m1)
    redis_client.set(lock, "processing", ex=600)
    with pytest.raises(NotFound, match="every consumer of group pp-event is idle more than 2500 ms"):
        await _propose(settings, "claim_dead_consumer", stream=STREAM)
    with LiveConsumer(redis_client, STREAM, GROUP, "pp-live"):
        plan = await _propose(settings, "claim_dead_consumer", stream=STREAM)
        picked = await _propose(settings, "claim_dead_consumer", stream=STREAM, ids=[m2, "1-1"])
    owner = {m: _check("pending_owner", stream=STREAM, group=GROUP, id=m, consumer="pp-dead", min_idle_ms=DEAD_MS)
             for m in (m1, m2, m3)}
    assert [s.action for s in plan.steps] == ["export", "delete_stale_locks", "xclaim"]
    export, locks, claim = plan.steps
    assert texts(plan) == [
        ("export", f"save 3 pending entr(ies) of group {GROUP} and their messages", f"{STREAM} group {GROUP}",
         "each entry still pending at the same consumer", "the pending entries (owner, idle, deliveries) and message "
         "fields", True),
        ("delete_stale_locks", "delete 1 stale idempotency lock(s) so the re-read is not skipped as done", lock,
         "each lock unchanged and its message still pending at the same consumer",
         "value and TTL of each lock (RESTORE-able)", True),
        ("xclaim", "claim 3 entr(ies) to live consumer pp-live", f"{STREAM} group {GROUP}",
         f"still pending at their owner and idle >= {DEAD_MS} ms; pp-live still alive",
         "the pending entries (owner, idle, deliveries)", True),
    ]
    assert export.checks == [owner[m1], owner[m2], owner[m3]]
    assert [(p.stream, p.group, p.id) for p in export.operation.pending] == [(STREAM, GROUP, m) for m in (m1, m2, m3)]
    assert locks.operation.keys == [lock] and locks.checks[1:] == [owner[m1], owner[m2], owner[m3]]
    assert locks.checks[0].kind == "key_unchanged" and locks.checks[0].args["allow_missing"] is True
    assert (claim.operation.consumer, claim.operation.min_idle_ms, claim.operation.ids) == ("pp-live", DEAD_MS,
                                                                                            [m1, m2, m3])
    live = _check("consumer_live", stream=STREAM, group=GROUP, consumer="pp-live", max_idle_ms=DEAD_MS)
    assert claim.checks == [owner[m1], owner[m2], owner[m3], live]
    assert "idle >= 2500 ms; pp-live still alive" in claim.precondition
    assert (plan.blast_radius.messages, plan.blast_radius.keys) == (3, 1)
    assert plan.summary == f"move 3 entr(ies) of group {GROUP} from dead consumer(s) pp-dead to pp-live"
    assert plan.candidates_found == 3
    assert [s.action for s in picked.steps] == ["export", "xclaim"]
    assert picked.steps[1].operation.ids == [m2]
    assert picked.warnings == [f"1-1 is not pending in group {GROUP}"]


async def test_claim_skips_entries_of_live_consumers_and_acks_trimmed_ones(tmp_path, outbox_db, redis_url,
                                                                           redis_client) -> None:
    settings = settings_for(tmp_path, outbox_db, redis_url, limits={"dead_consumer_idle_ms": DEAD_MS})
    m1, m2 = _dead_and_live(redis_client, 2, DEAD_MS / 1000)
    redis_client.xdel(STREAM, m2)
    with LiveConsumer(redis_client, STREAM, GROUP, "pp-live") as live:
        mine = push_event(redis_client, STREAM, new_event())
        redis_client.xreadgroup(GROUP, "pp-busy", {STREAM: ">"}, count=1)  # takes `mine`, stays live below
        live.beat()
        with pytest.raises(NotFound, match="idle more than 2500 ms holds pending entries"):
            await _propose(settings, "claim_dead_consumer", stream=STREAM, ids=[mine])
        redis_client.xreadgroup(GROUP, "pp-busy", {STREAM: ">"}, count=1)
        plan = await _propose(settings, "claim_dead_consumer", stream=STREAM, ids=[m1, m2, mine])
    assert any(f"{mine} is pending at pp-busy, which is not a dead consumer: skipped" == w for w in plan.warnings)
    assert [s.action for s in plan.steps] == ["export", "xclaim", "xack"]
    export, claim, ack = plan.steps
    assert texts(plan)[2] == ("xack", "acknowledge 1 entr(ies) whose message was trimmed", f"{STREAM} group {GROUP}",
                              "still pending (nothing left to process: trimmed)", "the pending entries", False)
    assert claim.operation.consumer in ("pp-live", "pp-busy")  # the most recently active live consumer
    assert [e.id for e in export.operation.entries] == [m1]  # the trimmed one has no message to save
    assert [p.id for p in export.operation.pending] == [m1, m2]
    assert claim.operation.ids == [m1] and ack.operation.ids == [m2]
    assert ack.checks == [_check("pending_owner", stream=STREAM, group=GROUP, id=m2, consumer="pp-dead",
                                 min_idle_ms=DEAD_MS)]
    assert not ack.reversible and ack.backup
    assert plan.blast_radius.messages == 2


async def test_no_dead_consumer_nothing_to_claim(tmp_path, outbox_db, redis_url, redis_client) -> None:
    settings = settings_for(tmp_path, outbox_db, redis_url, limits={"dead_consumer_idle_ms": 60_000})
    _dead_and_live(redis_client, 1, 0.0)
    with pytest.raises(NotFound, match="no consumer of group pp-event idle more than 60000 ms holds pending"):
        await _propose(settings, "claim_dead_consumer", stream=STREAM)


async def test_stale_lock_plan_records_lock_digest_and_claim_interval(tmp_path, outbox_db, redis_url,
                                                                      redis_client) -> None:
    settings = settings_for(tmp_path, outbox_db, redis_url, conventions={"claim_interval_ms": 60_000},
                            limits={"dead_consumer_idle_ms": 600_000})
    conv = settings.conventions
    redis_client.xgroup_create(STREAM, GROUP, id="0", mkstream=True)
    old, fresh, unlocked = (push_event(redis_client, STREAM, new_event()) for _ in range(3))
    redis_client.xreadgroup(GROUP, "pp-1", {STREAM: ">"}, count=1)
    redis_client.xreadgroup(GROUP, "pp-1", {STREAM: ">"}, count=1)
    redis_client.xclaim(STREAM, GROUP, "pp-1", 0, [old], idle=120_000)  # read two minutes ago
    redis_client.xreadgroup(GROUP, "pp-1", {STREAM: ">"}, count=1)
    redis_client.xclaim(STREAM, GROUP, "pp-1", 0, [unlocked], idle=120_000)
    for m in (old, fresh):
        redis_client.set(idempotency_key(conv, GROUP, m), "processing", ex=600)
    redis_client.xclaim(STREAM, GROUP, "pp-1", 0, [fresh], idle=0)  # delivered just now: a minute from the limit
    plan = await _propose(settings, "clear_stale_lock", stream=STREAM, ids=[old, fresh, unlocked])
    assert any(w.startswith(f"{fresh} was delivered ") and w.endswith("it may be processing now; skipped")
               for w in plan.warnings)
    assert [s.action for s in plan.steps] == ["export", "delete_stale_locks"]
    lock = idempotency_key(conv, GROUP, old)
    owner = _check("pending_owner", stream=STREAM, group=GROUP, id=old, consumer="pp-1", min_idle_ms=60_000)
    assert plan.steps[0].checks == [owner]
    assert plan.steps[1].operation.keys == [lock]
    digest = rr.digest({"type": "string", "content": "processing"})
    assert plan.steps[1].checks == [_check("key_unchanged", key=lock, digest=digest, allow_missing=True), owner]
    assert plan.candidates_found == 1 and plan.blast_radius.keys == 1 and plan.blast_radius.messages == 0
    assert any(n.startswith("live owner(s) pp-1 re-read their pending entries on start") for n in plan.notes)
    assert plan.summary == f"delete 1 stale idempotency lock(s) of group {GROUP} on {STREAM}"
    everything = await _propose(settings, "clear_stale_lock", stream=STREAM)  # no ids: fresh skipped silently
    assert [s.operation.keys for s in everything.steps[1:]] == [[lock]]
    assert not any("may be processing" in w for w in everything.warnings)


async def test_stale_lock_of_a_dead_owner_is_claimed_to_a_live_consumer(tmp_path, outbox_db, redis_url,
                                                                        redis_client) -> None:
    settings = settings_for(tmp_path, outbox_db, redis_url, conventions={"claim_interval_ms": 100},
                            limits={"dead_consumer_idle_ms": DEAD_MS})
    (m1,) = _dead_and_live(redis_client, 1, DEAD_MS / 1000)
    redis_client.set(idempotency_key(settings.conventions, GROUP, m1), "processing", ex=600)
    alone = await _propose(settings, "clear_stale_lock", stream=STREAM)
    assert [s.action for s in alone.steps] == ["export", "delete_stale_locks"]
    assert "the entries of dead consumers stay where they are: no live consumer to claim them to" in alone.warnings
    with LiveConsumer(redis_client, STREAM, GROUP, "pp-live"):
        plan = await _propose(settings, "clear_stale_lock", stream=STREAM)
    assert [s.action for s in plan.steps] == ["export", "delete_stale_locks", "xclaim"]
    claim = plan.steps[2]
    assert (claim.operation.consumer, claim.operation.min_idle_ms, claim.operation.ids) == ("pp-live", 100, [m1])
    assert claim.checks[-1] == _check("consumer_live", stream=STREAM, group=GROUP, consumer="pp-live",
                                      max_idle_ms=DEAD_MS)
    assert not any("live owner" in n for n in plan.notes)


def _job(r: redis.Redis, q: str, job: str, opts: dict | None = None, **extra) -> None:
    r.hset(f"{q}:{job}", mapping={"name": "t", "data": "{}", "opts": json.dumps(opts or {}), "attemptsMade": "1",
                                  "failedReason": "boom", **extra})
    r.zadd(f"{q}:failed", {job: 2})


async def test_retry_plan_per_push_order_with_each_job_s_digest(settings, redis_client) -> None:
    q = "bull:mail"
    redis_client.hset(f"{q}:meta", mapping={"version": "bullmq:4.1.0", "opts.maxLenEvents": "oops", "paused": "1"})
    _job(redis_client, q, "a")
    _job(redis_client, q, "b", {"lifo": True, "attempts": 5})
    redis_client.zadd(f"{q}:failed", {"gone": 3})  # listed, hash removed
    digests = {j: rr.hash_digest(redis_client.hgetall(f"{q}:{j}")) for j in ("a", "b")}
    plan = await _propose(settings, "retry_failed_job", queue="mail")
    assert [(s.operation.push, s.operation.job_ids) for s in plan.steps] == [("LPUSH", ["a"]), ("RPUSH", ["b"])]
    assert texts(plan) == [("bullmq_retry", "move 1 failed job(s) of mail back to paused (as Job.retry() does)",
                            "bull:mail", "each job still failed and unchanged; the queue's paused state unchanged",
                            "each job hash and its failed score", False)] * 2
    paused = _check("queue_paused", prefix="bull", queue="mail", paused=True)
    for step, job in zip(plan.steps, "ab", strict=True):
        assert step.checks == [_check("bull_job_failed", prefix="bull", queue="mail", job_id=job,
                                      digest=digests[job]), paused]
        op = step.operation
        assert (op.target_list, op.marker, op.events_maxlen, op.prefix, op.queue) == ("paused", False, 10_000,
                                                                                       "bull", "mail")
    assert "job gone is listed as failed but its hash is gone (removeOnFail?): skipped" in plan.warnings
    assert "queue mail is paused: the jobs go to its paused list and run once it is resumed" in plan.warnings
    assert plan.candidates_found == 3 and plan.blast_radius.keys == 2 and plan.blast_radius.messages == 2
    assert plan.summary == "retry 2 failed job(s) of BullMQ queue mail"
    assert not any("attempts" in n for n in plan.notes)  # 1 made of 5


async def test_retry_plan_reads_marker_events_length_and_ids(settings, redis_client) -> None:
    q = "bull:mail"
    redis_client.hset(f"{q}:meta", mapping={"version": "bullmq:5.0.0", "opts.maxLenEvents": "77"})
    _job(redis_client, q, "a", {"attempts": 1})
    _job(redis_client, q, "b")
    plan = await _propose(settings, "retry_failed_job", queue="mail", ids=["b", "zz"])
    (step,) = plan.steps
    assert step.operation.job_ids == ["b"] and step.operation.marker and step.operation.events_maxlen == 77
    assert step.operation.target_list == "wait"
    assert plan.warnings == ["job zz is not in bull:mail:failed: skipped (inspect_queue shows its state)"]
    assert plan.candidates_found == 1
    every = await _propose(settings, "retry_failed_job", queue="mail")
    assert any(n.startswith("job a used its 1 attempts") for n in every.notes)
    assert any(n.startswith("runbook step 3: approve once the handler's failure cause is fixed") for n in every.notes)
    redis_client.delete(f"{q}:meta")
    redis_client.zadd(f"{q}:marker", {"0": 0})
    assert (await _propose(settings, "retry_failed_job", queue="mail")).steps[0].operation.marker
    redis_client.delete(f"{q}:marker")
    unmarked = await _propose(settings, "retry_failed_job", queue="mail")
    assert not unmarked.steps[0].operation.marker and unmarked.steps[0].operation.events_maxlen == 10_000
    with pytest.raises(NotFound, match=r"no failed job in BullMQ queue other \(bull:other:failed is empty"):
        await _propose(settings, "retry_failed_job", queue="other")


async def test_retry_plan_cap(tmp_path, outbox_db, redis_url, redis_client) -> None:
    settings = settings_for(tmp_path, outbox_db, redis_url, limits={"max_plan_messages": 2})
    for job in "ab":
        _job(redis_client, "bull:mail", job)
    at_cap = await _propose(settings, "retry_failed_job", queue="mail")  # exactly the cap: nothing left out
    assert not at_cap.truncated and at_cap.candidates_found == 2
    _job(redis_client, "bull:mail", "c")
    plan = await _propose(settings, "retry_failed_job", queue="mail")
    assert plan.truncated and plan.candidates_found == 3 and plan.steps[0].operation.job_ids == ["a", "b"]


def _row(pg: str, table: str, row_id: str, status: str, age_s: int = 0) -> None:
    extra = ', "target"' if table == "jobs_outbox" else ""
    with psycopg.connect(pg, autocommit=True) as conn:
        conn.execute(f'INSERT INTO {table} (id, status, type, emitter{extra}, updated_at) VALUES '
                     f"(%s, %s, 't', 'ms-event'{', %s' if extra else ''}, now() - make_interval(secs => %s))",
                     [row_id, status, *(["event-queue"] if extra else []), age_s])


def _stamp(pg: str, row_id: str) -> str:
    with psycopg.connect(pg) as conn:
        value = conn.execute("SELECT updated_at FROM jobs_outbox WHERE id = %s", (row_id,)).fetchone()[0]
    assert isinstance(value, datetime)
    return value.isoformat()


async def test_requeue_guards_each_row_by_status_and_updated_at(settings, outbox_db, redis_client) -> None:
    audited, guarded, lost, recent, done = (str(uuid.uuid4()) for _ in range(5))
    for row_id in (audited, guarded, lost):
        _row(outbox_db, "jobs_outbox", row_id, "PROCESSING", age_s=900)
    _row(outbox_db, "jobs_outbox", recent, "PROCESSING", age_s=10)
    _row(outbox_db, "jobs_outbox", done, "COMPLETED", age_s=900)
    with psycopg.connect(outbox_db, autocommit=True) as conn:
        conn.execute("INSERT INTO job_audit (job_id, job_type, status, emitter) VALUES (%s, 't', 'COMPLETED', "
                     "'ms-event')", (audited,))
    redis_client.set(f"job:completed:{guarded}", "1")
    plan = await _propose(settings, "requeue_stuck_job", service="event", ids=[audited, guarded, lost, recent, done])
    assert [(s.action, s.operation.set_status, sorted(r.id for r in s.operation.rows)) for s in plan.steps] == [
        ("reconcile_sql", "COMPLETED", sorted([audited, guarded])), ("requeue_sql", "PENDING", [lost])]
    pushed, requeued = plan.steps
    guard = "each row still PROCESSING with the same updated_at"
    never_pushed = (f"{guard}; and, as when planned, BullMQ still knows nothing of each job (no job hash, no lock "
                    "key, in no state list or set), its completion guard is unset and it has no job_audit row")
    assert texts(plan) == [
        ("reconcile_sql", "jobs_outbox: 2 row(s) PROCESSING -> COMPLETED (BullMQ or job_audit shows the job was "
         "pushed), one transaction", "event.jobs_outbox", guard, SQL_BACKUP, True),
        ("requeue_sql", "jobs_outbox: 1 row(s) PROCESSING -> PENDING (never pushed: the outbox runner pushes it "
         "again), one transaction", "event.jobs_outbox", never_pushed, SQL_BACKUP, True),
    ]
    stamps = {i: _stamp(outbox_db, i) for i in (audited, guarded, lost)}
    assert {r.id: r.updated_at for r in pushed.operation.rows} == {i: stamps[i] for i in (audited, guarded)}
    conv = settings.conventions
    assert requeued.checks == [  # the row's own guard, then everything "never pushed" relied on
        _check("row_matches", service="event", table="jobs_outbox", id=lost, status="PROCESSING",
               updated_at=stamps[lost]),
        _check("bull_job_absent", prefix="bull", queue="event-queue", job_id=lost, lock_suffix="lock",
               lists=list(conv.bullmq_state_lists), sorted_sets=list(conv.bullmq_state_sorted_sets),
               verdict="never pushed"),
        _check("key_absent", key=f"job:completed:{lost}", what="the worker's completion guard: the job ran"),
        _check("audit_row_absent", service="event", table="job_audit", job_id=lost),
    ]
    assert requeued.operation.expect_status == "PROCESSING"
    assert "with the same updated_at" in requeued.precondition
    assert any(w.startswith(f"jobs_outbox row {recent} was updated ") and "a runner may be pushing it" in w
               for w in plan.warnings)
    assert (f"jobs_outbox row {done} is COMPLETED (pushed): no BullMQ job, job_audit missing, guard unset: not "
            "stalled nor lost by a dead worker; skipped (trace_job says what it is)") in plan.warnings
    assert plan.blast_radius.rows == 3 and plan.blast_radius.tables == ["event.jobs_outbox"]
    assert plan.summary == "unstick 3 jobs_outbox row(s) of service event: 2 to COMPLETED (already pushed), 1 back " \
                           "to PENDING"
    with pytest.raises(NotFound, match=r"none of the 1 id\(s\) is, in service event, a row stuck PROCESSING, a "
                                       r"FAILED row to push again, or a pushed job stalled or lost by a dead worker"):
        await _propose(settings, "requeue_stuck_job", service="event", ids=[recent])


async def test_requeue_plan_cap(tmp_path, outbox_db, redis_url) -> None:
    settings = settings_for(tmp_path, outbox_db, redis_url, limits={"max_plan_messages": 2})
    for age in (900, 800, 700):
        _row(outbox_db, "jobs_outbox", str(uuid.uuid4()), "PROCESSING", age_s=age)
    plan = await _propose(settings, "requeue_stuck_job", service="event")
    assert plan.truncated and plan.candidates_found == 2 and plan.blast_radius.rows == 2


async def test_plan_expiry_and_saved_file(settings, poison: Poison) -> None:
    plan = await _propose(settings, "dlq_replay", stream=STREAM)
    created, expires = datetime.fromisoformat(plan.created_at), datetime.fromisoformat(plan.expires_at)
    assert expires - created == timedelta(seconds=settings.approval.plan_ttl_s) and created.microsecond == 0
    assert created.utcoffset() == timedelta(0)
    assert abs((datetime.now(created.tzinfo) - created).total_seconds()) < 60
    assert store.load_plan(settings, plan.plan_id) == plan
    assert plan.approval_mode == settings.approval.mode and plan.redis_instance == "default"
    assert plan.approve_command.endswith(f"mesh-mcp approve {plan.plan_id}")
    from server.approval.audit import audit_log

    record = audit_log(settings).read()[-1]
    assert (record["event"], record["plan_id"], record["plan_sha256"], record["steps"]) == (
        "proposed", plan.plan_id, plan.plan_sha256, len(plan.steps))
    assert record["symptom"] == "dlq_replay" and record["detail"] == plan.summary and record["result"] == "proposed"
