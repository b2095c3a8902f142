"""The broken scenario of ``mesh-mcp demo``: seeded into one service database and Redis.

The scenario is what the target system would look like some twenty minutes into an
incident on the event domain (service ``event``, emitter ``ms-event``), with rows,
stream entries and keys shaped exactly as its code writes them (names from
``settings.conventions``):

- a job stuck ``PENDING`` (the outbox runner stopped polling);
- a job stuck ``PROCESSING`` (the runner died between claim and push);
- a job whose handler failed (``job_audit`` ``FAILED``, BullMQ job in ``failed``);
- a poison pill in the dead-letter stream, with its retry bookkeeping;
- a dead consumer holding pending entries;
- a pending entry whose message was trimmed from the stream;
- a stale idempotency lock on a message that is still pending;

plus healthy traffic around them. Times are set in the past through the database's
``now()`` and through stream ids; the dead consumer's last-seen time is aged by
rewriting it in a ``DUMP`` of the stream and ``RESTORE``-ing it (Redis offers no command
for it). :func:`seed` returns a :class:`Scenario` listing every fault with the ids the
diagnosis should find; it is the answer key the demo report checks mesh-mcp against.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from importlib import resources as importlib_resources
from typing import Any

import psycopg
import redis
from psycopg import sql
from psycopg.types.json import Jsonb

from server.config import Conventions
from server.demo.dump import age_consumer_in_dump
from server.demo.outcome_rows import OutcomeRow, outcome_columns, outcome_fields
from server.errors import MeshError
from tools.outbox.outcome_paths import id_paths, path_sql

SERVICE = "event"
EMITTER = "ms-event"
QUEUE = "event-queue"
FALLBACK_QUEUE = "fallback-event-queue"
STREAM_TARGET = "event:created"
PP_GROUP = "post-processor-event"
WS_GROUP = "ws-service"
COMMON_GROUP = "post-processor-common"
LIVE_CONSUMER = "post-processor-event-a1f3"
DEAD_CONSUMER = "post-processor-event-d7c2"
WS_CONSUMER = "ws-service-5b1e"
COMMON_CONSUMER = "post-processor-common-9e0a"
WORKER_ID = "worker-event-5c8d"
GEOCODE_JOB = "events.geocode_event"
FALLBACK_JOB = "events.fallback_create_event"
EVENT_CREATED = "event.created"
MINUTE = 60


@dataclass(frozen=True)
class Fault:
    """One seeded fault and the identifiers a diagnosis must name."""

    code: str
    title: str
    story: str
    refs: dict[str, str]


@dataclass
class Scenario:
    service: str
    emitter: str
    queue: str
    stream: str
    dlq_stream: str
    group: str
    faults: list[Fault] = field(default_factory=list)
    redis_keys: list[str] = field(default_factory=list)
    consumer_aged: bool = False
    """True when the dead consumer's last-seen time could be moved into the past."""

    def fault(self, code: str) -> Fault:
        return next(f for f in self.faults if f.code == code)


# -- PostgreSQL -----------------------------------------------------------------------


