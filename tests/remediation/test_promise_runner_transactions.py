"""Promise (continued from ``test_promise_runner_records.py``): the transactional runners back up
exactly what they change and say what they did when they stop: the SQL UPDATE (one transaction,
under the statement timeout), the BullMQ retry (WATCH on the job and the failed set) and the DEL
across the slots of a Redis Cluster (one transaction per slot).
"""

from __future__ import annotations

from typing import Any

import anyio
import psycopg
import pytest
import redis

from server.errors import ServiceUnavailable
from tests.remediation.conftest import settings_for
from tests.remediation.test_promise_runner_records import RacingBackup, _backups, _records, _run
from tools.remediation import redis_reads as rr
from tools.remediation.model import BullRetryOp, Check, DelOp, SqlRow, SqlUpdateOp
from tools.remediation.runners import Drift
from tools.remediation.slots import slot_of

pytestmark = pytest.mark.anyio


# -- SQL UPDATE ----------------------------------------------------------------------------------

def _failed_rows(pg: str, n: int) -> list[str]:
    with psycopg.connect(pg, autocommit=True) as conn:
        return [str(conn.execute(
            "INSERT INTO event_queue (id, status, type, emitter, payload, target_services) VALUES "
            "(gen_random_uuid(), 'FAILED', 'user:created', 'ms-user', '{\"n\": 1}', ARRAY['user:created']) "
            "RETURNING id").fetchone()[0]) for _ in range(n)]


def _statuses(pg: str, ids: list[str]) -> list[str]:
    with psycopg.connect(pg) as conn:
        return [conn.execute("SELECT status FROM event_queue WHERE id = %s", (i,)).fetchone()[0] for i in ids]


def _sql_op(ids: list[str], **kw: Any) -> SqlUpdateOp:
    return SqlUpdateOp(service="event", table=kw.get("table", "event_queue"), set_status="COMPLETED",
                       expect_status="FAILED", rows=[SqlRow(id=i, updated_at=kw.get("updated_at")) for i in ids])


async def test_sql_update_backs_up_every_row_then_updates_in_one_transaction(settings, outbox_db, tmp_path):
    ids = _failed_rows(outbox_db, 2)
    outcome = await _run(settings, _sql_op(ids), _backups(tmp_path))
    assert outcome.detail == "updated 2 row(s) of event_queue to COMPLETED in one transaction"
    assert outcome.targets == ids and outcome.output == {"updated": 2} and outcome.backup_records == 2
    records = _records(tmp_path)
    assert [(s, k, t) for s, k, t, _ in records] == [(3, "sql_row", f"event event_queue {i}") for i in ids]
    for entry_id, (*_, data) in zip(ids, records, strict=True):
        assert data["service"] == "event" and data["table"] == "event_queue"
        row = data["row"]
        assert row["id"] == entry_id and row["status"] == "FAILED" and row["payload"] == {"n": 1}
        assert row["target_services"] == ["user:created"] and row["updated_at"]  # every column, as JSON
    assert _statuses(outbox_db, ids) == ["COMPLETED", "COMPLETED"]


async def test_sql_update_of_a_row_that_moved_rolls_everything_back(settings, outbox_db, tmp_path) -> None:
    ids = _failed_rows(outbox_db, 2)
    with psycopg.connect(outbox_db, autocommit=True) as conn:
        conn.execute("UPDATE event_queue SET status = 'PROCESSING' WHERE id = %s", (ids[1],))
    with pytest.raises(Drift) as info:
        await _run(settings, _sql_op(ids), _backups(tmp_path))
    assert str(info.value) == (f"the guarded UPDATE of row {ids[1]} matched 0 rows (its status or updated_at "
                               "changed); the whole transaction was rolled back, nothing was updated")
    assert _statuses(outbox_db, ids) == ["FAILED", "PROCESSING"]  # the first row's UPDATE was rolled back


async def test_sql_update_of_a_row_that_is_gone(settings, outbox_db, tmp_path) -> None:
    ids = _failed_rows(outbox_db, 1)
    missing = "00000000-0000-0000-0000-000000000000"
    with pytest.raises(Drift) as info:
        await _run(settings, _sql_op([ids[0], missing]), _backups(tmp_path))
    assert str(info.value) == f"row {missing} of event_queue is gone; nothing was updated (rolled back)"
    assert _statuses(outbox_db, ids) == ["FAILED"]
    assert not (tmp_path / "b.jsonl").exists()  # nothing backed up, nothing changed


async def test_sql_update_refuses_a_table_outside_the_conventions(settings, outbox_db, tmp_path) -> None:
    ids = _failed_rows(outbox_db, 1)
    with pytest.raises(Drift) as info:
        await _run(settings, _sql_op(ids, table="pg_authid"), _backups(tmp_path))
    assert str(info.value) == "table 'pg_authid' is not one of [conventions.tables]"
    assert _statuses(outbox_db, ids) == ["FAILED"]


