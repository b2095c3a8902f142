"""Promise: a pending-entries plan moves only the entries of consumers that are dead (idle past
``[limits] dead_consumer_idle_ms`` while holding entries) to the most recently active live consumer,
acknowledges only entries whose message is gone, deletes only the idempotency locks of the entries it
handles, and records each entry's owner *and* idle time, each lock's digest and the live consumer's
liveness as preconditions.

One stream, one group, and consumers in every state, on a real Redis: two dead consumers (one of
whose messages was trimmed), a dead consumer holding nothing, a live one holding an entry, and the
live consumer to claim to. Liveness is set by reading (the live consumers read just before each
proposal, 10 ms apart so which one is the most recent is certain); the dead ones by one sleep past
the threshold; entry idle times by ``XCLAIM ... IDLE``.
"""

from __future__ import annotations

import time

import pytest
import redis

from server.connections import Connections
from server.errors import NotFound
from tests.remediation.conftest import GROUP, STREAM, settings_for
from tests.remediation.target_sim import new_event, push_event
from tools.remediation import redis_reads as rr
from tools.remediation.model import Check, Plan
from tools.remediation.planner import Request, propose
from tools.streams.keys import idempotency_key

pytestmark = pytest.mark.anyio

DEAD_MS = 1000  # the least [limits] allows: one sleep of 1.1 s per test
CLAIM_MS = 100
LOCK_DIGEST = rr.digest({"type": "string", "content": "processing"})


async def _propose(settings, symptom: str, **kw) -> Plan:
    connections = Connections(settings)
    try:
        return await propose(settings, connections, Request(symptom, kw.get("stream", STREAM), kw.get("group"),
                                                            None, None, kw.get("ids")))
    finally:
        await connections.aclose()


def _c(kind: str, **args) -> Check:
    return Check(kind=kind, args=args)


def _owner(entry: str, consumer: str, idle: int = DEAD_MS) -> Check:
    return _c("pending_owner", stream=STREAM, group=GROUP, id=entry, consumer=consumer, min_idle_ms=idle)


def _lock(entry: str) -> Check:
    return _c("key_unchanged", key=idempotency_key_of(entry), digest=LOCK_DIGEST, allow_missing=True)


def idempotency_key_of(entry: str) -> str:
    return f"idempotency:post-processor:{GROUP}:{entry}"


def _read(r: redis.Redis, consumer: str) -> str:
    (_, rows), = r.xreadgroup(GROUP, consumer, {STREAM: ">"}, count=1)
    return rows[0][0].decode()


def _beat(r: redis.Redis, consumer: str) -> None:
    """A successful read by ``consumer`` (live), acknowledged at once."""
    r.xadd(STREAM, {"tick": "1"})
    for _, rows in r.xreadgroup(GROUP, consumer, {STREAM: ">"}, count=100) or []:
        r.xack(STREAM, GROUP, *[i for i, _ in rows])


def _live(r: redis.Redis) -> None:
    _beat(r, "pp-busy")
    time.sleep(0.01)
    _beat(r, "pp-live")  # the most recently active


def _human(step) -> tuple:
    return step.action, step.description, step.target, step.precondition, step.backup, step.reversible


@pytest.fixture
def consumers(tmp_path, outbox_db, redis_url, redis_client: redis.Redis) -> dict[str, str]:
    r = redis_client
    r.xgroup_create(STREAM, GROUP, id="0", mkstream=True)
    for _ in range(4):
        push_event(r, STREAM, new_event())
    a1, a2 = _read(r, "pp-dead-a"), _read(r, "pp-dead-a")
    b1 = _read(r, "pp-dead-b")
    busy = _read(r, "pp-busy")
    r.xgroup_createconsumer(STREAM, GROUP, "pp-idle")  # a consumer that will be idle and holds nothing
    r.xdel(STREAM, b1)  # trimmed: nothing left to process
    for entry in (a1, b1, busy):
        r.set(idempotency_key_of(entry), "processing", ex=600)
    time.sleep(DEAD_MS / 1000 + 0.1)
    return {"a1": a1, "a2": a2, "b1": b1, "busy": busy}