class Ago:
    """A timestamp ``seconds`` before the database's ``now()``."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds


def schema_sql() -> str:
    """The outbox schema shipped with the package (tables, indexes, audit trigger)."""
    return (importlib_resources.files("tools.outbox") / "schema.sql").read_text(encoding="utf-8")


def create_schema(conn: psycopg.Connection[Any]) -> None:
    """Run the outbox schema (PostgreSQL 13 or later: ``gen_random_uuid()`` is built in)."""
    conn.execute(schema_sql())


def _insert(conn: psycopg.Connection[Any], conv: Conventions, table: str, row: dict[str, Any]) -> None:
    """INSERT one row; keys are attribute names of ``conventions.columns``, values bound."""
    columns, values, params = [], [], []
    for key, value in row.items():
        columns.append(sql.Identifier(getattr(conv.columns, key)))
        if isinstance(value, Ago):
            values.append(sql.SQL("(now() - make_interval(secs => %s))::timestamp"))
            params.append(value.seconds)
        else:
            values.append(sql.Placeholder())
            params.append(Jsonb(value) if isinstance(value, dict) else value)
    query = sql.SQL("INSERT INTO {} ({}) VALUES ({})").format(
        sql.Identifier(table), sql.SQL(", ").join(columns), sql.SQL(", ").join(values)
    )
    conn.execute(query, params)


def _job(job_id: str, status: str, job_type: str, target: str, age: float, updated: float, payload: dict,
         attempts: int = 1) -> dict:
    """A jobs_outbox row written ``age`` seconds ago and last updated ``updated`` seconds ago."""
    return {
        "id": job_id, "status": status, "attempts": attempts, "type": job_type,
        "emitter": EMITTER, "emitter_id": str(uuid.uuid4()), "target": target, "payload": payload,
        "scheduled_at": Ago(age), "created_at": Ago(age), "updated_at": Ago(updated),
    }


def _event_row(event_id: str, status: str, event_type: str, targets: list[str], age: float, payload: dict) -> dict:
    return {
        "id": event_id, "status": status, "attempts": 1, "type": event_type, "emitter": EMITTER,
        "emitter_id": str(uuid.uuid4()), "payload": payload, "version": 1, "target_services": targets,
        "correlation_id": str(uuid.uuid4()), "processed_at": Ago(age - 1), "created_at": Ago(age),
        "updated_at": Ago(age - 1),
    }


def seed_postgres(dsn: str, conv: Conventions, ids: dict[str, str], events: list[dict[str, Any]]
                  ) -> dict[str, list[OutcomeRow]]:
    """Create the outbox schema in the (empty) service database and write the rows; returns the job-outcome
    rows the audit trigger wrote, per job key."""
    t, st = conv.tables, conv.statuses
    outcomes: dict[str, list[OutcomeRow]] = {}
    with psycopg.connect(dsn, autocommit=True) as conn:
        create_schema(conn)
        address = "12 rue des Lilas, Lyon"
        _insert(conn, conv, t.jobs_outbox, _job(
            ids["job_pending"], st.pending, GEOCODE_JOB, QUEUE, 20 * MINUTE, 20 * MINUTE,
            {"eventId": str(uuid.uuid4()), "address": address}, attempts=0))  # never claimed
        _insert(conn, conv, t.jobs_outbox, _job(
            ids["job_processing"], st.processing, FALLBACK_JOB, FALLBACK_QUEUE, 16 * MINUTE, 15 * MINUTE,
            {"userId": str(uuid.uuid4()), "payload": {"title": "Repair café", "startsAt": "2026-12-05T18:00:00Z",
                                                       "address": address}}))
        _insert(conn, conv, t.jobs_outbox, _job(
            ids["job_failed"], st.completed, GEOCODE_JOB, QUEUE, 12 * MINUTE, 12 * MINUTE,
            {"eventId": ids["failed_event_ref"], "address": "nowhere"}))
        # the worker upserts job_audit PROCESSING (started_at, never updated_at), then sets FAILED or
        # COMPLETED: that status update fires the audit trigger, which writes the job outcome into event_queue
        _insert(conn, conv, t.job_audit, {
            "job_id": ids["job_failed"], "job_type": GEOCODE_JOB, "status": st.processing, "worker_id": WORKER_ID,
            "emitter": EMITTER, "current_attempt": conv.job_attempts, "started_at": Ago(12 * MINUTE - 5),
            "created_at": Ago(12 * MINUTE - 5)})
        _insert(conn, conv, t.job_audit, {
            "job_id": ids["job_done"], "job_type": GEOCODE_JOB, "status": st.processing, "worker_id": WORKER_ID,
            "emitter": EMITTER, "current_attempt": 1, "started_at": Ago(30 * MINUTE), "created_at": Ago(30 * MINUTE)})
        c = conv.columns
        stack = (f"InternalServerError: {ids['failed_reason']}\n    at GeocodeEventHandler.handle "
                 "(workers-runners/worker-event/src/workers/handlers/geocode-event.handler.ts:19:13)")
        failed = [(st.failed, (c.error_message, c.error_stack, c.current_attempt), [ids["failed_reason"], stack, n])
                  for n in range(1, conv.job_attempts + 1)]  # once per BullMQ attempt
        for job_key, steps in (("job_failed", failed), ("job_done", [
                (st.completed, (c.result_payload,), [Jsonb({"originalPayload": {"address": address}})])])):
            age = 11 * MINUTE if job_key == "job_failed" else 30 * MINUTE - 2
            for n, (status, sets, values) in enumerate(steps):
                if n:  # the next attempt: the worker's upsert sets PROCESSING again
                    conn.execute(sql.SQL("UPDATE {t} SET {status} = %s WHERE {job_id} = %s").format(
                        t=sql.Identifier(t.job_audit), status=sql.Identifier(c.status),
                        job_id=sql.Identifier(c.job_id)), [st.processing, ids[job_key]])
                conn.execute(sql.SQL("UPDATE {t} SET {status} = %s, {finished} = (now() - make_interval(secs => %s))"
                                     "::timestamp, {sets} WHERE {job_id} = %s").format(
                    t=sql.Identifier(t.job_audit), status=sql.Identifier(c.status),
                    finished=sql.Identifier(c.finished_at), job_id=sql.Identifier(c.job_id),
                    sets=sql.SQL(", ").join(sql.SQL("{} = %s").format(sql.Identifier(col)) for col in sets)),
                    [status, age, *values, ids[job_key]])
        # the runner pushed the outcomes long ago: mark the trigger's rows as published then
        path = id_paths(conv.job_outcome_id_keys)[0] if conv.job_outcome_id_keys else ("after", "job_id")
        for job_key, age in (("job_failed", 11 * MINUTE), ("job_done", 30 * MINUTE - 2)):
            cur = conn.execute(
                sql.SQL("UPDATE {t} SET {status} = %s, {processed} = {at}, {created} = {at}, {updated} = {at} "
                        "WHERE {job} = %s RETURNING {returned}").format(
                    t=sql.Identifier(t.event_queue), status=sql.Identifier(c.status),
                    processed=sql.Identifier(c.processed_at), created=sql.Identifier(c.created_at),
                    updated=sql.Identifier(c.updated_at), returned=outcome_columns(conv),
                    job=path_sql(c.payload, path), at=sql.SQL("(now() - make_interval(secs => %s))::timestamp")),
                (st.completed, age, age, age, ids[job_key]),
            )
            outcomes[job_key] = [OutcomeRow(*r) for r in cur.fetchall()]
            if not outcomes[job_key]:
                raise MeshError(f"the demo's audit trigger wrote no job-outcome row for {job_key} (no event_queue "
                                f"row with the job id at {'.'.join(path)}): check tools/outbox/schema.sql")
            ids[f"{job_key}_outcome"] = outcomes[job_key][-1].id
        for event in events:
            _insert(conn, conv, t.event_queue, _event_row(
                event["id"], st.completed, EVENT_CREATED, [STREAM_TARGET], event["age"], event["payload"]))
    return outcomes


# -- Redis ----------------------------------------------------------------------------

def _stream_fields(event: dict[str, Any], conv: Conventions) -> dict[str, str]:
    message = {
        conv.event_id_field: event["id"], conv.event_type_field: EVENT_CREATED, "emitter": EMITTER,
        "emitterId": event["emitter_id"], "correlationId": event["correlation_id"], "traceparent": "",
        "version": "1", "createdAt": event["created_at"], "payload": json.dumps(event["payload"]),
    }
    message["event"] = json.dumps({**message, "payload": event["payload"]})
    return message


DEMO_STREAM_MAXLEN = 6
"""The demo runner's MAXLEN: one entry under the seven it writes, so the oldest is trimmed."""


