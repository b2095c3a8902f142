"""Promise: an apply that stops part-way says so honestly, whatever stopped it: a precondition that no
longer holds after several steps ran, a Redis that went away between two steps, a backup that cannot
be written, a crash inside a step or inside the pre-flight; and an apply allowed past a failing trust
check says so with every problem.

Same hand-made plans as ``test_promise_executor.py`` (sealed and saved through the real store,
approved through ``mesh-mcp approve``'s code path, applied on a real Redis / PostgreSQL); the faults
are real ones: a redis-server killed, a directory where the backup file goes, a row id PostgreSQL
refuses to read as a uuid, a trust file that changed since the server started.
"""

from __future__ import annotations

import logging

import pytest
import redis

from server.approval.keys import create_approver_key
from server.approval.trust import gate_status
from tests.remediation.conftest import approve, settings_for
from tests.remediation.redis_proc import ThrowawayRedis
from tests.remediation.test_promise_executor import _apply, _audit, _key_check, _plan, _step, _steps, _three_steps
from tools.remediation import store
from tools.remediation.backups import backup_path
from tools.remediation.model import Check, ConfirmOp, DelOp, ReplayMessage, SqlRow, SqlUpdateOp, XAddOp

pytestmark = pytest.mark.anyio

LONG_ID = "not-a-uuid-" + "x" * 400  # PostgreSQL quotes the whole value in its error: a message over 300 characters


def _step_records(settings) -> list[tuple]:
    return [(r["step"], r["action"], r["result"], r["detail"], r["plan_id"], r["plan_sha256"], r["approver"])
            for r in _audit(settings, "step")]


async def test_a_stop_after_two_steps_names_both_done_and_audits_the_drift_in_full(settings, redis_client) -> None:
    plan = _plan(settings, await _three_steps(settings, redis_client))

    async def someone_else(number: int) -> None:
        if number == 2:
            redis_client.set("lock:b", "taken again")  # step 3's key changed after step 2

    report = await _apply(settings, plan.plan_id, approve(settings, plan.plan_id), after_step=someone_else)
    why = "precondition no longer holds: key lock:b changed since the plan was made"
    assert [s[2] for s in _steps(report)] == ["done", "done", "drift"] and report.steps[2].detail == why
    assert report.summary == (f"STOPPED at step 3 (delete_stale_locks): {why}. Steps done: 1, 2; the backups are "
                              "on disk.")
    assert report.backup_file == str(backup_path(settings, plan.plan_id))
    assert _step_records(settings) == [(n, a, st, d, plan.plan_id, plan.plan_sha256, report.approver)
                                       for n, a, st, d in _steps(report)]
    assert redis_client.get("lock:b") == b"taken again"


async def test_the_pre_flight_drift_is_audited_with_the_plan_and_the_approver(settings, redis_client) -> None:
    plan = _plan(settings, await _three_steps(settings, redis_client))
    redis_client.zrem("retry:post-processor:pp-event", "m1")  # step 2's member is gone before the apply
    report = await _apply(settings, plan.plan_id, approve(settings, plan.plan_id))
    assert [s.status for s in report.steps] == ["not_run", "drift", "not_run"]
    assert _step_records(settings) == [(2, "zrem_retry", "drift", report.steps[1].detail, plan.plan_id,
                                        plan.plan_sha256, report.approver)]
    assert redis_client.get("lock:a") == b"processing"


async def test_a_redis_gone_between_two_steps_fails_the_next_step_and_runs_nothing_after(
        tmp_path, outbox_db, redis_url) -> None:
    server = ThrowawayRedis(tmp_path)
    try:
        settings = settings_for(tmp_path, outbox_db, server.url)
        client = redis.Redis.from_url(server.url)
        for key in ("lock:a", "lock:b", "lock:c"):
            client.set(key, "processing")
        steps = [_step(n, "delete_stale_locks", DelOp(keys=[key]), [await _key_check(settings, key)])
                 for n, key in ((1, "lock:a"), (2, "lock:b"), (3, "lock:c"))]
        plan = _plan(settings, steps)
        client.close()

        async def kill(number: int) -> None:
            if number == 1:
                server.kill()

        report = await _apply(settings, plan.plan_id, approve(settings, plan.plan_id), after_step=kill)
    finally:
        server.kill()
    assert [s.status for s in report.steps] == ["done", "failed", "not_run"]
    assert report.steps[1].detail.startswith(f"Redis at {server.url} is unavailable: "), report.steps[1].detail
    assert (report.steps[1].targets, report.steps[1].output, report.steps[1].backup_records) == ([], {}, 0)
    assert report.steps[2].detail == "not run: stopped at step 2"
    assert report.summary == (f"STOPPED at step 2 (delete_stale_locks): {report.steps[1].detail}. Steps done: 1; "
                              "the backups are on disk.")
    assert [(r["step"], r["result"], r["detail"]) for r in _audit(settings, "step")] == [
        (1, "done", report.steps[0].detail), (2, "failed", report.steps[1].detail)]
    assert store.application_record(settings, plan.plan_id)["status"] == "stopped"