def _settings(tmp_path, outbox_db, redis_url, name: str, **limits):
    return settings_for(tmp_path / name, outbox_db, redis_url, conventions={"claim_interval_ms": CLAIM_MS},
                        limits={"dead_consumer_idle_ms": DEAD_MS, **limits})


async def test_dead_consumers_entries_go_to_the_most_recent_live_consumer(
    tmp_path, outbox_db, redis_url, redis_client, consumers
) -> None:
    a1, a2, b1, busy = consumers["a1"], consumers["a2"], consumers["b1"], consumers["busy"]
    settings = _settings(tmp_path, outbox_db, redis_url, "all")
    with pytest.raises(NotFound) as info:  # every consumer idle past the threshold: none to claim to
        await _propose(settings, "claim_dead_consumer")
    assert str(info.value) == (f"every consumer of group {GROUP} is idle more than {DEAD_MS} ms: there is no live "
                               "consumer to claim to; start one (it claims idle entries itself), then re-propose")
    _live(redis_client)
    plan = await _propose(settings, "claim_dead_consumer")

    assert [_human(s) for s in plan.steps] == [
        ("export", f"save 3 pending entr(ies) of group {GROUP} and their messages", f"{STREAM} group {GROUP}",
         "each entry still pending at the same consumer",
         "the pending entries (owner, idle, deliveries) and message fields", True),
        ("delete_stale_locks", "delete 2 stale idempotency lock(s) so the re-read is not skipped as done",
         f"{idempotency_key_of(a1)}, {idempotency_key_of(b1)}",
         "each lock unchanged and its message still pending at the same consumer",
         "value and TTL of each lock (RESTORE-able)", True),
        ("xclaim", "claim 2 entr(ies) to live consumer pp-live", f"{STREAM} group {GROUP}",
         f"still pending at their owner and idle >= {DEAD_MS} ms; pp-live still alive",
         "the pending entries (owner, idle, deliveries)", True),
        ("xack", "acknowledge 1 entr(ies) whose message was trimmed", f"{STREAM} group {GROUP}",
         "still pending (nothing left to process: trimmed)", "the pending entries", False),
    ]
    export, locks, claim, ack = plan.steps
    owners = [_owner(a1, "pp-dead-a"), _owner(a2, "pp-dead-a"), _owner(b1, "pp-dead-b")]
    assert [(e.key, e.id) for e in export.operation.entries] == [(STREAM, a1), (STREAM, a2)]  # b1 has no message
    assert [(p.stream, p.group, p.id) for p in export.operation.pending] == [(STREAM, GROUP, i) for i in (a1, a2, b1)]
    assert export.checks == owners
    assert locks.operation.keys == [idempotency_key_of(a1), idempotency_key_of(b1)]  # not the live owner's lock
    assert locks.checks == [_lock(a1), _lock(b1), *owners]
    op = claim.operation
    assert (op.stream, op.group, op.consumer, op.min_idle_ms, op.ids) == (STREAM, GROUP, "pp-live", DEAD_MS, [a1, a2])
    assert claim.checks == [owners[0], owners[1],
                            _c("consumer_live", stream=STREAM, group=GROUP, consumer="pp-live", max_idle_ms=DEAD_MS)]
    assert (ack.operation.stream, ack.operation.group, ack.operation.ids) == (STREAM, GROUP, [b1])
    assert ack.checks == [owners[2]]
    assert plan.summary == f"move 3 entr(ies) of group {GROUP} from dead consumer(s) pp-dead-a, pp-dead-b to pp-live"
    assert plan.notes == [f"pp-live re-reads its pending list on start, after a claim or from the retry queue "
                          f"(claim_interval_ms {CLAIM_MS}): restart it if the entries do not move"]
    assert plan.warnings == [] and plan.candidates_found == 3 and not plan.truncated
    br = plan.blast_radius
    assert (br.messages, br.keys, br.streams, br.rows) == (3, 2, [STREAM], 0)

    _live(redis_client)
    picked = await _propose(settings, "claim_dead_consumer", ids=[a2, busy, "1-1"])
    assert [s.action for s in picked.steps] == ["export", "xclaim"]  # a2 holds no lock
    assert picked.steps[1].operation.ids == [a2] and picked.steps[0].checks == [owners[1]]
    assert picked.warnings == [f"{busy} is pending at pp-busy, which is not a dead consumer: skipped",
                               f"1-1 is not pending in group {GROUP}"]
    assert picked.candidates_found == 1 and picked.blast_radius.messages == 1
    assert picked.summary == f"move 1 entr(ies) of group {GROUP} from dead consumer(s) pp-dead-a, pp-dead-b to pp-live"

    _live(redis_client)
    capped = await _propose(_settings(tmp_path, outbox_db, redis_url, "cap", max_plan_messages=2),
                            "claim_dead_consumer")
    assert capped.truncated and capped.candidates_found == 3
    assert [s.action for s in capped.steps] == ["export", "delete_stale_locks", "xclaim"]
    assert capped.steps[2].operation.ids == [a1, a2] and capped.steps[1].operation.keys == [idempotency_key_of(a1)]
    _live(redis_client)
    at_cap = await _propose(_settings(tmp_path, outbox_db, redis_url, "at", max_plan_messages=3),
                            "claim_dead_consumer")
    assert not at_cap.truncated and at_cap.candidates_found == 3 and at_cap.blast_radius.messages == 3