def seed_redis(client: redis.Redis, conv: Conventions, scn: Scenario, ids: dict[str, str],
               events: list[dict[str, Any]], outcomes: dict[str, list[OutcomeRow]]) -> None:
    """Write the stream, its groups, the dead letter, retry keys, lock and BullMQ job."""
    now_ms = int(client.time()[0]) * 1000
    stream, dlq = scn.stream, scn.dlq_stream
    keys = scn.redis_keys
    # entries, oldest first, with ids in the past
    entry_ids = []
    for event in events:
        entry_id = f"{now_ms - int(event['age'] * 1000)}-0"
        event["created_at"] = str(now_ms - int(event["age"] * 1000))
        client.xadd(stream, _stream_fields(event, conv), id=entry_id, maxlen=conv.stream_maxlen, approximate=True)
        entry_ids.append(entry_id)
    keys.append(stream)
    trimmed, healthy_old, poison, dead_a, dead_b, locked, healthy_new = entry_ids
    for group in (PP_GROUP, WS_GROUP):
        client.xgroup_create(stream, group, id="0")
    # ws-service reads and acknowledges everything
    client.xreadgroup(WS_GROUP, WS_CONSUMER, {stream: ">"}, count=100)
    client.xack(stream, WS_GROUP, *entry_ids)
    # post-processor-event: deliveries in stream order, to the live then the dead consumer
    client.xreadgroup(PP_GROUP, LIVE_CONSUMER, {stream: ">"}, count=3)  # trimmed, healthy_old, poison
    client.xreadgroup(PP_GROUP, DEAD_CONSUMER, {stream: ">"}, count=2)  # dead_a, dead_b
    client.xreadgroup(PP_GROUP, LIVE_CONSUMER, {stream: ">"}, count=2)  # locked, healthy_new
    client.xack(stream, PP_GROUP, healthy_old, poison, healthy_new)
    # pending entries were delivered long ago: set their idle times
    client.xclaim(stream, PP_GROUP, LIVE_CONSUMER, 0, [trimmed], idle=40 * MINUTE * 1000, justid=True)
    client.xclaim(stream, PP_GROUP, DEAD_CONSUMER, 0, [dead_a, dead_b], idle=20 * MINUTE * 1000, justid=True)
    client.xclaim(stream, PP_GROUP, LIVE_CONSUMER, 0, [locked], idle=10 * MINUTE * 1000, justid=True)
    # the oldest entry was trimmed away by the runner's MAXLEN while still pending: exactly (not ~), to the
    # demo's configured MAXLEN, so XINFO STREAM proves the trimming on Redis 6.2 and 7 alike
    assert conv.stream_maxlen == DEMO_STREAM_MAXLEN, "the demo settings set [conventions] stream_maxlen"
    client.xtrim(stream, maxlen=conv.stream_maxlen, approximate=False)
    # the poison pill: 5 business failures, then the dead-letter stream, acknowledged above
    poison_event = events[2]
    error = ("TypeError: Cannot read properties of null (reading 'organizerId')\n"
             "    at EventCreatedPostProcessor.process "
             "(post-processors-runner/src/post-processors/event-created.post-processor.ts:17:38)")
    parsed = {**_stream_fields(poison_event, conv), "payload": poison_event["payload"]}
    dlq_entry_id = client.xadd(dlq, {
        conv.dlq_message_id_field: poison, conv.dlq_error_field: error,
        conv.dlq_payload_field: json.dumps(parsed), conv.dlq_timestamp_field: str(now_ms - 25 * MINUTE * 1000),
    }, id=f"{now_ms - 25 * MINUTE * 1000}-0").decode()
    keys.append(dlq)
    retry = conv.retry_key.format(group=PP_GROUP, message_id=poison)
    client.set(retry, json.dumps({"messageId": poison, "stream": stream}))
    client.set(retry + conv.retry_attempt_suffix, str(conv.max_retries))
    client.set(retry + conv.retry_last_error_suffix, error.splitlines()[0])
    keys += [retry, retry + conv.retry_attempt_suffix, retry + conv.retry_last_error_suffix]
    # the stale lock: taken when the message was read, never released (Redis blipped)
    lock = conv.idempotency_key.format(group=PP_GROUP, message_id=locked)
    client.set(lock, LIVE_CONSUMER, ex=conv.idempotency_ttl_s - 10 * MINUTE)
    keys.append(lock)
    # job outcome streams, as the outbox runner pushes the trigger's rows (one XADD per target service):
    # success consumed by the common post-processor, failure read by nobody
    streams: dict[str, str] = {}
    for job_key, age in (("job_done", 29 * MINUTE), ("job_failed", 10 * MINUTE)):
        for n, row in enumerate(outcomes[job_key]):
            for target in row.target_services:
                key = streams.setdefault(job_key, conv.stream_prefix + target)
                client.xadd(conv.stream_prefix + target, outcome_fields(row, conv), id=f"{now_ms - age * 1000}-{n}")
                if key not in keys:
                    keys.append(key)
    success_stream = streams["job_done"]
    client.xgroup_create(success_stream, COMMON_GROUP, id="0")
    read = client.xreadgroup(COMMON_GROUP, COMMON_CONSUMER, {success_stream: ">"}, count=10)
    client.xack(success_stream, COMMON_GROUP, *[entry_id for _, entries in read for entry_id, _ in entries])
    _seed_bullmq(client, conv, ids, now_ms, keys)
    # last: move the dead consumer's last-seen time 20 minutes into the past
    dump = client.dump(stream)
    aged = age_consumer_in_dump(dump, DEAD_CONSUMER, now_ms - 20 * MINUTE * 1000, now_ms) if dump else None
    if aged is not None:
        client.restore(stream, 0, aged, replace=True)
        scn.consumer_aged = True
    scn.faults.extend([
        Fault("dlq_poison_pill", "a poison pill in the dead-letter stream",
              f"event {poison_event['id']} (entry {poison}) failed {conv.max_retries} times on a null "
              f"organizerId and was moved to {dlq}", {"message_id": poison, "dlq_entry_id": dlq_entry_id,
                                                      "event_id": poison_event["id"]}),
        Fault("stale_idempotency_lock", "a stale idempotency lock",
              f"the lock {lock} survived a Redis outage while entry {locked} is still pending: its next read "
              "would be acknowledged with no effect", {"message_id": locked, "lock_key": lock}),
        Fault("dead_consumer", "a dead consumer holding pending entries",
              f"consumer {DEAD_CONSUMER} of group {PP_GROUP} crashed 20 minutes ago holding 2 entries",
              {"consumer": DEAD_CONSUMER, "entries": f"{dead_a},{dead_b}"}),
        Fault("trimmed_pending", "a pending entry whose message was trimmed",
              f"entry {trimmed} is still pending with {LIVE_CONSUMER} but MAXLEN trimming removed its message",
              {"message_id": trimmed, "event_id": events[0]["id"]}),
    ])


