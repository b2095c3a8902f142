"""Issue 23, route 4: an apply stopped after its replay cannot deliver the message a second time.

The attack: the consumer is down at ``confirm_replay``, so the apply stops after the XADD;
then the plan's ``.applied`` marker and the last line of ``used_nonces`` are deleted, which
makes the same token and plan look unused. The replay guard must see the earlier replay,
in the audit log and, with those audit lines gone too, in the target stream itself.
"""

from __future__ import annotations

import json

import pytest

from server.approval.audit import audit_log
from server.approval.tokens import nonces_path
from tests.remediation.conftest import STREAM, Poison, approve, settings_for
from tests.remediation.target_sim import ConsumerThread, new_event, push_event
from tests.remediation.test_negative import _apply, _propose
from tools.remediation import store


def _forget_the_apply(settings, plan_id: str) -> None:
    """What an agent with the server's file access can do: make plan and token look unused."""
    store.applied_path(settings, plan_id).unlink()
    path = nonces_path(settings)
    lines = path.read_text().splitlines()
    path.write_text("".join(f"{line}\n" for line in lines[:-1]))


@pytest.mark.anyio
async def test_a_replay_is_never_delivered_twice(tmp_path, outbox_db, topology):
    redis_url, redis_client = topology.redis, topology.client  # the machine's Redis, then a cluster
    settings = settings_for(tmp_path, outbox_db, redis_url, limits={"replay_confirm_timeout_ms": 500})
    poison = Poison(redis_client, outbox_db, settings)
    plan = await _propose(settings)
    token = approve(settings, plan.plan_id)
    poison.fixed = True
    first = await _apply(settings, plan.plan_id, token)  # no consumer runs: stopped at the confirmation
    assert first.status == "stopped" and first.steps[2].action == "confirm_replay"
    replayed = first.steps[1].output["replayed"][0]["new_id"]
    length = redis_client.xlen(STREAM)
    assert first.audit_head == str(audit_log(settings).head())

    _forget_the_apply(settings, plan.plan_id)
    second = await _apply(settings, plan.plan_id, token)
    assert second.status == "stopped", second.summary_text()
    assert second.steps[1].status == "drift" and "already replayed" in second.steps[1].detail
    assert all(s.status in ("not_run", "drift") for s in second.steps)  # stopped in the pre-flight
    assert redis_client.xlen(STREAM) == length

    # the agent also drops the audit log's `replayed` lines and their index: the stream still shows the replay
    _forget_the_apply(settings, plan.plan_id)
    log = audit_log(settings).path
    kept = [line for line in log.read_text().splitlines() if json.loads(line)["event"] != "replayed"]
    log.write_text("".join(f"{line}\n" for line in kept))
    audit_log(settings).index_path("replayed").unlink()  # and their index (issue 32): the same file access
    third = await _apply(settings, plan.plan_id, token)
    assert third.status == "stopped" and third.steps[1].status == "drift"
    assert replayed in third.steps[1].detail and "same original id" in third.steps[1].detail
    assert redis_client.xlen(STREAM) == length
    assert not audit_log(settings).verify().ok  # and the edited audit log no longer verifies


@pytest.mark.anyio
async def test_a_fresh_plan_still_replays_once(tmp_path, outbox_db, topology):
    """The guard does not stop a first replay (an event re-sent before its dead letter does not count)."""
    redis_url, redis_client = topology.redis, topology.client  # the machine's Redis, then a cluster
    settings = settings_for(tmp_path, outbox_db, redis_url)
    poison = Poison(redis_client, outbox_db, settings)
    plan = await _propose(settings)
    token = approve(settings, plan.plan_id)
    poison.fixed = True
    with ConsumerThread(poison.processor):
        report = await _apply(settings, plan.plan_id, token)
    assert report.status == "completed", report.summary_text()


@pytest.mark.anyio
async def test_a_scan_that_cannot_finish_does_not_replay(tmp_path, outbox_db, topology):
    """Not seeing an earlier replay within the scan bounds is no proof: the apply stops."""
    redis_url, redis_client = topology.redis, topology.client  # the machine's Redis, then a cluster
    settings = settings_for(tmp_path, outbox_db, redis_url, limits={"max_count": 1, "scan_max_iterations": 2})
    poison = Poison(redis_client, outbox_db, settings)
    plan = await _propose(settings)
    token = approve(settings, plan.plan_id)
    for _ in range(3):  # unrelated traffic after the dead letter
        push_event(redis_client, STREAM, new_event())
    length = redis_client.xlen(STREAM)
    poison.fixed = True
    report = await _apply(settings, plan.plan_id, token)
    assert report.status == "stopped" and "could not check" in report.steps[1].detail
    assert redis_client.xlen(STREAM) == length
