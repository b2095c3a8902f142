"""Promise: every precondition kind holds on the state it was planned on and names what drifted.

Each kind of :mod:`tools.remediation.preconditions` is evaluated against a real Redis (and
PostgreSQL for ``row_matches``) twice or more: on the planned state (``None``: it holds) and
after the world changed the way a consumer or an operator would change it (the exact
sentence the apply report shows). Idle times are set with ``XCLAIM ... IDLE`` so the limits
are exercised on both sides with a wide margin.
"""

from __future__ import annotations

import uuid
from datetime import datetime

import psycopg
import pytest
import redis

from server.connections import Connections
from tools.remediation import redis_reads as rr
from tools.remediation.model import Check, StepResult
from tools.remediation.preconditions import CheckContext, evaluate, first_drift

pytestmark = pytest.mark.anyio

S, G = "stream:check", "workers"


@pytest.fixture
async def ctx(settings):
    connections = Connections(settings)
    try:
        yield CheckContext(settings, connections)
    finally:
        await connections.aclose()


async def _ev(ctx, kind: str, dynamic: bool = True, **args):
    return await evaluate(Check(kind=kind, args=args), ctx, dynamic=dynamic)


def _pending(r: redis.Redis, consumer: str = "alice", idle_ms: int = 60_000) -> str:
    entry = r.xadd(S, {"k": "v"}).decode()
    r.xgroup_create(S, G, id="0", mkstream=True)
    r.xreadgroup(G, consumer, {S: ">"}, count=1)
    r.xclaim(S, G, consumer, 0, [entry], idle=idle_ms)
    return entry


async def test_entry_unchanged(ctx, redis_client: redis.Redis) -> None:
    entry = redis_client.xadd(S, {"a": "1"}).decode()
    digest = await rr.entry_digest(ctx.connections.redis(), S, entry)
    assert await _ev(ctx, "entry_unchanged", key=S, id=entry, digest=digest) is None
    assert await _ev(ctx, "entry_unchanged", key=S, id=entry, digest="0" * 64) == (
        f"entry {entry} of {S} changed since the plan was made"
    )
    redis_client.xdel(S, entry)
    assert await _ev(ctx, "entry_unchanged", key=S, id=entry, digest=digest) == f"entry {entry} of {S} is gone"


async def test_pending_owner_with_its_idle_time(ctx, redis_client: redis.Redis) -> None:
    entry = _pending(redis_client, "alice", idle_ms=60_000)
    base = {"stream": S, "group": G, "id": entry}
    assert await _ev(ctx, "pending_owner", **base, consumer="alice", min_idle_ms=30_000) is None
    assert await _ev(ctx, "pending_owner", **base, consumer=None, min_idle_ms=30_000) is None  # any owner
    assert await _ev(ctx, "pending_owner", **base, consumer="alice", min_idle_ms=None) is None
    assert await _ev(ctx, "pending_owner", **base, consumer="alice") is None  # no idle condition
    drift = await _ev(ctx, "pending_owner", **base, consumer="alice", min_idle_ms=120_000)
    assert drift.startswith(f"entry {entry} was delivered again 6") and drift.endswith(
        " ms ago (someone is processing it)"
    )
    assert await _ev(ctx, "pending_owner", **base, consumer="bob", min_idle_ms=0) == (
        f"entry {entry} is now pending at consumer alice, not bob"
    )
    redis_client.xclaim(S, G, "alice", 0, [entry], idle=10)  # delivered again just now
    drift = await _ev(ctx, "pending_owner", **base, consumer="alice", min_idle_ms=30_000)
    assert drift is not None and "was delivered again" in drift
    redis_client.xack(S, G, entry)
    assert await _ev(ctx, "pending_owner", **base, consumer="alice", min_idle_ms=0) == (
        f"entry {entry} is no longer pending in group {G} of {S} (acknowledged since?)"
    )


async def test_consumer_live(ctx, redis_client: redis.Redis) -> None:
    _pending(redis_client, "alice")
    base = {"stream": S, "group": G}
    assert await _ev(ctx, "consumer_live", **base, consumer="alice", max_idle_ms=3_600_000) is None
    redis_client.xgroup_createconsumer(S, G, "zed")  # a second consumer, listed after alice
    assert await _ev(ctx, "consumer_live", **base, consumer="zed", max_idle_ms=3_600_000) is None
    [alice] = [c for c in await rr.consumers_of(ctx.connections.redis(), S, G) if c.name == "alice"]
    drift = await _ev(ctx, "consumer_live", **base, consumer="alice", max_idle_ms=-1)
    assert drift.startswith("consumer alice has been idle ") and drift.endswith(" ms: it no longer looks alive")
    assert alice.idle_ms >= 0
    assert await _ev(ctx, "consumer_live", **base, consumer="carol", max_idle_ms=1000) == (
        f"consumer carol no longer exists in group {G}"
    )


