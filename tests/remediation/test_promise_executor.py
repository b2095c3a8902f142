"""Promise: an apply runs only what a human approved for this exact, unexpired, never-applied plan;
it re-checks each step just before it runs; everything it does is audited; and when it stops, the
report, the audit log and the plan's application record say exactly what ran and what did not.

The plans here are built by hand (a few DEL / ZREM steps on keys the test owns, each with the
precondition a planner would give it), sealed and saved through the real store, approved through
``mesh-mcp approve``'s code path and applied on the machine's Redis. The world is changed before
the apply, or between two steps (``after_step``), the way another operator would.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import redis

from server.approval.audit import audit_log, audit_path
from server.approval.tokens import TokenRefused, mint_token
from server.config import Conventions
from server.connections import Connections
from server.errors import MeshError, NotFound, RemediationRefused
from tests.remediation.conftest import approve, settings_for
from tests.remediation.redis_proc import ThrowawayRedis
from tools.remediation import redis_reads as rr
from tools.remediation import store
from tools.remediation.backups import backup_path, read_backup
from tools.remediation.executor import apply_plan
from tools.remediation.model import (
    BlastRadius,
    Check,
    DelOp,
    Plan,
    ReplayMessage,
    SqlRow,
    SqlUpdateOp,
    Step,
    XAddOp,
    ZRemOp,
)
from tools.remediation.operations import render, render_params
from tools.remediation.targets import with_targets

pytestmark = pytest.mark.anyio

ZSET = "retry:post-processor:pp-event"


def _step(number: int, action: str, op: Any, checks: list[Check], reversible: bool = True) -> Step:
    return Step(number=number, action=action, description=action, command=render(op, _CONV), params=render_params(op),
                target=f"{op.service}.{op.table}" if isinstance(op, SqlUpdateOp) else "", precondition="as planned",
                checks=checks, backup="the keys", reversible=reversible,
                operation=op)


_CONV = Conventions()  # the suite's settings use the default conventions (check_integrity re-renders with them)


def _plan(settings, steps: list[Step], *, expires_in: float = 3600, created_ago: float = 0,
          redis_instance: str = "default") -> Plan:
    now = datetime.now(UTC)
    plan = Plan(
        plan_id=store.new_plan_id(), symptom="clear_stale_lock",
        created_at=(now - timedelta(seconds=created_ago)).isoformat(),
        expires_at=(now + timedelta(seconds=expires_in)).isoformat(), inputs={}, summary="hand-made test plan",
        steps=with_targets(steps, redis_instance, settings),  # where each step runs, as the planner records it
        blast_radius=BlastRadius(messages=0, rows=0, keys=len(steps)), candidates_found=1,
        truncated=False, approval_mode="local", approval_note="", approve_command="mesh-mcp approve",
        redis_instance=redis_instance,
    ).sealed()
    store.save_plan(settings, plan)
    return plan


async def _key_check(settings, key: str) -> Check:
    """``key_unchanged`` with the key's digest now, as the planner records it."""
    connections = Connections(settings)
    try:
        snap = await rr.key_snapshot(connections.redis(), key)
    finally:
        await connections.aclose()
    assert snap is not None
    return Check(kind="key_unchanged", args={"key": key, "digest": snap.digest, "allow_missing": True})


async def _three_steps(settings, client: redis.Redis) -> list[Step]:
    """1 DEL lock:a, 2 ZREM the retry member (it must still be there), 3 DEL lock:b once step 1 deleted."""
    client.set("lock:a", "processing")
    client.set("lock:b", "processing")
    client.zadd(ZSET, {"m1": 1, "m2": 2})
    return [
        _step(1, "delete_stale_locks", DelOp(keys=["lock:a"]), [await _key_check(settings, "lock:a")]),
        _step(2, "zrem_retry", ZRemOp(key=ZSET, members=["m1"]),
              [Check(kind="zset_member", args={"key": ZSET, "member": "m1", "allow_missing": False})]),
        _step(3, "delete_stale_locks", DelOp(keys=["lock:b"]),
              [await _key_check(settings, "lock:b"), Check(kind="step_ok", args={"step": 1, "output_key": "deleted"})],
              reversible=False),
    ]


async def _apply(settings, plan_id: str, token: str, **kw) -> Any:
    connections = Connections(settings)
    try:
        return await apply_plan(settings, connections, plan_id, token, **kw)
    finally:
        await connections.aclose()