async def test_a_backup_that_cannot_be_written_fails_the_step_and_deletes_nothing(settings, redis_client) -> None:
    plan = _plan(settings, await _three_steps(settings, redis_client))
    path = backup_path(settings, plan.plan_id)
    path.mkdir(parents=True)  # a directory where the backup file goes: the append fails
    report = await _apply(settings, plan.plan_id, approve(settings, plan.plan_id))
    assert [s.status for s in report.steps] == ["failed", "not_run", "not_run"]
    detail = report.steps[0].detail
    assert detail.startswith(f"could not write the backup {path}: ") and detail.endswith("; nothing was deleted")
    assert report.summary == (f"STOPPED at step 1 (delete_stale_locks): {detail}. Steps done: none; "
                              "the backups are on disk.")
    assert redis_client.exists("lock:a", "lock:b") == 2
    assert [(r["step"], r["result"]) for r in _audit(settings, "step")] == [(1, "failed")]


def _bad_row(service: str = "event") -> SqlUpdateOp:
    return SqlUpdateOp(service=service, table="event_queue", set_status="COMPLETED", expect_status="FAILED",
                       rows=[SqlRow(id=LONG_ID)])


async def test_a_step_that_crashes_is_reported_with_a_bounded_detail_and_logged(
        settings, redis_client, outbox_db, caplog) -> None:
    redis_client.set("lock:a", "processing")
    plan = _plan(settings, [_step(1, "delete_stale_locks", DelOp(keys=["lock:a"]), []),
                            _step(2, "reconcile_sql", _bad_row(), []),
                            _step(3, "delete_stale_locks", DelOp(keys=["lock:b"]), [])])
    with caplog.at_level(logging.ERROR, logger="mesh.remediation"):
        report = await _apply(settings, plan.plan_id, approve(settings, plan.plan_id))
    assert [s.status for s in report.steps] == ["done", "failed", "not_run"]
    detail = report.steps[1].detail
    prefix = "internal error (InvalidTextRepresentation: "
    assert detail.startswith(prefix + 'invalid input syntax for type uuid: "not-a-uuid-xxx') and detail.endswith(")")
    assert len(detail) == len(prefix) + 300 + 1  # the message cut at 300 characters
    assert (report.steps[1].targets, report.steps[1].output, report.steps[1].backup_records) == ([], {}, 0)
    assert report.summary.startswith(f"STOPPED at step 2 (reconcile_sql): {detail}. Steps done: 1;")
    (logged,) = [r for r in caplog.records if r.name == "mesh.remediation"]
    assert logged.getMessage() == "remediation step 2 crashed" and logged.exc_info is not None
    assert [(r["step"], r["result"]) for r in _audit(settings, "step")] == [(1, "done"), (2, "failed")]
    assert store.application_record(settings, plan.plan_id)["status"] == "stopped"


async def test_a_pre_flight_that_crashes_is_reported_with_a_bounded_detail_and_logged(
        settings, redis_client, outbox_db, caplog) -> None:
    redis_client.set("lock:a", "processing")
    check = Check(kind="row_matches", args={"service": "event", "table": "event_queue", "id": LONG_ID,
                                            "status": "FAILED"})
    plan = _plan(settings, [_step(1, "reconcile_sql", _bad_row(), [check])])
    with caplog.at_level(logging.ERROR, logger="mesh.remediation"):
        report = await _apply(settings, plan.plan_id, approve(settings, plan.plan_id))
    prefix = ("STOPPED before any change: the preconditions could not be checked: internal error "
              "(InvalidTextRepresentation: ")
    assert report.status == "stopped" and report.summary.startswith(prefix + "invalid input syntax for type uuid")
    assert len(report.summary) == len(prefix) + 300 + 1 and report.summary.endswith(")")
    (logged,) = [r for r in caplog.records if r.name == "mesh.remediation"]
    assert logged.getMessage() == f"remediation pre-flight of {plan.plan_id} crashed" and logged.exc_info is not None


async def test_a_replay_failing_after_two_messages_names_both(settings, redis_client) -> None:
    stream = "stream:test"

    def message(n: int, fields: list[tuple[str, str]]) -> ReplayMessage:
        return ReplayMessage(dlq_key=f"{stream}-dlq", dlq_id=f"1700000000000-{n}", message_id=f"1690000000000-{n}",
                             source="stream", fields=fields)

    op = XAddOp(stream=stream, maxlen=None, messages=[message(0, [("id", "e0")]), message(1, [("id", "e1")]),
                                                      message(2, [])])
    plan = _plan(settings, [_step(1, "replay", op, [], reversible=False)])
    report = await _apply(settings, plan.plan_id, approve(settings, plan.plan_id))
    new_ids = [entry[0].decode() for entry in redis_client.xrange(stream)]
    assert len(new_ids) == 2
    (step,) = report.steps
    assert step.status == "failed" and step.detail.endswith(f" (replayed before the failure: {', '.join(new_ids)})")
    assert [r["new_id"] for r in step.output["replayed"]] == new_ids


