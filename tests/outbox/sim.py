"""A tiny re-enactment of the diagnosed system, so tests build real states the way it does.

Each function does what one component of the TypeScript system does, with the same
tables, keys and commands (target-system.md): the service writes outbox rows, the outbox
runner claims and pushes them (BullMQ job hash + ``wait`` list, or XADD per target
stream), the worker audits and runs the job, post-processors read streams through their
consumer group, retry, dead-letter and hold idempotency locks. Nothing here is mocked:
rows go to a real PostgreSQL and keys to a real Redis.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import psycopg
import redis

from server.config import Conventions

CONV = Conventions()


def insert_job(
    conn: psycopg.Connection,
    *,
    type: str = "users.send_welcome_email",
    target: str = "user-queue",
    emitter: str = "ms-user",
    status: str = "PENDING",
    age_s: float = 0,
    updated_age_s: float | None = None,
    payload: dict[str, Any] | None = None,
    scheduled_in_s: float = 0,
    last_error: str | None = None,
) -> str:
    """The service writes a jobs_outbox row (in its own transaction)."""
    job_id = str(uuid.uuid4())
    updated = age_s if updated_age_s is None else updated_age_s
    conn.execute(
        """INSERT INTO jobs_outbox (id, status, type, emitter, target, payload, "lastError", scheduled_at,
                                    created_at, updated_at)
           VALUES (%s, %s, %s, %s, %s, %s, %s, now() + make_interval(secs => %s),
                   now() - make_interval(secs => %s), now() - make_interval(secs => %s))""",
        (job_id, status, type, emitter, target, json.dumps(payload or {"userId": 1}), last_error,
         scheduled_in_s, age_s, updated),
    )
    return job_id


def insert_event(
    conn: psycopg.Connection,
    *,
    type: str = "user:created",
    emitter: str = "ms-user",
    targets: list[str] | None = None,
    status: str = "PENDING",
    age_s: float = 0,
    updated_age_s: float | None = None,
    payload: dict[str, Any] | None = None,
) -> str:
    event_id = str(uuid.uuid4())
    updated = age_s if updated_age_s is None else updated_age_s
    conn.execute(
        """INSERT INTO event_queue (id, status, type, emitter, payload, target_services, created_at, updated_at)
           VALUES (%s, %s, %s, %s, %s, %s, now() - make_interval(secs => %s), now() - make_interval(secs => %s))""",
        (event_id, status, type, emitter, json.dumps(payload or {"before": None, "after": {"id": 1}}),
         targets if targets is not None else ["user:created"], age_s, updated),
    )
    return event_id


def runner_push_job(conn: psycopg.Connection, r: redis.Redis, job_id: str, *, pushed_age_s: float = 0) -> None:
    """The outbox runner pushes a job to BullMQ (job id = row id) and marks the row COMPLETED."""
    row = conn.execute("SELECT type, target, payload FROM jobs_outbox WHERE id = %s", (job_id,)).fetchone()
    assert row is not None
    name, queue, payload = row
    key = f"{CONV.bullmq_prefix}:{queue}:{job_id}"
    r.hset(key, mapping={
        "name": name,
        "data": json.dumps({"payload": payload, "traceparent": ""}),
        "opts": json.dumps({"attempts": CONV.job_attempts, "backoff": {"type": "exponential", "delay": 1000},
                            "removeOnComplete": True}),
        "timestamp": int(time.time() * 1000),
        "attemptsMade": 0,
    })
    r.lpush(f"{CONV.bullmq_prefix}:{queue}:wait", job_id)
    conn.execute(
        "UPDATE jobs_outbox SET status = 'COMPLETED', updated_at = now() - make_interval(secs => %s) WHERE id = %s",
        (pushed_age_s, job_id),
    )


def worker_take(
    conn: psycopg.Connection, r: redis.Redis, job_id: str, queue: str, *, age_s: float = 0, lock: bool = True
) -> None:
    """A worker moves the job to ``active``, holds its lock (as BullMQ does, renewed while it runs;
    ``lock=False``: the worker died and the lock expired) and upserts job_audit PROCESSING."""
    r.lrem(f"{CONV.bullmq_prefix}:{queue}:wait", 1, job_id)
    r.lpush(f"{CONV.bullmq_prefix}:{queue}:active", job_id)
    r.hset(f"{CONV.bullmq_prefix}:{queue}:{job_id}", "processedOn", int((time.time() - age_s) * 1000))
    if lock:
        r.set(f"{CONV.bullmq_prefix}:{queue}:{job_id}:{CONV.bullmq_lock_suffix}", "worker-token", px=30_000)
    row = conn.execute("SELECT type, emitter FROM jobs_outbox WHERE id = %s", (job_id,)).fetchone()
    job_type, emitter = row if row else ("users.send_welcome_email", "ms-user")
    conn.execute(
        """INSERT INTO job_audit (job_id, job_type, status, worker_id, emitter, current_attempt, started_at,
                                  created_at, updated_at)
           VALUES (%s, %s, 'PROCESSING', 'worker-user-1', %s, 1, now(), now() - make_interval(secs => %s),
                   now() - make_interval(secs => %s))
           ON CONFLICT (job_id) DO UPDATE SET status = 'PROCESSING', updated_at = EXCLUDED.updated_at""",
        (job_id, job_type, emitter, age_s, age_s),
    )


def worker_complete(conn: psycopg.Connection, r: redis.Redis, job_id: str, queue: str) -> None:
    """The handler succeeded: job_audit COMPLETED (the trigger writes the success event), guard key set,
    and BullMQ removes the job (removeOnComplete)."""
    conn.execute("UPDATE job_audit SET status = 'COMPLETED', finished_at = now(), updated_at = now() "
                 "WHERE job_id = %s", (job_id,))
    r.set(CONV.job_completed_key.replace("{job_id}", job_id), "true", ex=86400)
    r.lrem(f"{CONV.bullmq_prefix}:{queue}:active", 1, job_id)
    key = f"{CONV.bullmq_prefix}:{queue}:{job_id}"
    r.delete(key, f"{key}:{CONV.bullmq_lock_suffix}")


def worker_fail(conn: psycopg.Connection, r: redis.Redis, job_id: str, queue: str, error: str) -> None:
    """The handler threw on its last attempt: job_audit FAILED, BullMQ job in ``failed``."""
    conn.execute("UPDATE job_audit SET status = 'FAILED', error_message = %s, error_stack = %s, "
                 "finished_at = now(), updated_at = now() WHERE job_id = %s",
                 (error, f"Error: {error}\n  at x", job_id))
    key = f"{CONV.bullmq_prefix}:{queue}:{job_id}"
    r.lrem(f"{CONV.bullmq_prefix}:{queue}:active", 1, job_id)
    r.delete(f"{key}:{CONV.bullmq_lock_suffix}")
    r.hset(key, mapping={"failedReason": error, "attemptsMade": CONV.job_attempts,
                         "stacktrace": json.dumps([f"Error: {error}\n  at handle"]),
                         "finishedOn": int(time.time() * 1000)})
    r.zadd(f"{CONV.bullmq_prefix}:{queue}:failed", {job_id: int(time.time() * 1000)})


def outcome_payload(job_id: str, status: str = "COMPLETED", *, job_type: str = "users.send_welcome_email",
                    emitter: str = "ms-user", error: str | None = None) -> dict[str, Any]:
    """The payload the audit trigger writes (every version): ``{before: <old job_audit row>, after: <new row>}``
    as ``to_jsonb`` renders them; the job id is at ``after.job_id`` (there is no top-level jobId)."""
    before = {"id": str(uuid.uuid4()), "job_id": job_id, "job_type": job_type, "status": "PROCESSING",
              "worker_id": "worker-user-1", "emitter": emitter, "current_attempt": 1,
              "started_at": "2026-01-01T00:00:00", "finished_at": None, "result_payload": None,
              "error_message": None, "error_stack": None, "created_at": "2026-01-01T00:00:00", "updated_at": None}
    after = {**before, "status": status, "finished_at": "2026-01-01T00:00:01",
             "result_payload": {"originalPayload": {"userId": 1}} if status == "COMPLETED" else None,
             "error_message": error, "error_stack": f"Error: {error}" if error else None}
    return {"before": before, "after": after}


def outcome_event_of(conn: psycopg.Connection, job_id: str) -> tuple[str, str]:
    row = conn.execute("SELECT id, type FROM event_queue WHERE payload->'after'->>'job_id' = %s "
                       "ORDER BY created_at DESC", (job_id,)).fetchone()
    assert row is not None, "the audit trigger wrote no outcome event"
    return str(row[0]), row[1]


def runner_push_event(conn: psycopg.Connection, r: redis.Redis, event_id: str, *, maxlen: int | None = None) -> list[
        tuple[str, str]]:
    """The outbox runner XADDs the event to ``stream:<target>`` for each target and marks it COMPLETED.

    Returns ``[(stream, entry id), ...]``.
    """
    row = conn.execute(
        "SELECT id, type, emitter, payload, version, target_services FROM event_queue WHERE id = %s", (event_id,)
    ).fetchone()
    assert row is not None
    eid, type_, emitter, payload, version, targets = row
    out = []
    for target in targets:
        stream = f"{CONV.stream_prefix}{target}"
        fields = {
            "id": str(eid), "type": type_, "emitter": emitter, "emitterId": "", "correlationId": "",
            "traceparent": "", "version": str(version), "createdAt": str(int(time.time() * 1000)),
            "payload": json.dumps(payload), "event": json.dumps({"id": str(eid), "type": type_, "payload": payload}),
        }
        entry = r.xadd(stream, fields, maxlen=maxlen or CONV.stream_maxlen, approximate=maxlen is None)
        out.append((stream, entry.decode()))
    conn.execute("UPDATE event_queue SET status = 'COMPLETED', processed_at = now(), updated_at = now() "
                 "WHERE id = %s", (event_id,))
    return out


def ensure_group(r: redis.Redis, stream: str, group: str) -> None:
    """A post-processor creates its group at start-up (from the beginning of the stream)."""
    try:
        r.xgroup_create(stream, group, id="0", mkstream=True)
    except redis.ResponseError as exc:
        if "BUSYGROUP" not in str(exc):
            raise


def consumer_read(r: redis.Redis, stream: str, group: str, consumer: str, count: int = 100) -> list[str]:
    """XREADGROUP new entries as ``consumer`` (they enter the group's PEL)."""
    answer = r.xreadgroup(group, consumer, {stream: ">"}, count=count)
    return [entry_id.decode() for _, entries in answer for entry_id, _ in entries]


def consumer_ack(r: redis.Redis, stream: str, group: str, entry_id: str, *, lock: bool = True) -> None:
    """Processed: the idempotency lock stays (SET NX EX) and the entry is acknowledged."""
    if lock:
        r.set(CONV.idempotency_key.format(group=group, message_id=entry_id), "1", nx=True, ex=CONV.idempotency_ttl_s)
    r.xack(stream, group, entry_id)


def consumer_dead_letter(r: redis.Redis, stream: str, group: str, entry_id: str, error: str) -> None:
    """maxRetries business failures: retry bookkeeping, XADD to <stream>-dlq, then XACK in the source group."""
    base = CONV.retry_key.format(group=group, message_id=entry_id)
    r.set(base + CONV.retry_attempt_suffix, CONV.max_retries)
    r.set(base + CONV.retry_last_error_suffix, error)
    r.xadd(stream + CONV.dlq_suffix, {"messageId": entry_id, "error": error, "payload": json.dumps({"id": entry_id}),
                                      "timestamp": str(int(time.time() * 1000))})
    r.xack(stream, group, entry_id)


def consumer_lock_during_outage(r: redis.Redis, group: str, entry_id: str) -> None:
    """The lock was taken, then processing failed on an infrastructure error and the lock was not released."""
    r.set(CONV.idempotency_key.format(group=group, message_id=entry_id), "1", nx=True, ex=CONV.idempotency_ttl_s)


def age_pending_entry(r: redis.Redis, stream: str, group: str, consumer: str, entry_id: str, idle_ms: int) -> None:
    """Make an entry look idle for ``idle_ms`` (XCLAIM to the same consumer with IDLE, as a reclaim would)."""
    r.xclaim(stream, group, consumer, 0, [entry_id], idle=idle_ms)


def success_post_processor_delete(conn: psycopg.Connection, job_id: str) -> None:
    """The common JobOutboxSuccessPostProcessor deletes the jobs_outbox row."""
    conn.execute("DELETE FROM jobs_outbox WHERE id = %s", (job_id,))