def _seed_bullmq(client: redis.Redis, conv: Conventions, ids: dict[str, str], now_ms: int, keys: list[str]) -> None:
    """The failed GEOCODE job as BullMQ stores it: job hash, ``failed`` set, queue meta."""
    base = f"{conv.bullmq_prefix}:{QUEUE}"
    job_id, started = ids["job_failed"], now_ms - 12 * MINUTE * 1000
    stack = [f"InternalServerError: {ids['failed_reason']}\n    at GeocodeEventHandler.handle "
             "(workers-runners/worker-event/src/workers/handlers/geocode-event.handler.ts:19:13)"] * 3
    client.hset(f"{base}:{job_id}", mapping={
        "name": GEOCODE_JOB,
        "data": json.dumps({"payload": {"eventId": ids["failed_event_ref"], "address": "nowhere"}, "traceparent": ""}),
        "opts": json.dumps({"attempts": conv.job_attempts, "backoff": {"type": "exponential", "delay": 1000},
                            "removeOnComplete": True, "jobId": job_id}),
        "timestamp": str(started), "delay": "0", "priority": "0", "attemptsMade": str(conv.job_attempts),
        "atm": str(conv.job_attempts), "processedOn": str(started + 5000),
        "finishedOn": str(now_ms - 11 * MINUTE * 1000),
        "failedReason": ids["failed_reason"], "stacktrace": json.dumps(stack),
    })
    client.zadd(f"{base}:failed", {job_id: now_ms - 11 * MINUTE * 1000})
    client.hset(f"{base}:meta", mapping={"opts.maxLenEvents": "10000", "version": "bullmq:5.12.0"})
    keys += [f"{base}:{job_id}", f"{base}:failed", f"{base}:meta"]