async def test_key_unchanged(ctx, redis_client: redis.Redis) -> None:
    redis_client.set("k:1", "one")
    snap = await rr.key_snapshot(ctx.connections.redis(), "k:1")
    assert await _ev(ctx, "key_unchanged", key="k:1", digest=snap.digest) is None
    redis_client.set("k:1", "two")
    assert await _ev(ctx, "key_unchanged", key="k:1", digest=snap.digest) == "key k:1 changed since the plan was made"
    redis_client.delete("k:1")
    assert await _ev(ctx, "key_unchanged", key="k:1", digest=snap.digest) == "key k:1 is gone"
    assert await _ev(ctx, "key_unchanged", key="k:1", digest=snap.digest, allow_missing=False) == "key k:1 is gone"
    assert await _ev(ctx, "key_unchanged", key="k:1", digest=snap.digest, allow_missing=True) is None


async def test_zset_member(ctx, redis_client: redis.Redis) -> None:
    redis_client.zadd("z", {"m": 1})
    assert await _ev(ctx, "zset_member", key="z", member="m") is None
    assert await _ev(ctx, "zset_member", key="z", member="gone") == "gone is no longer in z"
    assert await _ev(ctx, "zset_member", key="z", member="gone", allow_missing=False) == "gone is no longer in z"
    assert await _ev(ctx, "zset_member", key="z", member="gone", allow_missing=True) is None


async def test_row_matches(ctx, outbox_db: str) -> None:
    row_id = str(uuid.uuid4())
    with psycopg.connect(outbox_db, autocommit=True) as conn:
        conn.execute("INSERT INTO event_queue (id, status, type, emitter) VALUES (%s, 'FAILED', 't', 'e')", (row_id,))
        updated: datetime = conn.execute("SELECT updated_at FROM event_queue WHERE id = %s", (row_id,)).fetchone()[0]
    base = {"service": "event", "table": "event_queue", "id": row_id}
    assert await _ev(ctx, "row_matches", **base, status="FAILED", updated_at=updated.isoformat()) is None
    assert await _ev(ctx, "row_matches", **base, status="FAILED", updated_at=None) is None
    assert await _ev(ctx, "row_matches", **base, status="PENDING", updated_at=None) == (
        f"row {row_id} of event_queue is now FAILED, not PENDING"
    )
    assert await _ev(ctx, "row_matches", **base, status="FAILED", updated_at="2000-01-01T00:00:00") == (
        f"row {row_id} of event_queue was updated since the plan was made"
    )
    assert await _ev(ctx, "row_matches", **{**base, "table": "pg_authid"}, status="FAILED") == (
        "table 'pg_authid' is not one of [conventions.tables]"
    )
    other = str(uuid.uuid4())
    assert await _ev(ctx, "row_matches", **{**base, "id": other}, status="FAILED") == (
        f"row {other} of event_queue (service event) is gone"
    )
    with psycopg.connect(outbox_db, autocommit=True) as conn:
        conn.execute("ALTER TABLE event_queue ALTER COLUMN updated_at DROP NOT NULL")
        conn.execute("UPDATE event_queue SET updated_at = NULL WHERE id = %s", (row_id,))
    assert await _ev(ctx, "row_matches", **base, status="FAILED", updated_at=None) is None
    assert await _ev(ctx, "row_matches", **base, status="FAILED", updated_at=updated.isoformat()) == (
        f"row {row_id} of event_queue was updated since the plan was made"
    )