def _audit(settings, event: str) -> list[dict[str, Any]]:
    return [r for r in audit_log(settings).read() if r["event"] == event]


def _steps(report) -> list[tuple[int, str, str, str]]:
    return [(s.number, s.action, s.status, s.detail) for s in report.steps]


async def test_a_completed_apply_reports_and_audits_every_step(settings, redis_client) -> None:
    plan = _plan(settings, await _three_steps(settings, redis_client))
    token = approve(settings, plan.plan_id)
    seen: list[int] = []

    async def after(number: int) -> None:
        seen.append(number)

    report = await _apply(settings, plan.plan_id, token, after_step=after)
    assert report.status == "completed" and seen == [1, 2, 3]
    assert report.summary == f"applied {plan.plan_id}: 3 step(s) done"
    assert _steps(report) == [(1, "delete_stale_locks", "done", "deleted 1 key(s) (0 already gone)"),
                              (2, "zrem_retry", "done", f"removed 1 member(s) from {ZSET}"),
                              (3, "delete_stale_locks", "done", "deleted 1 key(s) (0 already gone)")]
    assert [(s.targets, s.output, s.backup_records) for s in report.steps] == [
        (["lock:a"], {"deleted": 1}, 1), (["m1"], {"removed": 1}, 1), (["lock:b"], {"deleted": 1}, 1)]
    assert (report.plan_id, report.plan_sha256, report.dry_run) == (plan.plan_id, plan.plan_sha256, False)
    assert report.approver.startswith("local:") and report.approval_warning is None
    assert report.backup_file == str(backup_path(settings, plan.plan_id))
    assert [(r["step"], r["plan_id"], r["plan_sha256"]) for r in read_backup(backup_path(settings, plan.plan_id))] == [
        (n, plan.plan_id, plan.plan_sha256) for n in (1, 2, 3)]
    assert report.audit_file == str(audit_path(settings))
    last = audit_log(settings).read()[-1]
    assert last["event"] == "apply_finished" and report.audit_head == str(audit_log(settings).head())
    assert (last["result"], last["detail"], last["dry_run"]) == ("completed", report.summary, False)
    assert (last["plan_id"], last["plan_sha256"], last["approver"]) == (plan.plan_id, plan.plan_sha256, report.approver)
    (started,) = _audit(settings, "apply_started")
    assert (started["plan_id"], started["plan_sha256"], started["approver"], started["detail"]) == (
        plan.plan_id, plan.plan_sha256, report.approver, "3 step(s)")
    assert [(r["step"], r["action"], r["result"], r["detail"], r["approver"], r["plan_sha256"])
            for r in _audit(settings, "step")] == [(n, a, st, d, report.approver, plan.plan_sha256)
                                                  for n, a, st, d in _steps(report)]
    applied = store.application_record(settings, plan.plan_id)
    assert applied["status"] == "completed" and applied["approver"] == report.approver
    assert not redis_client.exists("lock:a", "lock:b") and redis_client.zrange(ZSET, 0, -1) == [b"m2"]


async def test_state_changed_between_two_steps_stops_the_later_one_and_says_why(settings, redis_client) -> None:
    plan = _plan(settings, await _three_steps(settings, redis_client))
    token = approve(settings, plan.plan_id)

    async def someone_else(number: int) -> None:
        if number == 1:
            redis_client.zrem(ZSET, "m1")  # another operator cleaned it up meanwhile

    report = await _apply(settings, plan.plan_id, token, after_step=someone_else)
    why = f"precondition no longer holds: m1 is no longer in {ZSET}"
    assert report.status == "stopped"
    assert _steps(report)[1:] == [(2, "zrem_retry", "drift", why),
                                  (3, "delete_stale_locks", "not_run", "not run: stopped at step 2")]
    assert report.steps[1].targets == [] and report.steps[1].output == {} and report.steps[1].backup_records == 0
    assert report.summary == (f"STOPPED at step 2 (zrem_retry): {why}. Steps done: 1; the backups are on disk.")
    assert redis_client.get("lock:b") == b"processing"  # step 3 never ran
    assert [(r["step"], r["result"]) for r in _audit(settings, "step")] == [(1, "done"), (2, "drift")]
    assert _audit(settings, "apply_finished")[-1]["result"] == "stopped"
    record = store.application_record(settings, plan.plan_id)
    assert record["status"] == "stopped" and record["summary"] == report.summary