async def test_a_read_count_below_the_plan_cap_pages_on_instead_of_dropping_entries(
    tmp_path, outbox_db, redis_url, redis_client, consumers
) -> None:
    """``[limits] max_count`` bounds each XPENDING read, not the plan: pp-dead-a's two entries are read in two
    pages of one, so none is left out silently; the plan cap still cuts, and says so."""
    a1, a2, b1 = consumers["a1"], consumers["a2"], consumers["b1"]
    _live(redis_client)
    paged = await _propose(_settings(tmp_path, outbox_db, redis_url, "paged", max_count=1), "claim_dead_consumer")
    assert [(p.stream, p.id) for p in paged.steps[0].operation.pending] == [(STREAM, a1), (STREAM, a2), (STREAM, b1)]
    assert paged.candidates_found == 3 and not paged.truncated
    _live(redis_client)
    cut = await _propose(_settings(tmp_path, outbox_db, redis_url, "cut", max_count=1, max_plan_messages=1),
                         "claim_dead_consumer")
    assert cut.truncated and [p.id for p in cut.steps[0].operation.pending] == [a1]


async def test_a_plan_cap_that_is_a_multiple_of_the_read_count_still_knows_it_is_cut(
    tmp_path, outbox_db, redis_url, redis_client, consumers
) -> None:
    """Four pending entries read in pages of one: with a cap of 2 the cap is reached exactly after two pages,
    and one more entry is read to know the plan is cut (it is); with a cap of 4 the last read finds nothing
    more (not cut)."""
    _live(redis_client)
    cut = await _propose(_settings(tmp_path, outbox_db, redis_url, "cut2", max_count=1, max_plan_messages=2),
                         "clear_stale_lock")
    assert cut.truncated is True
    assert [p.id for p in cut.steps[0].operation.pending] == [consumers["a1"]]  # of a1, a2: only a1 has a lock
    _live(redis_client)
    whole = await _propose(_settings(tmp_path, outbox_db, redis_url, "whole4", max_count=1, max_plan_messages=4),
                           "clear_stale_lock")
    assert whole.truncated is False