async def test_bull_job_failed_and_queue_paused(ctx, redis_client: redis.Redis) -> None:
    prefix, queue = "bull", "mail"
    redis_client.hset(f"{prefix}:{queue}:7", mapping={"name": "send", "data": "{}"})
    redis_client.zadd(f"{prefix}:{queue}:failed", {"7": 1})
    fields = redis_client.hgetall(f"{prefix}:{queue}:7")
    base = {"prefix": prefix, "queue": queue, "job_id": "7"}
    assert await _ev(ctx, "bull_job_failed", **base, digest=rr.hash_digest(fields)) is None
    assert await _ev(ctx, "bull_job_failed", **base, digest="0" * 64) == (
        "job 7 of queue mail changed since the plan was made"
    )
    redis_client.delete(f"{prefix}:{queue}:7")
    assert await _ev(ctx, "bull_job_failed", **base, digest=rr.hash_digest(fields)) == (
        "job 7 of queue mail changed since the plan was made"
    )
    redis_client.zrem(f"{prefix}:{queue}:failed", "7")
    assert await _ev(ctx, "bull_job_failed", **base, digest=rr.hash_digest(fields)) == (
        "job 7 of queue mail is no longer failed (retried or removed since?)"
    )

    assert await _ev(ctx, "queue_paused", prefix=prefix, queue=queue, paused=False) is None
    assert await _ev(ctx, "queue_paused", prefix=prefix, queue=queue, paused=True) == (
        "queue mail was resumed since the plan was made"
    )
    redis_client.hset(f"{prefix}:{queue}:meta", "paused", "1")
    assert await _ev(ctx, "queue_paused", prefix=prefix, queue=queue, paused=True) is None
    assert await _ev(ctx, "queue_paused", prefix=prefix, queue=queue, paused=False) == (
        "queue mail was paused since the plan was made"
    )


async def test_step_ok_is_dynamic_only(ctx) -> None:
    check = Check(kind="step_ok", args={"step": 2, "output_key": "confirmed"})
    assert await evaluate(check, ctx, dynamic=False) is None  # the pre-flight skips it
    assert await evaluate(check, ctx, dynamic=True) == "step 2 did not complete"
    ctx.results[2] = StepResult(number=2, action="replay", status="failed", detail="x")
    assert await evaluate(check, ctx, dynamic=True) == "step 2 did not complete"
    ctx.results[2] = StepResult(number=2, action="replay", status="done", detail="x", output={"confirmed": False})
    assert await evaluate(check, ctx, dynamic=True) == "step 2 did not confirm (confirmed is false)"
    ctx.results[2] = StepResult(number=2, action="replay", status="done", detail="x", output={"confirmed": True})
    assert await evaluate(check, ctx, dynamic=True) is None
    plain = Check(kind="step_ok", args={"step": "2", "output_key": None})
    ctx.results[2] = StepResult(number=2, action="replay", status="done", detail="x", output={})
    assert await evaluate(plain, ctx, dynamic=True) is None


async def test_first_drift_is_the_first_failing_check_in_order(ctx, redis_client: redis.Redis) -> None:
    redis_client.zadd("z", {"m": 1})
    holds = Check(kind="zset_member", args={"key": "z", "member": "m"})
    first = Check(kind="zset_member", args={"key": "z", "member": "a"})
    second = Check(kind="zset_member", args={"key": "z", "member": "b"})
    assert await first_drift([], ctx, dynamic=True) is None
    assert await first_drift([holds, holds], ctx, dynamic=True) is None
    assert await first_drift([holds, first, second], ctx, dynamic=True) == "a is no longer in z"
    assert await first_drift([second, first], ctx, dynamic=False) == "b is no longer in z"


async def test_first_drift_passes_the_run_time_flag_on(ctx) -> None:
    """During the run (``dynamic=True``) an earlier step that did not complete stops the next one."""
    check = Check(kind="step_ok", args={"step": 1, "output_key": None})
    assert await first_drift([check], ctx, dynamic=True) == "step 1 did not complete"
    assert await first_drift([check], ctx, dynamic=False) is None


async def test_bull_job_stalled(ctx, redis_client: redis.Redis) -> None:
    base = {"prefix": "bull", "queue": "mail", "job_id": "9", "lock_suffix": "lock"}
    redis_client.rpush("bull:mail:active", "8", "9")
    assert await _ev(ctx, "bull_job_stalled", **base) is None
    redis_client.set("bull:mail:9:lock", "worker-2", px=30_000)
    assert await _ev(ctx, "bull_job_stalled", **base) == "job 9 of queue mail has a lock again: a worker holds it"
    redis_client.lrem("bull:mail:active", 0, "9")
    assert await _ev(ctx, "bull_job_stalled", **base) == (
        "job 9 of queue mail is no longer active (a worker's stalled checker moved it, or it ended)")