async def test_a_failure_at_the_first_step_says_none_was_done(settings, redis_client, outbox_db) -> None:
    redis_client.set("lock:a", "processing")
    bad = SqlUpdateOp(service="event", table="pg_authid", set_status="COMPLETED", expect_status="FAILED",
                      rows=[SqlRow(id="00000000-0000-0000-0000-000000000000")])
    plan = _plan(settings, [_step(1, "reconcile_sql", bad, []),
                            _step(2, "delete_stale_locks", DelOp(keys=["lock:a"]), [])])
    report = await _apply(settings, plan.plan_id, approve(settings, plan.plan_id))
    problem = "table 'pg_authid' is not one of [conventions.tables]"
    assert _steps(report) == [(1, "reconcile_sql", "drift", problem),
                              (2, "delete_stale_locks", "not_run", "not run: stopped at step 1")]
    assert report.summary == f"STOPPED at step 1 (reconcile_sql): {problem}. Steps done: none; the backups are on disk."
    assert report.backup_file is None  # nothing was backed up: no file to point to
    assert redis_client.get("lock:a") == b"processing"


async def test_a_step_redis_refuses_is_reported_not_raised(settings, redis_client) -> None:
    """A step that Redis refuses still leaves an honest report, audit and record."""
    redis_client.set("lock:a", "processing")
    redis_client.hset("h", "f", "v")
    plan = _plan(settings, [_step(1, "delete_stale_locks", DelOp(keys=["lock:a"]), []),
                            _step(2, "zrem_retry", ZRemOp(key="h", members=["x"]), [])])  # ZREM on a hash: WRONGTYPE
    report = await _apply(settings, plan.plan_id, approve(settings, plan.plan_id))
    assert report.status == "stopped"
    assert [s.status for s in report.steps] == ["done", "failed"]
    assert report.steps[1].detail == ("WRONGTYPE Operation against a key holding the wrong kind of value: the key "
                                      "exists but is not of the expected type")
    assert report.summary.startswith("STOPPED at step 2 (zrem_retry): ")
    assert report.summary.endswith(". Steps done: 1; the backups are on disk.")
    assert [(r["step"], r["result"]) for r in _audit(settings, "step")] == [(1, "done"), (2, "failed")]
    assert store.application_record(settings, plan.plan_id)["status"] == "stopped"


async def test_a_replay_failing_part_way_reports_what_it_replayed(settings, redis_client) -> None:
    stream = "stream:test"

    def message(n: int, fields: list[tuple[str, str]]) -> ReplayMessage:
        return ReplayMessage(dlq_key=f"{stream}-dlq", dlq_id=f"1700000000000-{n}", message_id=f"1690000000000-{n}",
                             source="stream", fields=fields)

    op = XAddOp(stream=stream, maxlen=None, messages=[message(0, [("id", "e0")]), message(1, [])])
    plan = _plan(settings, [_step(1, "replay", op, [], reversible=False)])
    report = await _apply(settings, plan.plan_id, approve(settings, plan.plan_id))
    (only,) = redis_client.xrange(stream)
    new_id = only[0].decode()
    (step,) = report.steps
    assert step.status == "failed" and step.detail.startswith("internal error (DataError: ")  # a crash, reported
    assert step.detail.endswith(f" (replayed before the failure: {new_id})")
    assert step.output == {"replayed": [{"dlq_key": f"{stream}-dlq", "dlq_id": "1700000000000-0",
                                         "message_id": "1690000000000-0", "new_id": new_id, "stream": stream}]}
    assert f"replayed before the failure: {new_id}" in report.summary
    assert [(r["new_id"], r["approver"]) for r in _audit(settings, "replayed")] == [(new_id, report.approver)]


async def test_the_pre_flight_stops_before_any_change_and_names_the_step(settings, redis_client) -> None:
    plan = _plan(settings, await _three_steps(settings, redis_client))
    token = approve(settings, plan.plan_id)
    redis_client.set("lock:b", "taken again")  # step 3's key changed since the plan
    dry = await _apply(settings, plan.plan_id, token, dry_run=True)
    report = await _apply(settings, plan.plan_id, token)  # the dry run left the token usable
    for result, status in ((dry, "dry_run_drift"), (report, "stopped")):
        assert result.status == status
        problem = result.steps[2].detail
        assert "lock:b" in problem
        assert [s.status for s in result.steps] == ["not_run", "not_run", "drift"]
        assert {s.detail for s in result.steps[:2]} == {"not run: a precondition no longer holds"}
        assert result.summary == (f"STOPPED before any change: step 3 (delete_stale_locks): {problem}. "
                                  "Nothing was changed; propose the remediation again.")
        assert result.backup_file is None
    assert redis_client.get("lock:a") == b"processing" and redis_client.zscore(ZSET, "m1") == 1
    drifts = _audit(settings, "step")
    assert [(r["step"], r["action"], r["result"], r["detail"]) for r in drifts] == [
        (3, "delete_stale_locks", "drift", report.steps[2].detail)] * 2
    assert [r["dry_run"] for r in _audit(settings, "apply_finished")] == [True, False]
    assert store.application_record(settings, plan.plan_id)["status"] == "stopped"


