"""Promise: a replay is audited message by message as it happens (so a failure part-way leaves an
honest record of what was replayed), and the cleanup after it waits for a confirmation that the
replays were processed, never taking "not seen yet" or "failed again" for done.

The XADD and confirm runners run on the machine's Redis; the consumer group is played by hand
(XREADGROUP, XACK, an entry in the dead-letter stream), so every state is exact.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
import redis

from server.approval.audit import audit_log
from server.connections import Connections
from tests.remediation.conftest import GROUP, STREAM
from tools.remediation.backups import BackupFile
from tools.remediation.model import ConfirmOp, ReplayMessage, Step, StepResult, XAddOp
from tools.remediation.runners import Drift, RunContext, run_step

pytestmark = pytest.mark.anyio

DLQ = f"{STREAM}-dlq"
PLAN, SHA = "p-20261201-000000-0a1b2c3d", "ab" * 32


def _step(op: Any, number: int) -> Step:
    return Step(number=number, action="replay" if op.op == "xadd" else "confirm_replay", description="",
                command="", target="", precondition="", checks=[], backup="", reversible=False, operation=op)


async def _run(settings, tmp_path: Path, op: Any, number: int = 2,
               results: dict[int, StepResult] | None = None) -> tuple[Any, RunContext]:
    connections = Connections(settings)
    ctx = RunContext(settings, connections, BackupFile(tmp_path / "b.jsonl", PLAN, SHA), results or {},
                     audit_log(settings), "local:alice")
    try:
        try:
            return await run_step(ctx, _step(op, number)), ctx
        except Exception as exc:
            exc.ctx = ctx  # type: ignore[attr-defined]
            raise
    finally:
        await connections.aclose()


def _message(n: int, fields: list[tuple[str, str]] | None = None) -> ReplayMessage:
    return ReplayMessage(dlq_key=DLQ, dlq_id=f"1700000000000-{n}", message_id=f"1690000000000-{n}", source="stream",
                         fields=fields if fields is not None else [("id", f"e{n}"), ("type", "t"), ("a", str(n))])


async def test_xadd_replays_in_order_with_the_exact_fields_and_audits_each(settings, redis_client, tmp_path):
    op = XAddOp(stream=STREAM, maxlen=None, messages=[_message(0), _message(1)])
    outcome, ctx = await _run(settings, tmp_path, op)
    entries = redis_client.xrange(STREAM)
    new_ids = [i.decode() for i, _ in entries]
    assert [f for _, f in entries] == [{b"id": b"e0", b"type": b"t", b"a": b"0"},
                                       {b"id": b"e1", b"type": b"t", b"a": b"1"}]
    assert list(entries[0][1]) == [b"id", b"type", b"a"]  # field order kept
    expected = [{"dlq_key": DLQ, "dlq_id": f"1700000000000-{n}", "message_id": f"1690000000000-{n}",
                 "new_id": new_ids[n], "stream": STREAM} for n in range(2)]
    assert outcome.detail == f"replayed 2 message(s) into {STREAM} as {new_ids[0]}, {new_ids[1]}"
    assert outcome.targets == new_ids and outcome.output == {"replayed": expected}
    assert outcome.backup_records == 0 and ctx.replay_log == expected
    records = [r for r in audit_log(settings).read() if r["event"] == "replayed"]
    assert len(records) == 2
    for n, record in enumerate(records):
        assert {k: record[k] for k in expected[n]} == expected[n]
        assert (record["plan_id"], record["plan_sha256"], record["approver"]) == (PLAN, SHA, "local:alice")
        assert (record["step"], record["action"], record["result"]) == (2, "replay", "done")
        assert record["detail"] == f"{DLQ} 1700000000000-{n} replayed as {new_ids[n]}"


async def test_xadd_trims_the_stream_approximately_as_planned(settings, redis_client, tmp_path) -> None:
    for i in range(500):
        redis_client.xadd(STREAM, {"old": str(i)})
    await _run(settings, tmp_path, XAddOp(stream=STREAM, maxlen=10, messages=[_message(0)]))
    # MAXLEN ~ 10: whole macro nodes are dropped, so far fewer than 501 remain, but more than 10
    assert 10 < redis_client.xlen(STREAM) < 400
    redis_client.delete(STREAM)
    for i in range(500):
        redis_client.xadd(STREAM, {"old": str(i)})
    await _run(settings, tmp_path, XAddOp(stream=STREAM, maxlen=None, messages=[_message(1)]))
    assert redis_client.xlen(STREAM) == 501  # no trim when the plan has none


async def test_a_replay_failing_part_way_keeps_the_record_of_what_was_replayed(settings, redis_client, tmp_path):
    op = XAddOp(stream=STREAM, maxlen=None, messages=[_message(0), _message(1, fields=[])])  # XADD refuses no fields
    with pytest.raises(Exception) as info:
        await _run(settings, tmp_path, op)
    ctx: RunContext = info.value.ctx  # type: ignore[attr-defined]
    (only,) = redis_client.xrange(STREAM)
    assert ctx.replay_log == [{"dlq_key": DLQ, "dlq_id": "1700000000000-0", "message_id": "1690000000000-0",
                               "new_id": only[0].decode(), "stream": STREAM}]
    assert [r["new_id"] for r in audit_log(settings).read() if r["event"] == "replayed"] == [only[0].decode()]


# -- confirm --------------------------------------------------------------------------------------

def _replayed(client: redis.Redis, n: int = 1) -> list[str]:
    client.xgroup_create(STREAM, GROUP, id="$", mkstream=True)
    return [client.xadd(STREAM, {"id": f"e{i}"}).decode() for i in range(n)]


def _results(new_ids: list[str]) -> dict[int, StepResult]:
    return {2: StepResult(number=2, action="replay", status="done", detail="",
                          output={"replayed": [{"new_id": i} for i in new_ids]})}


def _confirm(timeout_ms: int = 300) -> ConfirmOp:
    return ConfirmOp(stream=STREAM, group=GROUP, replay_step=2, timeout_ms=timeout_ms)


async def test_confirm_returns_once_every_replay_was_processed(settings, redis_client, tmp_path) -> None:
    ids = _replayed(redis_client, 2)
    redis_client.xreadgroup(GROUP, "c1", {STREAM: ">"})
    redis_client.xack(STREAM, GROUP, *ids)
    with anyio.fail_after(20):
        outcome, _ = await _run(settings, tmp_path, _confirm(), 3, _results(ids))
    assert outcome.detail == f"2 replay(s) processed by group {GROUP}"
    assert outcome.targets == ids and outcome.output == {"confirmed": True, "ids": ids}


async def test_confirm_waits_while_a_replay_is_processed(settings, redis_client, tmp_path) -> None:
    (new_id,) = _replayed(redis_client)
    redis_client.xreadgroup(GROUP, "c1", {STREAM: ">"})
    ack = threading.Timer(1.0, lambda: redis_client.xack(STREAM, GROUP, new_id))
    ack.start()
    started = time.monotonic()
    try:
        with anyio.fail_after(20):
            outcome, _ = await _run(settings, tmp_path, _confirm(15_000), 3, _results([new_id]))
    finally:
        ack.cancel()
    assert outcome.output == {"confirmed": True, "ids": [new_id]}
    assert 0.9 < time.monotonic() - started < 10  # it polled until the ack, then returned


async def test_confirm_gives_up_at_its_timeout_and_keeps_the_dead_letters(settings, redis_client, tmp_path):
    ids = _replayed(redis_client, 2)
    redis_client.xreadgroup(GROUP, "c1", {STREAM: ">"}, count=1)  # the first is being processed, the second waits
    started = time.monotonic()
    with anyio.fail_after(20), pytest.raises(Drift) as info:
        await _run(settings, tmp_path, _confirm(600), 3, _results(ids))
    elapsed = time.monotonic() - started
    assert 0.55 < elapsed < 8
    text = str(info.value)
    assert text.startswith(f"not confirmed within 600 ms: the replay {ids[0]} is pending at consumer c1 "
                           "(1 deliveries, idle ")
    assert text.endswith(f" ms); the replay {ids[1]} was not read by group {GROUP} yet (is a consumer running?). "
                         "The dead letters were kept; check again later and propose the cleanup")


async def test_confirm_stops_at_a_replay_that_failed_again(settings, redis_client, tmp_path) -> None:
    ids = _replayed(redis_client, 2)
    redis_client.xreadgroup(GROUP, "c1", {STREAM: ">"})
    redis_client.xack(STREAM, GROUP, *ids)
    dead = redis_client.xadd(DLQ, {"messageId": ids[1], "error": "failed again"}).decode()
    with anyio.fail_after(20), pytest.raises(Drift) as info:
        await _run(settings, tmp_path, _confirm(10_000), 3, _results(ids))
    assert str(info.value) == (f"the replay {ids[1]} failed again and was dead-lettered as {dead}: fix the cause "
                               "before replaying again; the original dead letter was kept")


async def test_confirm_stops_when_the_group_is_gone(settings, redis_client, tmp_path) -> None:
    ids = _replayed(redis_client, 2)
    redis_client.xgroup_destroy(STREAM, GROUP)
    with anyio.fail_after(20), pytest.raises(Drift) as info:
        await _run(settings, tmp_path, _confirm(10_000), 3, _results(ids))
    gone = f"group {GROUP} of {STREAM} no longer exists"
    assert str(info.value) == (f"{gone}; {gone}: fix the cause before replaying again; the original dead letter "
                               "was kept")


async def test_confirm_without_a_replay_is_a_drift(settings, redis_client, tmp_path) -> None:
    _replayed(redis_client)
    no_output = {2: StepResult(number=2, action="replay", status="done", detail="", output={})}
    for results in ({}, _results([]), no_output):
        with anyio.fail_after(20), pytest.raises(Drift) as info:
            await _run(settings, tmp_path, _confirm(), 3, results)
        assert str(info.value) == "step 2 replayed nothing"