async def test_stale_locks_of_dead_and_live_owners(tmp_path, outbox_db, redis_url, redis_client, consumers) -> None:
    a1, b1, busy = consumers["a1"], consumers["b1"], consumers["busy"]
    alone = await _propose(_settings(tmp_path, outbox_db, redis_url, "n"), "clear_stale_lock")  # every owner dead
    assert [s.action for s in alone.steps] == ["export", "delete_stale_locks"] and alone.notes == []
    assert alone.warnings == ["the entries of dead consumers stay where they are: no live consumer to claim them to"]
    _live(redis_client)
    plan = await _propose(_settings(tmp_path, outbox_db, redis_url, "s"), "clear_stale_lock")
    assert [s.action for s in plan.steps] == ["export", "delete_stale_locks", "xclaim"]  # never an XACK here
    export, locks, claim = plan.steps
    owners = [_owner(a1, "pp-dead-a", CLAIM_MS), _owner(b1, "pp-dead-b", CLAIM_MS), _owner(busy, "pp-busy", CLAIM_MS)]
    assert [e.id for e in export.operation.entries] == [a1, busy]
    assert [p.id for p in export.operation.pending] == [a1, b1, busy] and export.checks == owners
    assert locks.operation.keys == [idempotency_key_of(i) for i in (a1, b1, busy)]
    assert locks.checks == [_lock(a1), _lock(b1), _lock(busy), *owners]
    assert locks.description == "delete 3 stale idempotency lock(s) so the re-read is not skipped as done"
    # only the dead owner's entry that still has a message moves; the live owner keeps its own
    op = claim.operation
    assert (op.consumer, op.min_idle_ms, op.ids) == ("pp-live", CLAIM_MS, [a1])
    assert claim.precondition == f"still pending at their owner and idle >= {CLAIM_MS} ms; pp-live still alive"
    assert claim.checks == [owners[0], _c("consumer_live", stream=STREAM, group=GROUP, consumer="pp-live",
                                          max_idle_ms=DEAD_MS)]
    assert plan.notes == [
        f"pp-live re-reads its pending list on start, after a claim or from the retry queue (claim_interval_ms "
        f"{CLAIM_MS}): restart it if the entries do not move",
        "live owner(s) pp-busy re-read their pending entries on start: restart them after this plan so the "
        "messages are processed (runbook: delete the lock, then restart)",
    ]
    assert plan.warnings == [] and plan.candidates_found == 3
    assert (plan.blast_radius.messages, plan.blast_radius.keys) == (1, 3)
    assert plan.summary == f"delete 3 stale idempotency lock(s) of group {GROUP} on {STREAM}"

    _live(redis_client)
    capped = await _propose(_settings(tmp_path, outbox_db, redis_url, "c", max_plan_messages=2), "clear_stale_lock")
    assert capped.truncated and capped.candidates_found == 1  # a1, a2 taken; a2 holds no lock
    assert capped.steps[1].operation.keys == [idempotency_key_of(a1)]
    _live(redis_client)
    one = await _propose(_settings(tmp_path, outbox_db, redis_url, "o"), "clear_stale_lock", ids=[busy])
    assert [s.action for s in one.steps] == ["export", "delete_stale_locks"] and one.candidates_found == 1
    assert [n for n in one.notes if n.startswith("live owner(s) pp-busy ")] and one.warnings == []