async def test_a_dry_run_checks_everything_and_changes_nothing(settings, redis_client) -> None:
    plan = _plan(settings, await _three_steps(settings, redis_client))
    token = approve(settings, plan.plan_id)
    report = await _apply(settings, plan.plan_id, token, dry_run=True)
    assert report.status == "dry_run_ok" and report.dry_run
    assert [(s.status, s.detail) for s in report.steps] == [
        ("would_run", "preconditions hold"), ("would_run", "preconditions hold"),
        ("would_run", "preconditions hold; NOT reversible")]
    assert report.summary == f"dry run of {plan.plan_id}: every precondition holds; nothing was changed"
    assert report.backup_file is None
    assert [r["event"] for r in audit_log(settings).read()][-2:] == ["dry_run", "apply_finished"]
    assert not _audit(settings, "apply_started")
    assert store.application_record(settings, plan.plan_id) is None  # not claimed: it can still be applied
    assert redis_client.exists("lock:a", "lock:b") == 2
    assert (await _apply(settings, plan.plan_id, token)).status == "completed"


async def test_a_pre_flight_that_crashes_closes_the_plan(settings, redis_client) -> None:
    redis_client.set("lock:a", "processing")
    plan = _plan(settings, [_step(1, "delete_stale_locks", DelOp(keys=["lock:a"]),
                                  [Check(kind="key_unchanged", args={"digest": "0"})])])  # no key: a bug
    token = approve(settings, plan.plan_id)
    dry = await _apply(settings, plan.plan_id, token, dry_run=True)
    report = await _apply(settings, plan.plan_id, token)
    expected = "STOPPED before any change: the preconditions could not be checked: internal error (KeyError: 'key')"
    assert (dry.status, dry.summary) == ("dry_run_drift", expected)
    assert (report.status, report.summary) == ("stopped", expected)
    assert [(s.status, s.detail) for s in report.steps] == [("not_run", "not run")]
    assert store.application_record(settings, plan.plan_id)["status"] == "stopped"
    assert redis_client.get("lock:a") == b"processing"


async def test_a_pre_flight_that_redis_refuses_names_the_reason(settings, redis_client) -> None:
    redis_client.set("lock:a", "processing")
    redis_client.set("not-a-zset", "x")
    check = Check(kind="zset_member", args={"key": "not-a-zset", "member": "m", "allow_missing": False})
    plan = _plan(settings, [_step(1, "zrem_retry", ZRemOp(key="not-a-zset", members=["m"]), [check])])
    report = await _apply(settings, plan.plan_id, approve(settings, plan.plan_id))
    assert report.status == "stopped"
    assert report.summary == ("STOPPED before any change: the preconditions could not be checked: WRONGTYPE "
                              "Operation against a key holding the wrong kind of value: the key exists but is not "
                              "of the expected type")
    assert redis_client.get("not-a-zset") == b"x"


def _refused(settings, plan_id: str) -> dict[str, Any]:
    return _audit(settings, "apply_refused")[-1]


async def test_a_refusal_is_audited_and_names_the_audit_head(settings, redis_client) -> None:
    plan = _plan(settings, await _three_steps(settings, redis_client))
    with pytest.raises(TokenRefused) as info:
        await _apply(settings, plan.plan_id, "")
    record, head = _refused(settings, plan.plan_id), str(audit_log(settings).head())
    assert (record["plan_id"], record["plan_sha256"], record["result"]) == (plan.plan_id, plan.plan_sha256, "missing")
    assert str(info.value).endswith(f" (audit head {head})")
    assert record["detail"] == str(info.value).removesuffix(f" (audit head {head})")
    unknown = store.new_plan_id()
    with pytest.raises(NotFound) as info:
        await _apply(settings, unknown, "")
    record, head = _refused(settings, unknown), str(audit_log(settings).head())
    assert (record["plan_id"], record["plan_sha256"], record["result"]) == (unknown, None, "NotFound")
    assert str(info.value).endswith(f" (audit head {head})")