async def test_a_replay_that_completes_reports_only_its_own_messages_and_the_next_step_its_own(
        settings, redis_client) -> None:
    """The "replayed before the failure" note belongs to a replay step that failed, never to one that
    completed nor to the steps after it."""
    stream = "stream:test"
    redis_client.set("lock:a", "processing")
    message = ReplayMessage(dlq_key=f"{stream}-dlq", dlq_id="1700000000000-0", message_id="1690000000000-0",
                            source="stream", fields=[("id", "e0")])
    plan = _plan(settings, [_step(1, "replay", XAddOp(stream=stream, maxlen=None, messages=[message]), [],
                                  reversible=False),
                            _step(2, "delete_stale_locks", DelOp(keys=["lock:a"]), [])])
    report = await _apply(settings, plan.plan_id, approve(settings, plan.plan_id))
    ((new_id, _),) = redis_client.xrange(stream)
    new_id = new_id.decode()
    assert report.status == "completed", report.summary
    assert _steps(report) == [(1, "replay", "done", f"replayed 1 message(s) into {stream} as {new_id}"),
                              (2, "delete_stale_locks", "done", "deleted 1 key(s) (0 already gone)")]
    assert [s.output for s in report.steps] == [
        {"replayed": [{"dlq_key": f"{stream}-dlq", "dlq_id": "1700000000000-0", "message_id": "1690000000000-0",
                       "new_id": new_id, "stream": stream}]}, {"deleted": 1}]


async def test_a_step_whose_earlier_step_did_not_confirm_is_not_run(settings, redis_client) -> None:
    """``step_ok`` is checked at run time, just before its step: step 1 deleted nothing (the key was gone),
    so step 2, which needs step 1 to have deleted, does not run."""
    redis_client.set("lock:b", "processing")
    plan = _plan(settings, [_step(1, "delete_stale_locks", DelOp(keys=["lock:gone"]), []),
                            _step(2, "delete_stale_locks", DelOp(keys=["lock:b"]),
                                  [Check(kind="step_ok", args={"step": 1, "output_key": "deleted"})])])
    report = await _apply(settings, plan.plan_id, approve(settings, plan.plan_id))
    assert _steps(report) == [(1, "delete_stale_locks", "done", "deleted 0 key(s) (1 already gone)"),
                              (2, "delete_stale_locks", "drift",
                               "precondition no longer holds: step 1 did not confirm (deleted is false)")]
    assert redis_client.get("lock:b") == b"processing"


async def test_a_confirm_step_reads_what_its_replay_step_replayed(settings, redis_client) -> None:
    """Replay, then confirm: the confirm step waits for exactly the entries step 1 replayed (a consumer of
    group ``g`` reads and acknowledges them between the two steps)."""
    stream = "stream:test"
    redis_client.xgroup_create(stream, "g", id="$", mkstream=True)
    message = ReplayMessage(dlq_key=f"{stream}-dlq", dlq_id="1700000000000-0", message_id="1690000000000-0",
                            source="stream", fields=[("id", "e0")])
    plan = _plan(settings, [
        _step(1, "replay", XAddOp(stream=stream, maxlen=None, messages=[message]), [], reversible=False),
        _step(2, "confirm_replay", ConfirmOp(stream=stream, group="g", replay_step=1, timeout_ms=5_000), [])])

    async def consumer(number: int) -> None:
        if number == 1:
            for _, entries in redis_client.xreadgroup("g", "c1", {stream: ">"}):
                for entry_id, _ in entries:
                    redis_client.xack(stream, "g", entry_id)

    report = await _apply(settings, plan.plan_id, approve(settings, plan.plan_id), after_step=consumer)
    ((new_id, _),) = redis_client.xrange(stream)
    assert report.status == "completed", report.summary
    assert (report.steps[1].detail, report.steps[1].output) == (
        "1 replay(s) processed by group g", {"confirmed": True, "ids": [new_id.decode()]})


async def test_an_apply_past_a_failing_trust_check_names_every_problem(tmp_path, outbox_db, redis_url,
                                                                       redis_client) -> None:
    alice = create_approver_key(tmp_path / "alice.key", "alice", "correct horse battery", scrypt_n=2**10)
    trust = tmp_path / "trust.toml"
    trust.write_text(f'[approvers]\nalice = "{alice}"\n')
    settings = settings_for(tmp_path, outbox_db, redis_url,
                            approval={"trust_file": str(trust), "allow_unprotected_approvers": True})
    redis_client.set("lock:a", "processing")
    plan = _plan(settings, [_step(1, "delete_stale_locks", DelOp(keys=["lock:a"]), [])])
    token = approve(settings, plan.plan_id, key_path=tmp_path / "alice.key",
                    ask_secret=lambda prompt: "correct horse battery")
    trust.write_text(f'[approvers]\nalice = "{alice}"\nbob = "{alice}"\n')  # changed since the server started
    problems = gate_status(settings).problems
    assert len(problems) == 2 and problems[1].startswith(f"the server's approvers differ from those of {trust}")
    report = await _apply(settings, plan.plan_id, token)
    assert report.status == "completed" and report.approver == "alice"
    assert report.approval_warning == ("the server was started with --allow-unprotected-approvers and the trust "
                                       f"check fails: {problems[0]}; {problems[1]}")
    assert redis_client.get("lock:a") is None
