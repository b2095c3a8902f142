"""A request fanned out over three service databases and Redis, written the way the services write it.

ms-event: the user creates an event (code-written ``event:created``, correlation C, trace T, span S1).
ms-notification: a post-processor of ``event:created`` creates a job (trace T, child span S2); the worker
runs it; the audit trigger writes the outcome (NULL context by design); a follow-up event
``notification:sent`` (correlation C, trace T, child span S3) is pushed to a stream read by ws-service.
ms-social (optional): an older schema without traceparent / correlation_id.
"""

from __future__ import annotations

import json
import secrets
import uuid
from dataclasses import dataclass, field

import psycopg
import redis

from tests.outbox import sim


def span() -> str:
    return secrets.token_hex(8)


def traceparent(trace: str, span_id: str) -> str:
    return f"00-{trace}-{span_id}-01"


def insert_event(conn: psycopg.Connection, *, type: str, emitter: str, targets: list[str], correlation: str | None,
                 tp: str | None, age_s: float, payload: dict | None = None) -> str:
    event_id = str(uuid.uuid4())
    conn.execute(
        """INSERT INTO event_queue (id, status, type, emitter, payload, target_services, correlation_id, traceparent,
                                    created_at, updated_at)
           VALUES (%s, 'PENDING', %s, %s, %s, %s, %s, %s, now() - make_interval(secs => %s),
                   now() - make_interval(secs => %s))""",
        (event_id, type, emitter, json.dumps(payload or {"before": None, "after": {"id": 1}}), targets, correlation,
         tp, age_s, age_s))
    return event_id


def insert_job(conn: psycopg.Connection, *, type: str, target: str, emitter: str, tp: str | None,
               age_s: float) -> str:
    job_id = sim.insert_job(conn, type=type, target=target, emitter=emitter, age_s=age_s)
    conn.execute("UPDATE jobs_outbox SET traceparent = %s WHERE id = %s", (tp, job_id))
    return job_id


def push_and_ack(conn: psycopg.Connection, r: redis.Redis, event_id: str, group: str) -> None:
    for stream, entry in sim.runner_push_event(conn, r, event_id):
        sim.ensure_group(r, stream, group)
        sim.consumer_read(r, stream, group, f"{group}-1")
        sim.consumer_ack(r, stream, group, entry)


@dataclass
class Saga:
    correlation: str
    trace: str
    spans: dict[str, str] = field(default_factory=dict)
    ids: dict[str, str] = field(default_factory=dict)


def build(event_db: psycopg.Connection, notif_db: psycopg.Connection, r: redis.Redis, *,
          stuck_ws: bool = True, job_fails: bool = False) -> Saga:
    """The saga; ``stuck_ws`` leaves the follow-up pending (idle 10 min) in ws-service's PEL;
    ``job_fails`` makes the job's handler fail."""
    saga = Saga(correlation=str(uuid.uuid4()), trace=secrets.token_hex(16))
    s1, s2, s3 = span(), span(), span()
    saga.spans = {"event": s1, "job": s2, "follow_up": s3}
    created = insert_event(event_db, type="event:created", emitter="ms-event", targets=["event:created"],
                           correlation=saga.correlation, tp=traceparent(saga.trace, s1), age_s=600,
                           payload={"before": None, "after": {"id": "evt-42", "ownerId": "user-7"}})
    push_and_ack(event_db, r, created, "pp-notification")
    tp = traceparent(saga.trace, s2)
    job = insert_job(notif_db, type="notifications.send_push", target="notification-queue",
                     emitter="ms-notification", tp=tp, age_s=590)
    sim.runner_push_job(notif_db, r, job, pushed_age_s=589)
    sim.worker_take(notif_db, r, job, "notification-queue", age_s=588)
    if job_fails:
        sim.worker_fail(notif_db, r, job, "notification-queue", "FCM token expired")
    else:
        sim.worker_complete(notif_db, r, job, "notification-queue")
    outcome, _ = sim.outcome_event_of(notif_db, job)  # written by the audit trigger just now: still PENDING
    follow = insert_event(notif_db, type="notification:sent", emitter="ms-notification", targets=["ws:notify"],
                          correlation=saga.correlation, tp=traceparent(saga.trace, s3), age_s=580)
    entries = sim.runner_push_event(notif_db, r, follow)
    (stream, entry), = entries
    sim.ensure_group(r, stream, "ws-service")
    sim.consumer_read(r, stream, "ws-service", "ws-1")
    if stuck_ws:
        sim.age_pending_entry(r, stream, "ws-service", "ws-1", entry, 600_000)
    else:
        sim.consumer_ack(r, stream, "ws-service", entry)
    saga.ids = {"created": created, "job": job, "outcome": outcome, "follow_up": follow}
    return saga