async def test_an_expired_plan_is_refused_even_with_a_valid_token(settings, redis_client) -> None:
    """The token names a later plan expiry than the plan itself (minted by hand): the plan's own expiry wins."""
    plan = _plan(settings, await _three_steps(settings, redis_client), expires_in=-1)
    token, _ = mint_token(settings, plan_id=plan.plan_id, plan_sha256=plan.plan_sha256, approver="local:test",
                          plan_expires_at=datetime.now(UTC) + timedelta(hours=1))
    with pytest.raises(RemediationRefused) as info:
        await _apply(settings, plan.plan_id, token)
    assert str(info.value).startswith(f"plan {plan.plan_id} expired at {plan.expires_at}: propose the remediation "
                                      "again (audit head ")
    assert _refused(settings, plan.plan_id)["result"] == "RemediationRefused"
    assert redis_client.exists("lock:a", "lock:b") == 2
    assert store.application_record(settings, plan.plan_id) is None


async def test_a_used_token_and_an_applied_plan_are_refused(settings, redis_client) -> None:
    plan = _plan(settings, await _three_steps(settings, redis_client))
    token = approve(settings, plan.plan_id)
    assert (await _apply(settings, plan.plan_id, token)).status == "completed"
    with pytest.raises(TokenRefused) as info:  # even a dry run: the token was spent
        await _apply(settings, plan.plan_id, token, dry_run=True)
    assert info.value.reason == "reused"
    assert str(info.value).startswith("this approval token was already used: tokens are single-use; have plan "
                                      f"{plan.plan_id} (or a fresh one) approved again")
    fresh, _ = mint_token(settings, plan_id=plan.plan_id, plan_sha256=plan.plan_sha256, approver="local:test",
                          plan_expires_at=datetime.fromisoformat(plan.expires_at))
    with pytest.raises(RemediationRefused) as info:
        await _apply(settings, plan.plan_id, fresh, dry_run=True)
    assert str(info.value).startswith(f"plan {plan.plan_id} was already applied (completed): a plan runs once; "
                                      "propose the remediation again")
    assert [r["result"] for r in _audit(settings, "apply_refused")] == ["reused", "RemediationRefused"]
    assert len(_audit(settings, "apply_started")) == 1


async def test_a_refused_apply_consumes_nothing(settings, redis_client) -> None:
    """A token for another plan is refused without spending either plan's token or claiming a plan."""
    plan = _plan(settings, await _three_steps(settings, redis_client))
    other = _plan(settings, [_step(1, "delete_stale_locks", DelOp(keys=["lock:zz"]), [])])
    token = approve(settings, plan.plan_id)
    with pytest.raises(MeshError):
        await _apply(settings, other.plan_id, token)
    assert store.application_record(settings, other.plan_id) is None
    assert (await _apply(settings, plan.plan_id, token)).status == "completed"


async def test_a_plan_runs_on_its_own_redis_instance(tmp_path, outbox_db, redis_url, redis_client) -> None:
    """Two instances hold the same key; the plan was made for ``other``: only ``other``'s key is deleted."""
    other = ThrowawayRedis(tmp_path)
    try:
        settings = settings_for(tmp_path, outbox_db, {"url": redis_url, "instances": {"other": {"url": other.url}}})
        far = redis.Redis.from_url(other.url)
        for client in (redis_client, far):
            client.set("lock:a", "processing")
        connections = Connections(settings)
        try:
            snap = await rr.key_snapshot(connections.redis("other"), "lock:a")
        finally:
            await connections.aclose()
        check = Check(kind="key_unchanged", args={"key": "lock:a", "digest": snap.digest, "allow_missing": False})
        steps = [_step(1, "delete_stale_locks", DelOp(keys=["lock:a"]), [check])]
        plan = _plan(settings, steps, redis_instance="other")
        report = await _apply(settings, plan.plan_id, approve(settings, plan.plan_id))
        assert report.status == "completed", report.summary
        assert far.get("lock:a") is None and redis_client.get("lock:a") == b"processing"
        far.close()
    finally:
        other.kill()