async def test_fresh_entries_and_entries_without_a_lock_are_left_alone(tmp_path, outbox_db, redis_url,
                                                                       redis_client) -> None:
    r = redis_client
    settings = settings_for(tmp_path, outbox_db, redis_url, conventions={"claim_interval_ms": 60_000},
                            limits={"dead_consumer_idle_ms": 600_000})
    r.xgroup_create(STREAM, GROUP, id="0", mkstream=True)
    old, fresh, unlocked, later = (push_event(r, STREAM, new_event()) for _ in range(4))
    r.xreadgroup(GROUP, "pp-1", {STREAM: ">"})
    r.xclaim(STREAM, GROUP, "pp-1", 0, [old, unlocked, later], idle=61_000)  # a second past the claim interval
    r.xclaim(STREAM, GROUP, "pp-1", 0, [fresh], idle=59_000)  # a second under it
    for entry in (old, fresh, later):
        r.set(idempotency_key(settings.conventions, GROUP, entry), "processing", ex=600)
    plan = await _propose(settings, "clear_stale_lock")
    assert [s.action for s in plan.steps] == ["export", "delete_stale_locks"]
    assert plan.steps[1].operation.keys == [idempotency_key_of(old), idempotency_key_of(later)]  # past `fresh`
    assert plan.warnings == [] and plan.candidates_found == 2
    assert plan.steps[0].checks == [_owner(old, "pp-1", 60_000), _owner(later, "pp-1", 60_000)]
    r.xclaim(STREAM, GROUP, "pp-2", 0, [later], idle=61_000)  # another live owner
    two = await _propose(settings, "clear_stale_lock")
    assert two.notes == ["live owner(s) pp-1, pp-2 re-read their pending entries on start: restart them after this "
                         "plan so the messages are processed (runbook: delete the lock, then restart)"]
    with pytest.raises(NotFound) as info:
        await _propose(settings, "clear_stale_lock", ids=[unlocked])
    assert str(info.value) == f"no stale idempotency lock on a pending entry of group {GROUP}"
    with pytest.raises(NotFound) as info:
        await _propose(settings, "clear_stale_lock", ids=[fresh])
    assert str(info.value).startswith(f"no stale idempotency lock on a pending entry of group {GROUP} ({fresh} was "
                                      "delivered 59")
    assert str(info.value).endswith(" ms ago: it may be processing now; skipped)")
    with pytest.raises(NotFound) as info:
        await _propose(settings, "claim_dead_consumer")
    assert str(info.value) == f"no consumer of group {GROUP} idle more than 600000 ms holds pending entries"


async def test_a_stream_is_found_by_its_name_its_dlq_or_without_its_prefix(settings, redis_client) -> None:
    with pytest.raises(NotFound) as info:
        await _propose(settings, "clear_stale_lock", stream="event:created-dlq")
    assert str(info.value) == ("no stream 'event:created-dlq' (tried event:created, stream:event:created): "
                               "list_streams shows the streams")
    with pytest.raises(NotFound) as info:
        await _propose(settings, "clear_stale_lock", stream=f"{STREAM}-dlq")
    assert str(info.value) == f"no stream '{STREAM}-dlq' (tried {STREAM}): list_streams shows the streams"
    redis_client.xgroup_create(STREAM, GROUP, id="0", mkstream=True)
    redis_client.set("event:created", "not a stream")  # a key of another type under the bare name
    entry = push_event(redis_client, STREAM, new_event())
    redis_client.xreadgroup(GROUP, "pp-1", {STREAM: ">"})
    redis_client.xclaim(STREAM, GROUP, "pp-1", 0, [entry], idle=120_000)
    redis_client.set(idempotency_key(settings.conventions, GROUP, entry), "processing", ex=600)
    for name in ("event:created", "event:created-dlq", f"{STREAM}-dlq", STREAM):
        plan = await _propose(settings, "clear_stale_lock", stream=name)
        assert plan.steps[0].target == f"{STREAM} group {GROUP}", name
        assert plan.steps[1].operation.keys == [idempotency_key_of(entry)]


@pytest.mark.parametrize("symptom", ["claim_dead_consumer", "clear_stale_lock"])
async def test_the_group_named_is_the_one_planned_for(settings, redis_client, symptom: str) -> None:
    redis_client.xgroup_create(STREAM, GROUP, id="0", mkstream=True)
    redis_client.xgroup_create(STREAM, "audit", id="0")
    with pytest.raises(NotFound) as info:
        await _propose(settings, symptom, group="nope")
    assert str(info.value) == f"group 'nope' is not a group of {STREAM}; its groups: audit, {GROUP}"
    with pytest.raises(NotFound) as info:  # the named one of two groups: nothing to do there, said with its name
        await _propose(settings, symptom, group="audit")
    assert str(info.value) == {
        "claim_dead_consumer": "no consumer of group audit idle more than 300000 ms holds pending entries",
        "clear_stale_lock": "no stale idempotency lock on a pending entry of group audit",
    }[symptom]
