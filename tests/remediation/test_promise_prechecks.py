"""Promise: each step's preconditions are re-checked at run time, just before the step, and a
pending-entry precondition includes the entry's idle time.

The world is changed *between two steps* of a running apply (``after_step``), the way another
operator or a consumer would: the run must stop at the next step, with nothing done by it.
"""

from __future__ import annotations

import time

import pytest
import redis

from server.connections import Connections
from tests.remediation.conftest import GROUP, STREAM, Poison, approve, settings_for
from tests.remediation.target_sim import ConsumerThread, LiveConsumer, new_event, push_event
from tools.remediation.executor import apply_plan
from tools.remediation.planner import Request, propose

pytestmark = pytest.mark.anyio

DLQ = f"{STREAM}-dlq"
IDLE_MS = 1500


async def _propose(settings, symptom: str, **kw):
    connections = Connections(settings)
    try:
        return await propose(settings, connections, Request(symptom, STREAM, kw.get("group"), kw.get("service"),
                                                            None, kw.get("ids")))
    finally:
        await connections.aclose()


async def _apply(settings, plan, after_step=None):
    connections = Connections(settings)
    try:
        return await apply_plan(settings, connections, plan.plan_id, approve(settings, plan.plan_id),
                                after_step=after_step)
    finally:
        await connections.aclose()


async def test_a_dead_letter_removed_between_two_steps_stops_the_replay(settings, poison: Poison, redis_client):
    """export done, then someone else handles the dead letter: the replay step must not run."""
    plan = await _propose(settings, "dlq_replay")
    actions = [s.action for s in plan.steps]
    assert actions[:2] == ["export", "replay"]
    length_before = redis_client.xlen(STREAM)

    async def someone_else_cleans_up(number: int) -> None:
        if number == 1:
            redis_client.xdel(DLQ, poison.dlq_id)

    poison.fixed = True
    with ConsumerThread(poison.processor):
        report = await _apply(settings, plan, after_step=someone_else_cleans_up)
    assert report.status == "stopped"
    assert [s.status for s in report.steps[:3]] == ["done", "drift", "not_run"]
    assert poison.dlq_id in report.steps[1].detail
    assert redis_client.xlen(STREAM) == length_before  # nothing was replayed
    assert report.steps[1].output == {} and report.steps[1].targets == []


def _dead_consumer_with_lock(client: redis.Redis) -> tuple[str, str]:
    client.xgroup_create(STREAM, GROUP, id="0", mkstream=True)
    message_id = push_event(client, STREAM, new_event())
    client.xreadgroup(GROUP, "pp-dead", {STREAM: ">"})  # it crashed while processing,
    lock = f"idempotency:post-processor:{GROUP}:{message_id}"
    client.set(lock, "processing", ex=86400)  # and its lock stayed
    time.sleep(IDLE_MS / 1000 + 0.2)
    return message_id, lock


async def test_an_entry_delivered_again_between_two_steps_stops_the_plan(tmp_path, outbox_db, topology):
    """Same owner, still pending, but delivered again (idle reset): it is being processed, hands off."""
    redis_url, redis_client = topology.redis, topology.client  # the machine's Redis, then a cluster
    settings = settings_for(tmp_path, outbox_db, redis_url, limits={"dead_consumer_idle_ms": IDLE_MS})
    message_id, lock = _dead_consumer_with_lock(redis_client)
    with LiveConsumer(redis_client, STREAM, GROUP, "pp-live"):
        plan = await _propose(settings, "claim_dead_consumer")
        assert [s.action for s in plan.steps] == ["export", "delete_stale_locks", "xclaim"]

        async def the_owner_comes_back(number: int) -> None:
            if number == 1:  # the "dead" consumer restarts and re-reads its own pending entry
                redis_client.xclaim(STREAM, GROUP, "pp-dead", 0, [message_id], justid=True)

        report = await _apply(settings, plan, after_step=the_owner_comes_back)
    assert report.status == "stopped"
    assert [s.status for s in report.steps] == ["done", "drift", "not_run"]
    assert "ms ago" in report.steps[1].detail
    assert redis_client.get(lock) == b"processing"  # the lock of a message being processed is kept
    owner = redis_client.xpending_range(STREAM, GROUP, "-", "+", 10)[0]["consumer"]
    assert owner == b"pp-dead"


async def test_an_entry_delivered_again_before_apply_stops_it_before_any_change(tmp_path, outbox_db, topology):
    redis_url, redis_client = topology.redis, topology.client  # the machine's Redis, then a cluster
    settings = settings_for(tmp_path, outbox_db, redis_url, limits={"dead_consumer_idle_ms": IDLE_MS})
    message_id, lock = _dead_consumer_with_lock(redis_client)
    with LiveConsumer(redis_client, STREAM, GROUP, "pp-live"):
        plan = await _propose(settings, "claim_dead_consumer")
        checks = [c for c in plan.steps[0].checks if c.kind == "pending_owner"]
        assert checks and all(c.args["min_idle_ms"] == IDLE_MS for c in checks)  # the plan records the idle
        redis_client.xclaim(STREAM, GROUP, "pp-dead", 0, [message_id], justid=True)
        report = await _apply(settings, plan)
    assert report.status == "stopped"
    assert [s.status for s in report.steps] == ["drift", "not_run", "not_run"]
    assert report.backup_file is None
    assert redis_client.get(lock) == b"processing"


async def test_an_entry_still_idle_lets_the_plan_complete(tmp_path, outbox_db, topology):
    """Control: nobody touches the entry, the same plan completes (the stops above are the idle check's)."""
    redis_url, redis_client = topology.redis, topology.client  # the machine's Redis, then a cluster
    settings = settings_for(tmp_path, outbox_db, redis_url, limits={"dead_consumer_idle_ms": IDLE_MS})
    _message_id, lock = _dead_consumer_with_lock(redis_client)
    with LiveConsumer(redis_client, STREAM, GROUP, "pp-live"):
        plan = await _propose(settings, "claim_dead_consumer")
        report = await _apply(settings, plan)
    assert report.status == "completed", report.summary_text()
    assert not redis_client.exists(lock)
    owner = redis_client.xpending_range(STREAM, GROUP, "-", "+", 10)
    assert [p["consumer"] for p in owner] in ([b"pp-live"], [])  # claimed (the live consumer may ack it)


async def test_a_later_steps_precondition_failing_stops_the_run_before_the_first_step(
    tmp_path, outbox_db, topology
):
    """Pre-flight: every step's static preconditions are checked before step 1 touches anything."""
    redis_url, redis_client = topology.redis, topology.client  # the machine's Redis, then a cluster
    settings = settings_for(tmp_path, outbox_db, redis_url, limits={"dead_consumer_idle_ms": IDLE_MS})
    _message_id, lock = _dead_consumer_with_lock(redis_client)
    with LiveConsumer(redis_client, STREAM, GROUP, "pp-live"):
        plan = await _propose(settings, "claim_dead_consumer")
        redis_client.set(lock, "taken again", ex=86400)  # only step 2 (delete_stale_locks) checks this key
        report = await _apply(settings, plan)
    assert report.status == "stopped"
    assert [s.status for s in report.steps] == ["not_run", "drift", "not_run"]
    assert "before any change" in report.summary
    assert report.backup_file is None  # not even the export ran
    assert redis_client.get(lock) == b"taken again"