async def test_the_replay_guard_scans_from_the_plans_creation(settings, redis_client) -> None:
    """An old dead letter whose event was re-sent long before the plan was proposed: not a replay of this
    plan (the scan starts a clock margin before the proposal); re-sent just before it: the apply stops."""
    now_ms = int(datetime.now(UTC).timestamp() * 1000)
    stream = "stream:test"
    dead = f"{now_ms - 3_600_000}-0"
    message = ReplayMessage(dlq_key=f"{stream}-dlq", dlq_id=dead, message_id=f"{now_ms - 3_700_000}-0",
                            source="stream", fields=[("id", "ev-1"), ("type", "t")])
    op = XAddOp(stream=stream, maxlen=None, messages=[message])
    redis_client.xadd(stream, {"id": "ev-1", "type": "t"}, id=f"{now_ms - 1_800_000}-0")  # 30 min ago
    plan = _plan(settings, [_step(1, "replay", op, [], reversible=False)])
    report = await _apply(settings, plan.plan_id, approve(settings, plan.plan_id))
    assert report.status == "completed", report.summary
    recent = f"{now_ms - 60_000}-0"  # on another stream, re-sent a minute before the plan: within the clock margin
    redis_client.xadd("stream:other", {"id": "ev-1", "type": "t"}, id=recent)
    again = _plan(settings, [_step(1, "replay", op.model_copy(update={"stream": "stream:other", "messages": [
        message.model_copy(update={"dlq_id": f"{now_ms - 3_600_000}-1"})]}), [], reversible=False)])
    report = await _apply(settings, again.plan_id, approve(settings, again.plan_id))
    assert report.status == "stopped" and report.steps[0].status == "drift"
    assert f"already holds entry {recent} carrying the same original id ev-1" in report.steps[0].detail


def _replay_op(stream: str, now_ms: int, n: int) -> XAddOp:
    message = ReplayMessage(dlq_key=f"{stream}-dlq", dlq_id=f"{now_ms - 3_600_000}-{n}",
                            message_id=f"{now_ms - 3_700_000}-{n}", source="stream",
                            fields=[("id", f"ev-{n}"), ("type", "t")])
    return XAddOp(stream=stream, maxlen=None, messages=[message])


async def test_a_plan_replays_once(settings, redis_client) -> None:
    """The audit log holds a replay of this plan (its step 1): a second replay step of the same plan is
    refused at run time, whatever dead letter it names."""
    now_ms = int(datetime.now(UTC).timestamp() * 1000)
    steps = [_step(1, "replay", _replay_op("stream:test", now_ms, 0), [], reversible=False),
             _step(2, "replay", _replay_op("stream:test", now_ms, 1), [], reversible=False)]
    plan = _plan(settings, steps)
    report = await _apply(settings, plan.plan_id, approve(settings, plan.plan_id))
    assert [s.status for s in report.steps] == ["done", "drift"]
    assert report.steps[1].detail.startswith(f"precondition no longer holds: the audit log records that dead letter "
                                             f"{now_ms - 3_600_000}-0 was already replayed as ")
    assert f"(plan {plan.plan_id}, " in report.steps[1].detail
    assert redis_client.xlen("stream:test") == 1


async def test_the_run_time_replay_look_resumes_where_the_pre_flight_ended(tmp_path, outbox_db, redis_url,
                                                                        redis_client) -> None:
    """[limits] allow 2 pages of 2 entries. The pre-flight reads the 3 entries of the stream; step 1 runs, and
    2 more arrive. The replay step's own look reads only those 2 (one page, the end seen) and replays; a look
    from the start would need 3 pages and stop the apply (``could not check``)."""
    settings = settings_for(tmp_path, outbox_db, redis_url, limits={"max_count": 2, "scan_max_iterations": 2})
    now_ms = int(datetime.now(UTC).timestamp() * 1000)
    for n in range(3):
        redis_client.xadd("stream:test", {"id": f"other-{n}"}, id=f"{now_ms - 120_000 + n}-0")
    redis_client.set("lock:a", "processing")
    steps = [_step(1, "delete_stale_locks", DelOp(keys=["lock:a"]), []),
             _step(2, "replay", _replay_op("stream:test", now_ms, 0), [], reversible=False)]
    plan = _plan(settings, steps)

    async def more_traffic(number: int) -> None:
        for n in range(3, 5) if number == 1 else ():
            redis_client.xadd("stream:test", {"id": f"other-{n}"}, id=f"{now_ms - 120_000 + n}-0")

    report = await _apply(settings, plan.plan_id, approve(settings, plan.plan_id), after_step=more_traffic)
    assert report.status == "completed", report.summary
    assert redis_client.xlen("stream:test") == 6