async def test_sql_update_runs_under_the_statement_timeout(tmp_path, outbox_db, redis_url) -> None:
    """A row locked by another transaction: the backup's SELECT ... FOR UPDATE waits, and the configured
    statement timeout ends the wait instead of holding the apply (a test-side ceiling fails a hang)."""
    quick = settings_for(tmp_path, outbox_db, redis_url, limits={"statement_timeout_ms": 300})
    ids = _failed_rows(outbox_db, 1)
    with psycopg.connect(outbox_db) as locker:
        locker.execute("SELECT 1 FROM event_queue WHERE id = %s FOR UPDATE", (ids[0],))
        with anyio.fail_after(20), pytest.raises(ServiceUnavailable, match="statement timeout"):
            await _run(quick, _sql_op(ids), _backups(tmp_path))
        locker.rollback()
    assert _statuses(outbox_db, ids) == ["FAILED"]
    assert not (tmp_path / "b.jsonl").exists()


# -- BullMQ retry ------------------------------------------------------------------------------

def _failed_jobs(client: redis.Redis, *job_ids: str) -> dict[str, Check]:
    checks = {}
    for n, job_id in enumerate(job_ids):
        client.hset(f"bull:q:{job_id}", mapping={"name": "t", "data": "{}", "attemptsMade": "3",
                                                  "failedReason": f"boom {job_id}", "finishedOn": "2",
                                                  "processedOn": "1"})
        client.zadd("bull:q:failed", {job_id: 10 + n})
        checks[job_id] = Check(kind="bull_job_failed", args={
            "prefix": "bull", "queue": "q", "job_id": job_id,
            "digest": rr.hash_digest(client.hgetall(f"bull:q:{job_id}"))})
    return checks


def _retry(*job_ids: str) -> BullRetryOp:
    return BullRetryOp(queue="q", prefix="bull", job_ids=list(job_ids), target_list="wait", push="LPUSH",
                       marker=False, events_maxlen=100)


async def test_bullmq_retry_backs_up_each_job_then_moves_it(settings, redis_client, tmp_path) -> None:
    checks = _failed_jobs(redis_client, "j1", "j2", "j3")
    outcome = await _run(settings, _retry("j1", "j2"), _backups(tmp_path), list(checks.values()))
    assert outcome.detail == "moved 2 job(s) of q from failed to wait"
    assert outcome.targets == ["j1", "j2"] and outcome.output == {"retried": ["j1", "j2"]}
    assert outcome.backup_records == 2
    records = _records(tmp_path)
    assert [(s, k, t) for s, k, t, _ in records] == [(3, "bull_job", "bull:q:j1"), (3, "bull_job", "bull:q:j2")]
    for n, (*_, data) in enumerate(records):
        job_id = f"j{n + 1}"
        assert data == {"queue": "q", "job_id": job_id, "failed_score": 10 + n,
                        "hash": {"name": "t", "data": "{}", "attemptsMade": "3", "failedReason": f"boom {job_id}",
                                 "finishedOn": "2", "processedOn": "1"}}
    assert redis_client.zrange("bull:q:failed", 0, -1) == [b"j3"]
    assert redis_client.lrange("bull:q:wait", 0, -1) == [b"j2", b"j1"]
    assert redis_client.hgetall("bull:q:j1") == {b"name": b"t", b"data": b"{}", b"attemptsMade": b"3"}


async def test_bullmq_retry_aborts_when_the_job_leaves_failed_after_its_backup(settings, redis_client, tmp_path):
    """Another worker retried the job between its backup and the EXEC (the failed set changed, not the job
    hash): the WATCH on the failed set must abort this job's transaction."""
    checks = _failed_jobs(redis_client, "j1")
    backups = RacingBackup(tmp_path / "b.jsonl", lambda: redis_client.zrem("bull:q:failed", "j1"))
    with pytest.raises(Drift) as info:
        await _run(settings, _retry("j1"), backups, list(checks.values()))
    assert str(info.value) == "job j1 changed during its retry (nothing applied to it); retried so far: none"
    assert not redis_client.exists("bull:q:wait")
    assert redis_client.hget("bull:q:j1", "failedReason") == b"boom j1"


async def test_bullmq_retry_stopped_part_way_says_what_was_retried(settings, redis_client, tmp_path) -> None:
    checks = _failed_jobs(redis_client, "j1", "j2", "j3")
    redis_client.zrem("bull:q:failed", "j3")  # retried by someone else since the plan
    with pytest.raises(Drift) as info:
        await _run(settings, _retry("j1", "j2", "j3"), _backups(tmp_path), list(checks.values()))
    assert str(info.value) == "job j3 left the failed set meanwhile; retried so far: ['j1', 'j2']"
    redis_client.delete("bull:q:wait")
    checks = _failed_jobs(redis_client, "j4")
    with pytest.raises(Drift) as info:
        await _run(settings, _retry("j5"), _backups(tmp_path), list(checks.values()))
    assert str(info.value) == "job j5 left the failed set meanwhile; retried so far: none"


