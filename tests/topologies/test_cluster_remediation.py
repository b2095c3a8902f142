"""Remediation on a three-primary Redis Cluster: per-slot guarantees, notes, and refusals.

The poison-pill story of tests/remediation runs unchanged on the cluster (the stream, its
dead-letter stream and the retry keys hash to different slots, on different nodes): the
plan says its steps touch several slots and that the retry-key deletion runs slot by
slot; applying it backs up, reads back and deletes per slot. A BullMQ retry needs its
queue's keys in one slot: refused with the reason under the plain ``bull`` prefix,
proposed and applied under the hash-tagged ``{bull}`` prefix BullMQ uses on clusters.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from server.connections import Connections
from server.errors import RemediationRefused
from tests.remediation.conftest import GROUP, STREAM, Poison, approve, event_status, settings_for
from tests.remediation.target_sim import ConsumerThread
from tests.streams.conftest import Backend
from tools.remediation.backups import read_backup
from tools.remediation.executor import apply_plan
from tools.remediation.planner import Request, propose
from tools.remediation.slots import slot_of

pytestmark = pytest.mark.anyio


def cluster_settings(tmp_path: Path, pg: str | None, backend: Backend, **overrides: object):
    return settings_for(tmp_path, pg, backend.url, redis={"mode": "cluster"}, **overrides)


async def test_dlq_replay_story_on_a_cluster(tmp_path: Path, outbox_db: str, cluster_backend: Backend) -> None:
    client = cluster_backend.client
    settings = cluster_settings(tmp_path, outbox_db, cluster_backend)
    poison = Poison(client, outbox_db, settings)
    retry_base = f"retry:post-processor:{GROUP}:{poison.message_id}"
    retry_keys = [retry_base + ":attempt", retry_base + ":lastError"]
    assert client.get(retry_keys[0]) == b"5"
    assert len({slot_of(STREAM), slot_of(STREAM + "-dlq"), *map(slot_of, retry_keys)}) > 1
    connections = Connections(settings)
    try:
        plan = await propose(settings, connections, Request("dlq_replay", STREAM, None, "event", None, None))
        assert [s.action for s in plan.steps] == ["export", "replay", "confirm_replay", "xdel_dlq",
                                                  "delete_retry_keys", "reconcile_sql"]
        assert plan.redis_instance == "default"
        assert any(n.startswith("Redis Cluster: the steps touch keys in") for n in plan.notes), plan.notes
        delete = plan.steps[4]
        if len({slot_of(k) for k in delete.operation.keys}) > 1:
            assert any(f"step {delete.number} (delete_retry_keys)" in n and "slot by slot" in n for n in plan.notes)
        token = approve(settings, plan.plan_id)
        poison.fixed = True
        with ConsumerThread(poison.processor):
            report = await apply_plan(settings, connections, plan.plan_id, token)
        assert report.status == "completed", report.summary_text()
    finally:
        await connections.aclose()
    assert client.xlen(f"{STREAM}-dlq") == 0
    assert not any(client.exists(k) for k in retry_keys)
    assert event_status(outbox_db, poison.event["id"]) == "COMPLETED"
    records = read_backup(settings.resolved_state_dir / "backups" / f"{plan.plan_id}.jsonl")
    backed_up = {r["target"] for r in records if r["kind"] == "key"}
    assert set(delete.operation.keys) <= backed_up


def _failed_job(client: object, prefix: str, queue: str, job_id: str) -> None:
    q = f"{prefix}:{queue}"
    client.hset(f"{q}:{job_id}", mapping={  # type: ignore[attr-defined]
        "name": "events.geocode_event", "data": "{}", "opts": json.dumps({"attempts": 3}), "attemptsMade": "1",
        "failedReason": "geocoder down", "processedOn": "1", "finishedOn": "2", "stacktrace": "[]"})
    client.zadd(f"{q}:failed", {job_id: 2})  # type: ignore[attr-defined]
    client.hset(f"{q}:meta", mapping={"version": "bullmq:5.12.0"})  # type: ignore[attr-defined]


async def test_bullmq_retry_needs_a_hash_tagged_prefix(tmp_path: Path, cluster_backend: Backend) -> None:
    client = cluster_backend.client
    _failed_job(client, "bull", "event-queue", "j1")
    plain = cluster_settings(tmp_path, None, cluster_backend)
    connections = Connections(plain)
    try:
        with pytest.raises(RemediationRefused, match=r"different slots.*bullmq_prefix = \"\{bull\}\""):
            await propose(plain, connections, Request("retry_failed_job", None, None, None, "event-queue", None))
    finally:
        await connections.aclose()
    assert client.zscore("bull:event-queue:failed", "j1") == 2  # nothing changed

    _failed_job(client, "{bull}", "event-queue", "j2")
    tagged = cluster_settings(tmp_path, None, cluster_backend, conventions={"bullmq_prefix": "{bull}"})
    connections = Connections(tagged)
    try:
        plan = await propose(tagged, connections, Request("retry_failed_job", None, None, None, "event-queue", None))
        token = approve(tagged, plan.plan_id)
        report = await apply_plan(tagged, connections, plan.plan_id, token)
    finally:
        await connections.aclose()
    assert report.status == "completed", report.summary_text()
    assert client.zscore("{bull}:event-queue:failed", "j2") is None
    assert client.lrange("{bull}:event-queue:wait", 0, -1) == [b"j2"]
    assert read_backup(Path(report.backup_file))[0]["data"]["hash"]["failedReason"] == "geocoder down"


async def test_key_deletion_runs_slot_by_slot_and_stops_at_a_drifted_slot(
    tmp_path: Path, cluster_backend: Backend
) -> None:
    """The DEL runner on a cluster: one WATCH/backup/read-back/MULTI per slot; a key that differs from the
    approved digest stops the step at its slot, earlier slots stay deleted and are named."""
    from server.approval.audit import audit_log
    from tools.remediation import redis_reads as rr
    from tools.remediation.backups import BackupFile
    from tools.remediation.model import Check, DelOp, Step
    from tools.remediation.runners import Drift, RunContext, run_step

    client = cluster_backend.client
    keys = [f"lock:{n}" for n in range(40)]
    by_slot: dict[int, str] = {}
    for key in keys:
        by_slot.setdefault(slot_of(key), key)
    first, second = list(by_slot.values())[:2]
    client.set(first, "a")
    client.set(second, "b")
    settings = cluster_settings(tmp_path, None, cluster_backend)
    connections = Connections(settings)
    try:
        redis = connections.redis()
        digests = {k: (await rr.key_snapshot(redis, k)).digest for k in (first, second)}  # type: ignore[union-attr]
        client.set(second, "changed after approval")

        def step(number: int) -> Step:
            return Step(number=number, action="delete_stale_locks", description="d", command="DEL", target="t",
                        precondition="p", backup="b", reversible=False, operation=DelOp(keys=[first, second]),
                        checks=[Check(kind="key_unchanged", args={"key": k, "digest": d}) for k, d in digests.items()])

        backups = BackupFile(tmp_path / "backup.jsonl", "plan-x", "0" * 64)
        ctx = RunContext(settings, connections, backups, {}, audit_log(settings), "tester")
        with pytest.raises(Drift, match=rf"key {second} changed.*already deleted, other slots: {first}"):
            await run_step(ctx, step(1))
    finally:
        await connections.aclose()
    assert not client.exists(first)  # its slot's transaction ran, after its backup was read back
    assert client.get(second) == b"changed after approval"  # never deleted
    saved = read_backup(tmp_path / "backup.jsonl")
    assert [r["target"] for r in saved] == [first]
