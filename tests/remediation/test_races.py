"""Destructive runners against a concurrent writer: what is deleted is exactly what was backed up.

A consumer (or BullMQ) may change a key between the step's backup and its delete. The
runners WATCH the keys before reading them for the backup, so such a change aborts the
transaction and nothing is deleted. The concurrent writer is played by a backup file that
changes the key while the backup is written: the race window, opened on purpose, on a
real Redis: the machine's, and a three-primary cluster (each key's WATCH/MULTI on its own slot's
node; the BullMQ keys of a queue share a slot under the hash-tagged prefix ``{bull}``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import redis

from server.approval.audit import audit_log
from server.connections import Connections
from tests.remediation.conftest import Topology, settings_for
from tools.remediation import redis_reads as rr
from tools.remediation.backups import BackupFile, read_backup
from tools.remediation.model import BullRetryOp, Check, DelOp, Step
from tools.remediation.runners import Drift, RunContext, run_step

pytestmark = pytest.mark.anyio

LOCK = "idempotency:post-processor:pp-event:1700000000000-0"


@pytest.fixture
def env(tmp_path: Path, topology: Topology) -> tuple[Any, Any, str]:
    """(settings, client, BullMQ prefix) on the machine's Redis, then on the cluster."""
    prefix = "{bull}" if topology.cluster else "bull"
    settings = settings_for(tmp_path, None, topology.redis, conventions={"bullmq_prefix": prefix})
    return settings, topology.client, prefix


class RacingBackup(BackupFile):
    """A backup file during whose write another client changes Redis (``race`` runs once)."""

    def __init__(self, path: Path, race: Any) -> None:
        super().__init__(path, "p-test", "0" * 64)
        self.race = race

    def write(self, step: int, records: list[tuple[str, str, Any]]) -> int:
        count = super().write(step, records)
        if self.race is not None:
            self.race()
            self.race = None
        return count


def _step(op: Any, checks: list[Check]) -> Step:
    return Step(number=1, action=op.op, description="", command="", target="", precondition="", checks=checks,
                backup="", reversible=True, operation=op)


async def _run(settings, backups: BackupFile, step: Step) -> Any:
    connections = Connections(settings)
    try:
        ctx = RunContext(settings, connections, backups, {}, audit_log(settings), "test")
        return await run_step(ctx, step)
    finally:
        await connections.aclose()


async def _digest(settings, key: str) -> str:
    connections = Connections(settings)
    try:
        snap = await rr.key_snapshot(connections.redis(), key)
    finally:
        await connections.aclose()
    assert snap is not None
    return snap.digest


async def test_del_deletes_what_was_backed_up(env, tmp_path: Path) -> None:
    settings, redis_client, _ = env
    redis_client.set(LOCK, "processing", ex=86400)
    check = Check(kind="key_unchanged", args={"key": LOCK, "digest": await _digest(settings, LOCK),
                                              "allow_missing": True})
    outcome = await _run(settings, BackupFile(tmp_path / "b.jsonl", "p-test", "0" * 64),
                         _step(DelOp(keys=[LOCK]), [check]))
    assert outcome.output == {"deleted": 1} and not redis_client.exists(LOCK)
    (record,) = read_backup(tmp_path / "b.jsonl")
    assert record["data"]["value"] == "processing" and record["data"]["pttl_ms"] > 86_000_000


async def test_del_aborts_when_the_key_changes_after_its_backup(env, tmp_path: Path) -> None:
    settings, redis_client, _ = env
    redis_client.set(LOCK, "processing", ex=86400)
    check = Check(kind="key_unchanged", args={"key": LOCK, "digest": await _digest(settings, LOCK),
                                              "allow_missing": True})
    backups = RacingBackup(tmp_path / "b.jsonl", lambda: redis_client.set(LOCK, "taken again", ex=86400))
    with pytest.raises(Drift, match="nothing was deleted"):
        await _run(settings, backups, _step(DelOp(keys=[LOCK]), [check]))
    assert redis_client.get(LOCK) == b"taken again"  # the new lock survives


async def test_del_refuses_a_key_that_differs_from_the_approved_one(env, tmp_path) -> None:
    settings, redis_client, _ = env
    redis_client.set(LOCK, "processing", ex=86400)
    check = Check(kind="key_unchanged", args={"key": LOCK, "digest": "f" * 64, "allow_missing": True})
    with pytest.raises(Drift, match="changed since the plan was approved"):
        await _run(settings, BackupFile(tmp_path / "b.jsonl", "p-test", "0" * 64), _step(DelOp(keys=[LOCK]), [check]))
    assert redis_client.get(LOCK) == b"processing"
    assert not (tmp_path / "b.jsonl").exists()


def _failed_job(client: redis.Redis, prefix: str) -> Check:
    queue = f"{prefix}:event-queue"
    client.hset(f"{queue}:j1", mapping={"name": "t", "data": "{}", "opts": json.dumps({"attempts": 3}),
                                         "attemptsMade": "3", "failedReason": "boom", "finishedOn": "2"})
    client.zadd(f"{queue}:failed", {"j1": 2})
    digest = rr.hash_digest(client.hgetall(f"{queue}:j1"))
    return Check(kind="bull_job_failed", args={"prefix": prefix, "queue": "event-queue", "job_id": "j1",
                                               "digest": digest})


def _retry_op(prefix: str) -> BullRetryOp:
    return BullRetryOp(queue="event-queue", prefix=prefix, job_ids=["j1"], target_list="wait", push="LPUSH",
                       marker=False, events_maxlen=100)


async def test_bullmq_retry_aborts_when_the_job_changes_after_its_backup(env, tmp_path) -> None:
    settings, redis_client, prefix = env
    queue = f"{prefix}:event-queue"
    check = _failed_job(redis_client, prefix)
    backups = RacingBackup(tmp_path / "b.jsonl", lambda: redis_client.hset(f"{queue}:j1", "attemptsMade", "4"))
    with pytest.raises(Drift, match="nothing applied to it"):
        await _run(settings, backups, _step(_retry_op(prefix), [check]))
    assert redis_client.zscore(f"{queue}:failed", "j1") == 2  # still failed, untouched by the retry
    assert redis_client.hget(f"{queue}:j1", "failedReason") == b"boom"
    assert not redis_client.exists(f"{queue}:wait")


async def test_bullmq_retry_backs_up_the_state_it_replaces(env, tmp_path) -> None:
    settings, redis_client, prefix = env
    queue = f"{prefix}:event-queue"
    check = _failed_job(redis_client, prefix)
    outcome = await _run(settings, BackupFile(tmp_path / "b.jsonl", "p-test", "0" * 64),
                         _step(_retry_op(prefix), [check]))
    assert outcome.output == {"retried": ["j1"]}
    assert redis_client.lrange(f"{queue}:wait", 0, -1) == [b"j1"]
    (record,) = read_backup(tmp_path / "b.jsonl")
    assert record["data"]["hash"]["failedReason"] == "boom" and record["data"]["failed_score"] == 2
    redis_client.hset(f"{queue}:j1", "failedReason", "again")  # failed again, differently
    redis_client.zadd(f"{queue}:failed", {"j1": 3})
    with pytest.raises(Drift, match="changed since the plan was approved"):
        await _run(settings, BackupFile(tmp_path / "c.jsonl", "p-test", "0" * 64), _step(_retry_op(prefix), [check]))