async def test_bullmq_retry_of_a_changed_job_says_what_was_retried(settings, redis_client, tmp_path) -> None:
    checks = _failed_jobs(redis_client, "j1", "j2")
    redis_client.hset("bull:q:j2", "failedReason", "failed again, differently")
    with pytest.raises(Drift) as info:
        await _run(settings, _retry("j1", "j2"), _backups(tmp_path), list(checks.values()))
    assert str(info.value) == "job j2 changed since the plan was approved; retried so far: ['j1']"
    assert redis_client.zrange("bull:q:failed", 0, -1) == [b"j2"]
    checks = _failed_jobs(redis_client, "j3")
    redis_client.hset("bull:q:j3", "attemptsMade", "4")
    with pytest.raises(Drift) as info:
        await _run(settings, _retry("j3"), _backups(tmp_path), list(checks.values()))
    assert str(info.value) == "job j3 changed since the plan was approved; retried so far: none"


async def test_bullmq_retry_concurrent_change_after_a_first_job(settings, redis_client, tmp_path) -> None:
    checks = _failed_jobs(redis_client, "j1", "j2")
    backups = RacingBackup(tmp_path / "b.jsonl", lambda: redis_client.hset("bull:q:j2", "attemptsMade", "4"), nth=2)
    with pytest.raises(Drift) as info:
        await _run(settings, _retry("j1", "j2"), backups, list(checks.values()))
    assert str(info.value) == "job j2 changed during its retry (nothing applied to it); retried so far: ['j1']"
    assert redis_client.lrange("bull:q:wait", 0, -1) == [b"j1"]


# -- DEL across the slots of a Redis Cluster -----------------------------------------------------

def _keys_in_two_slots() -> tuple[list[str], list[str]]:
    """Two keys sharing a slot (hash tag) and one in another slot, in slot_groups order."""
    first, second = ["{s1}lock:a", "{s1}lock:b"], ["{s2}lock:c"]
    assert slot_of(first[0]) == slot_of(first[1]) != slot_of(second[0])
    return first, second


async def test_del_across_slots_runs_one_transaction_per_slot(tmp_path, outbox_db, cluster_backend) -> None:
    settings = settings_for(tmp_path, outbox_db, cluster_backend.redis_config)
    client = cluster_backend.client
    first, second = _keys_in_two_slots()
    for key in first + second:
        client.set(key, "processing")
    outcome = await _run(settings, DelOp(keys=first + second + ["{s1}gone"]), _backups(tmp_path))
    assert outcome.detail == "deleted 3 key(s) (1 already gone) in 2 cluster slot transactions"
    assert outcome.output == {"deleted": 3} and outcome.backup_records == 4
    assert [t for _, _, t, _ in _records(tmp_path)] == ["{s1}lock:a", "{s1}lock:b", "{s1}gone", "{s2}lock:c"]
    assert not any(client.exists(k) for k in first + second)


async def test_del_stopped_at_a_later_slot_says_what_earlier_slots_deleted(tmp_path, outbox_db,
                                                                           cluster_backend) -> None:
    settings = settings_for(tmp_path, outbox_db, cluster_backend.redis_config)
    client = cluster_backend.client
    first, second = _keys_in_two_slots()
    for key in first + second:
        client.set(key, "processing")
    backups = RacingBackup(tmp_path / "b.jsonl", lambda: client.set(second[0], "taken again"), nth=2)
    with pytest.raises(Drift) as info:
        await _run(settings, DelOp(keys=first + second), backups)
    assert str(info.value) == ("a key changed between its backup and the DEL; nothing of this slot was deleted "
                               "(already deleted, other slots: {s1}lock:a, {s1}lock:b)")
    assert client.get(second[0]) == b"taken again"
    check = Check(kind="key_unchanged", args={"key": "{s2}lock:d", "digest": "f" * 64, "allow_missing": True})
    client.set("{s1}lock:e", "x")
    client.set("{s2}lock:d", "changed")
    with pytest.raises(Drift) as info:
        await _run(settings, DelOp(keys=["{s1}lock:e", "{s2}lock:d"]), _backups(tmp_path), [check])
    assert str(info.value) == ("key {s2}lock:d changed since the plan was approved; nothing of this slot was deleted "
                               "(already deleted, other slots: {s1}lock:e)")
    three = ["{s1}lock:f", "{s2}lock:g", "{s3}lock:h"]  # a third slot: the note names both earlier slots' keys
    for key in three:
        client.set(key, "processing")
    backups = RacingBackup(tmp_path / "c.jsonl", lambda: client.set(three[2], "taken again"), nth=3)
    with pytest.raises(Drift) as info:
        await _run(settings, DelOp(keys=three), backups)
    assert str(info.value).endswith("(already deleted, other slots: {s1}lock:f, {s2}lock:g)")