def seed(service_dsn: str, client: redis.Redis, conv: Conventions, keys: list[str] | None = None) -> Scenario:
    """Seed the whole scenario; the database must be empty and the Redis database unused.

    Every Redis key written is appended to ``keys`` as it is written (so that a caller
    can delete them even when seeding fails halfway).
    """
    stream = f"{conv.stream_prefix}{STREAM_TARGET}"
    scn = Scenario(service=SERVICE, emitter=EMITTER, queue=QUEUE, stream=stream,
                   dlq_stream=f"{stream}{conv.dlq_suffix}", group=PP_GROUP,
                   redis_keys=keys if keys is not None else [])
    ids = {key: str(uuid.uuid4()) for key in ("job_pending", "job_processing", "job_failed", "job_done",
                                             "failed_event_ref")}
    ids["failed_reason"] = f"GEOCODING_NO_RESULT: no geocoding result for event {ids['failed_event_ref']}"
    titles = ["Garden swap", "Choir rehearsal", "Board games night", "Beach clean-up", "Bike repair",
              "Book club", "Quiz night"]
    ages = [40, 35, 30, 22, 21.5, 12, 3]
    events: list[dict[str, Any]] = []
    for title, age in zip(titles, ages, strict=True):
        organizer = None if title == "Board games night" else str(uuid.uuid4())
        event_id = str(uuid.uuid4())
        events.append({
            "id": event_id, "age": age * MINUTE, "emitter_id": organizer or str(uuid.uuid4()),
            "correlation_id": str(uuid.uuid4()),
            "payload": {"before": None, "after": {"id": event_id, "title": title, "organizerId": organizer}},
        })
    try:
        outcomes = seed_postgres(service_dsn, conv, ids, events)
    except psycopg.Error as exc:
        raise MeshError(f"could not seed the demo database: {str(exc).strip().splitlines()[0]}") from None
    scn.faults.extend([
        Fault("job_stuck_pending", "a job stuck PENDING",
              f"job {ids['job_pending']} ({GEOCODE_JOB}) was written 20 minutes ago and never claimed: "
              "the outbox runner stopped polling", {"job_id": ids["job_pending"]}),
        Fault("job_stuck_processing", "a job stuck PROCESSING",
              f"job {ids['job_processing']} ({FALLBACK_JOB}) was claimed 15 minutes ago and never pushed: "
              "the runner died between claim and push", {"job_id": ids["job_processing"]}),
        Fault("job_handler_failed", "a handler failure",
              f"job {ids['job_failed']} ({GEOCODE_JOB}) failed {conv.job_attempts} times in the worker: "
              f"{ids['failed_reason']}", {"job_id": ids["job_failed"], "queue": QUEUE}),
    ])
    try:
        seed_redis(client, conv, scn, ids, events, outcomes)
    except redis.RedisError as exc:
        raise MeshError(f"could not seed the demo Redis: {exc}") from None
    return scn
