"""Promise: a backup is written *and read back* before anything is deleted.

A disk that lies is played by :class:`LyingDisk`: right after the backup file is fsynced,
and before it is read back, the bytes just written are altered (still valid JSON, other
content), cut (no longer JSON) or lost. Every destructive runner must then stop with
:class:`BackupError` and leave Redis and PostgreSQL exactly as they were; a whole apply
must stop at that step with nothing deleted after it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
import redis

from server.approval.audit import audit_log
from server.connections import Connections
from tests.remediation.conftest import GROUP, STREAM, Poison, approve, event_status
from tools.remediation import redis_reads as rr
from tools.remediation.backups import BackupError, BackupFile, read_backup
from tools.remediation.executor import apply_plan
from tools.remediation.model import (
    BullRetryOp,
    Check,
    DelOp,
    SqlRow,
    SqlUpdateOp,
    Step,
    XAckOp,
    XClaimOp,
    XDelOp,
    ZRemOp,
)
from tools.remediation.planner import Request, propose
from tools.remediation.runners import RunContext, run_step

pytestmark = pytest.mark.anyio

MODES = ("altered", "cut", "lost")


class LyingDisk:
    """Corrupts a backup file (``*/backups/*.jsonl`` or ``b.jsonl``) between its fsync and its read-back."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, mode: str, when: Callable[[dict], bool] | None = None):
        self.mode = mode
        self.when = when or (lambda record: True)
        self.hits = 0
        self._real = {name: getattr(os, name) for name in ("fsync", "fdatasync")}
        for name in self._real:
            monkeypatch.setattr(os, name, self._wrap(name))

    def _wrap(self, name: str) -> Callable[[int], None]:
        def sync(fd: int) -> None:
            self._real[name](fd)
            path = Path(os.readlink(f"/proc/self/fd/{fd}"))
            if path.suffix == ".jsonl" and (path.parent.name == "backups" or path.name == "b.jsonl"):
                self._corrupt(path)

        return sync

    def _corrupt(self, path: Path) -> None:
        data = path.read_bytes()
        lines = data.splitlines(keepends=True)
        if not lines or not self.when(json.loads(lines[-1])):
            return
        self.hits += 1
        last = lines[-1]
        if self.mode == "altered":  # bit rot that still parses: another step number
            record = json.loads(last)
            record["step"] = record["step"] + 100
            lines[-1] = json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
        elif self.mode == "cut":
            lines[-1] = last[: len(last) // 2]
        else:
            lines = lines[:-1]
        path.write_bytes(b"".join(lines))


def _step(op: Any, checks: list[Check] | None = None, number: int = 1) -> Step:
    return Step(number=number, action=op.op, description="", command="", target="", precondition="",
                checks=checks or [], backup="", reversible=True, operation=op)


async def _run(settings, tmp_path: Path, op: Any) -> Any:
    connections = Connections(settings)
    try:
        ctx = RunContext(settings, connections, BackupFile(tmp_path / "b.jsonl", "p-test", "0" * 64), {},
                         audit_log(settings), "test")
        return await run_step(ctx, _step(op))
    finally:
        await connections.aclose()


def _state(client: redis.Redis) -> dict[bytes, Any]:
    """Every key with its DUMP and, for streams, the groups' pending lists: what a delete would change."""
    state: dict[bytes, Any] = {}
    for key in sorted(client.scan_iter(count=1000)):
        entry: dict[str, Any] = {"dump": client.dump(key)}
        if client.type(key) == b"stream":
            entry["pending"] = [
                (g["name"], [(p["message_id"], p["consumer"]) for p in
                             client.xpending_range(key, g["name"], "-", "+", 1000)])
                for g in client.xinfo_groups(key)
            ]
        state[key] = entry
    return state


def _pending_stream(client: redis.Redis) -> list[str]:
    client.xgroup_create(STREAM, GROUP, id="0", mkstream=True)
    ids = [client.xadd(STREAM, {"id": f"m{i}"}).decode() for i in range(3)]
    client.xreadgroup(GROUP, "pp-dead", {STREAM: ">"})
    return ids


def _destructive_ops(client: redis.Redis, pg: str) -> dict[str, Any]:
    ids = _pending_stream(client)
    client.set("idempotency:post-processor:pp-event:x", "processing", ex=3600)
    client.zadd("retry:post-processor:pp-event", {"x": 1.0})
    client.hset("bull:q:j1", mapping={"name": "t", "data": "{}", "attemptsMade": "3", "failedReason": "boom"})
    client.zadd("bull:q:failed", {"j1": 2})
    with psycopg.connect(pg, autocommit=True) as conn:
        row_id = conn.execute(
            "INSERT INTO event_queue (id, status, type, emitter, payload, target_services) VALUES "
            "(gen_random_uuid(), 'FAILED', 'user:created', 'ms-user', '{}', ARRAY['user:created']) RETURNING id"
        ).fetchone()[0]
    return {
        "xdel": XDelOp(key=STREAM, ids=ids[:2]),
        "del": DelOp(keys=["idempotency:post-processor:pp-event:x"]),
        "zrem": ZRemOp(key="retry:post-processor:pp-event", members=["x"]),
        "xack": XAckOp(stream=STREAM, group=GROUP, ids=ids[:2]),
        "xclaim": XClaimOp(stream=STREAM, group=GROUP, consumer="pp-live", min_idle_ms=0, ids=ids[:2]),
        "sql_update": SqlUpdateOp(service="event", table="event_queue", set_status="COMPLETED",
                                  expect_status="FAILED", rows=[SqlRow(id=str(row_id))]),
        "bullmq_retry": BullRetryOp(queue="q", prefix="bull", job_ids=["j1"], target_list="wait", push="LPUSH",
                                    marker=False, events_maxlen=100),
        "row": str(row_id),
    }


OPS = ["xdel", "del", "zrem", "xack", "xclaim", "sql_update", "bullmq_retry"]


@pytest.mark.parametrize("op_name", OPS)
async def test_a_backup_that_does_not_read_back_stops_the_step_before_any_change(
    settings, outbox_db, redis_client, tmp_path, monkeypatch, op_name: str
) -> None:
    ops = _destructive_ops(redis_client, outbox_db)
    before = _state(redis_client)
    for mode in MODES:
        (tmp_path / "b.jsonl").unlink(missing_ok=True)
        with monkeypatch.context() as patch:
            disk = LyingDisk(patch, mode)
            with pytest.raises(BackupError, match="nothing was deleted"):
                await _run(settings, tmp_path, ops[op_name])
        assert disk.hits >= 1, mode
        assert _state(redis_client) == before, mode
        assert event_status(outbox_db, ops["row"]) == "FAILED", mode
    # control: with an honest disk the same step changes the state and its backup reads back, so the
    # refusals above were the read-back's doing
    (tmp_path / "b.jsonl").unlink(missing_ok=True)
    outcome = await _run(settings, tmp_path, ops[op_name])
    assert outcome.backup_records >= 1
    assert len(read_backup(tmp_path / "b.jsonl")) == outcome.backup_records
    if op_name == "sql_update":
        assert event_status(outbox_db, ops["row"]) == "COMPLETED"
    else:
        assert _state(redis_client) != before


@pytest.mark.parametrize("mode", MODES)
async def test_apply_stops_at_the_step_whose_backup_does_not_read_back(
    settings, poison: Poison, outbox_db, redis_client, monkeypatch, mode: str
) -> None:
    """dlq_replay: export (backup 1), replay, confirm, XDEL the dead letter (backup 2), ... The disk lies on
    the dead letter's backup: the dead letter must still be there, nothing after it runs."""
    connections = Connections(settings)
    try:
        plan = await propose(settings, connections, Request("dlq_replay", STREAM, None, "event", None, None))
        token = approve(settings, plan.plan_id)
        actions = [s.action for s in plan.steps]
        xdel_step = actions.index("xdel_dlq") + 1
        disk = LyingDisk(monkeypatch, mode, when=lambda record: record["step"] == xdel_step)
        poison.fixed = True
        from tests.remediation.target_sim import ConsumerThread

        with ConsumerThread(poison.processor):
            report = await apply_plan(settings, connections, plan.plan_id, token)
    finally:
        await connections.aclose()
    assert disk.hits == 1
    assert report.status == "stopped"
    statuses = [s.status for s in report.steps]
    assert statuses[xdel_step - 1] == "failed" and "nothing was deleted" in report.steps[xdel_step - 1].detail
    assert statuses[: xdel_step - 1] == ["done"] * (xdel_step - 1)
    assert set(statuses[xdel_step:]) == {"not_run"}
    assert redis_client.xlen(f"{STREAM}-dlq") == 1  # the dead letter was kept
    base = f"retry:post-processor:{GROUP}:{poison.message_id}"
    assert redis_client.exists(base + ":attempt")  # the retry keys too
    assert event_status(outbox_db, poison.event["id"]) == "FAILED"  # and the SQL row
    assert [r["result"] for r in audit_log(settings).read() if r["event"] == "step"][-1] == "failed"


async def test_the_read_back_compares_content_not_only_json(settings, redis_client, tmp_path, monkeypatch) -> None:
    """A lying disk that keeps valid JSON (another value) is caught as surely as a cut line."""
    redis_client.set("k", "v")
    LyingDisk(monkeypatch, "altered")
    backups = BackupFile(tmp_path / "b.jsonl", "p-test", "0" * 64)
    snap = await _snapshot(settings, "k")
    with pytest.raises(BackupError, match="did not read back identical"):
        backups.write(1, [("key", "k", snap)])


async def _snapshot(settings, key: str) -> dict:
    connections = Connections(settings)
    try:
        snap = await rr.key_snapshot(connections.redis(), key)
    finally:
        await connections.aclose()
    assert snap is not None
    return snap.model_dump()
