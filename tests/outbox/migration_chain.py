"""A service database built by the migration chain, and its job lifecycle driven the way the real code does.

The chain lives in ``tests/fixtures/migration_chain/ms-event/src/migrations/common``: TypeORM
migration files in the shapes of the reference system (target-system.md, "The job-outcome row,
exactly"): the three tables, the four versions of ``notify_job_audit_status_change()`` and the
``"emitterId"`` NOT NULL migration placed between the second and the third version, so the state
:data:`RAISING` has a trigger that raises on every COMPLETED/FAILED update of ``job_audit``.

:func:`apply_chain` extracts the SQL of each ``up()`` (its ``queryRunner.query(`...`)`` strings) and
runs it on a scratch database, up to a chosen migration. The lifecycle helpers write what each
component writes (target-system.md, "What the runners and workers write"):

- :func:`service_write_job`: the service's ``jobs_outbox`` row (PENDING);
- :func:`runner_claim_jobs`, :func:`runner_push_job`: the outbox runner's claim, BullMQ push (job id =
  row id) and COMPLETED;
- :func:`worker_start`, :func:`worker_succeed`, :func:`worker_fail`: ``BaseWorker``'s upsert of
  ``job_audit`` (PROCESSING, ``started_at``, never ``updated_at``), its guard then COMPLETED (errors
  swallowed), its FAILED update once per attempt;
- :func:`runner_claim_events`, :func:`runner_push_event`: the outbox runner's XADD per target service;
- :func:`group_consume`: a post-processor's consumer group reading and acknowledging an entry;
- :func:`success_post_processor`: deletes the ``jobs_outbox`` row and writes the feedback event in one
  transaction.

The session fixture :func:`chain_dbs` shares one database per chain state (import it into a test module).
Self-contained (no import of the project's tools): other test modules reuse it as it is.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
import redis

CHAIN_WORKSPACE = Path(__file__).resolve().parents[1] / "fixtures" / "migration_chain"
MIGRATIONS_DIR = CHAIN_WORKSPACE / "ms-event" / "src" / "migrations" / "common"

TABLES = "1700000000000-CreateOutboxTables"
V1 = "1700000000001-CreateJobAuditStatusTrigger"
"""first trigger: ``job.outbox.success`` / ``job.outbox.failed``, target_services = {emitter}"""
V2 = "1710000000000-JobOutcomeDomainTypes"
"""second trigger: ``<d>:job:outbox:success`` / ``...:failure``, target_services = {emitter}"""
RAISING = "1720000000000-EventQueueEmitterIdNotNull"
"""``"emitterId"`` NOT NULL without default, second trigger still in place: COMPLETED/FAILED updates raise"""
V3 = "1730000000000-JobOutcomeEmitterId"
"""third trigger: ``"emitterId"`` = the job id"""
V4 = "1740000000000-JobOutcomeOwnStream"
"""fourth trigger: target_services = {the outcome type}"""
LATEST = "1750000000000-AddTraceparent"

EMITTER = "ms-event"
DOMAIN = "event"
JOB_TYPE = "events.geocode_event"
QUEUE = "event-queue"
BULL = "bull"
STREAM_PREFIX = "stream:"
GUARD_KEY = "job:completed:{job_id}"
POST_PROCESSORS_EMITTER = "ms-post-processors"

_UP_BODY = re.compile(r"async\s+up\s*\([^)]*\)[^{]*\{(?P<body>.*?)\n  \}\n", re.S)
_QUERY = re.compile(r"queryRunner\.query\(\s*`(?P<sql>(?:[^`\\]|\\.)*)`", re.S)


def migration_names() -> list[str]:
    """The chain's migrations in the order TypeORM runs them (timestamp order)."""
    return sorted(p.stem for p in MIGRATIONS_DIR.glob("*.ts"))


def up_statements(path: Path) -> list[str]:
    """The SQL strings of a migration's ``up()``, in order (template literals without interpolation)."""
    text = path.read_text(encoding="utf-8")
    body = _UP_BODY.search(text)
    if body is None:
        raise ValueError(f"{path.name}: no up() method found")
    out = []
    for match in _QUERY.finditer(body.group("body")):
        sql = match.group("sql")
        if "${" in sql:
            raise ValueError(f"{path.name}: interpolated SQL is not supported by this test helper")
        out.append(sql.replace("\\`", "`"))
    if not out:
        raise ValueError(f"{path.name}: up() runs no queryRunner.query")
    return out


def apply_chain(url: str, upto: str = LATEST, directory: Path = MIGRATIONS_DIR) -> list[str]:
    """Run the migrations of ``directory`` up to and including ``upto`` on the database at ``url``.

    Each migration runs in its own transaction, as TypeORM's ``transaction: 'each'`` does.
    Returns the names applied.
    """
    names = sorted(p.stem for p in directory.glob("*.ts"))
    if upto not in names:
        raise ValueError(f"unknown migration {upto!r}; the chain has {names}")
    applied = []
    with psycopg.connect(url) as conn:
        for name in names[: names.index(upto) + 1]:
            with conn.transaction():
                for statement in up_statements(directory / f"{name}.ts"):
                    conn.execute(statement)
            applied.append(name)
    return applied


def outcome_type(status: str, upto: str, emitter: str = EMITTER) -> str:
    """The type the trigger of chain state ``upto`` writes for ``status`` (COMPLETED or FAILED)."""
    domain = re.sub(r"^ms-", "", emitter)
    if migration_names().index(upto) < migration_names().index(V2):
        return "job.outbox.success" if status == "COMPLETED" else "job.outbox.failed"
    return f"{domain}:job:outbox:{'success' if status == 'COMPLETED' else 'failure'}"


def event_queue_columns(conn: psycopg.Connection) -> set[str]:
    return {row[0] for row in conn.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_name = 'event_queue'").fetchall()}


# -- the service -------------------------------------------------------------------------


def service_write_job(
    conn: psycopg.Connection,
    *,
    type: str = JOB_TYPE,
    target: str = QUEUE,
    emitter: str = EMITTER,
    emitter_id: str | None = None,
    payload: dict[str, Any] | None = None,
    age_s: float = 0,
) -> str:
    """``JobsOutboxEntity.createJob(...)`` then ``repository.create``: a PENDING jobs_outbox row."""
    job_id = str(uuid.uuid4())
    conn.execute(
        """INSERT INTO jobs_outbox (id, type, target, emitter, "emitterId", payload, scheduled_at, created_at,
                                    updated_at)
           VALUES (%s, %s, %s, %s, %s, %s, now() - make_interval(secs => %s), now() - make_interval(secs => %s),
                   now() - make_interval(secs => %s))""",
        (job_id, type, target, emitter, emitter_id or str(uuid.uuid4()),
         json.dumps(payload if payload is not None else {"eventId": str(uuid.uuid4())}), age_s, age_s, age_s),
    )
    return job_id


# -- the outbox runner -------------------------------------------------------------------


def runner_claim_jobs(conn: psycopg.Connection, limit: int = 50) -> list[str]:
    """The runner's claim: PENDING and due rows to PROCESSING (``FOR UPDATE SKIP LOCKED``)."""
    rows = conn.execute(
        """UPDATE jobs_outbox SET status = 'PROCESSING', updated_at = now()
           WHERE id IN (SELECT id FROM jobs_outbox WHERE status = 'PENDING' AND scheduled_at <= now()
                        ORDER BY created_at LIMIT %s FOR UPDATE SKIP LOCKED)
           RETURNING id""",
        (limit,),
    ).fetchall()
    return [str(row[0]) for row in rows]


def runner_push_job(conn: psycopg.Connection, r: redis.Redis | None, job_id: str) -> None:
    """``Queue(target).add(type, {payload, emitter, emitterId}, {jobId: <row id>, attempts: 3, ...})``,
    then the row is set COMPLETED ("pushed", not "executed")."""
    row = conn.execute('SELECT type, target, payload, emitter, "emitterId" FROM jobs_outbox WHERE id = %s',
                       (job_id,)).fetchone()
    if row is None:
        raise ValueError(f"no jobs_outbox row {job_id}")
    name, queue, payload, emitter, emitter_id = row
    if r is not None:
        r.hset(f"{BULL}:{queue}:{job_id}", mapping={
            "name": name,
            "data": json.dumps({"payload": payload, "emitter": emitter, "emitterId": str(emitter_id or "")}),
            "opts": json.dumps({"jobId": job_id, "attempts": 3, "backoff": {"type": "exponential", "delay": 1000},
                                "removeOnComplete": True}),
            "timestamp": int(time.time() * 1000),
            "attemptsMade": 0,
        })
        r.lpush(f"{BULL}:{queue}:wait", job_id)
    conn.execute("UPDATE jobs_outbox SET status = 'COMPLETED', updated_at = now() WHERE id = %s", (job_id,))


def runner_claim_events(conn: psycopg.Connection, limit: int = 50) -> list[str]:
    rows = conn.execute(
        """UPDATE event_queue SET status = 'PROCESSING', updated_at = now()
           WHERE id IN (SELECT id FROM event_queue WHERE status = 'PENDING'
                        ORDER BY created_at LIMIT %s FOR UPDATE SKIP LOCKED)
           RETURNING id""",
        (limit,),
    ).fetchall()
    return [str(row[0]) for row in rows]


def runner_push_event(conn: psycopg.Connection, r: redis.Redis, event_id: str) -> list[tuple[str, str]]:
    """One ``XADD stream:<target> MAXLEN ~ 10000`` per entry of target_services, then COMPLETED.

    Returns ``[(stream key, entry id), ...]``.
    """
    cols = event_queue_columns(conn)
    emitter_id = '"emitterId"' if "emitterId" in cols else "NULL"
    trace = "traceparent" if "traceparent" in cols else '"traceId"'
    row = conn.execute(
        f"SELECT id, type, emitter, {emitter_id}, correlation_id, {trace}, version, created_at, payload, "
        "target_services FROM event_queue WHERE id = %s", (event_id,)).fetchone()
    if row is None:
        raise ValueError(f"no event_queue row {event_id}")
    eid, type_, emitter, eid_of_emitter, correlation, traceparent, version, created, payload, targets = row
    event = {"id": str(eid), "type": type_, "emitter": emitter, "emitterId": str(eid_of_emitter or ""),
             "correlationId": str(correlation or ""), "version": version, "payload": payload}
    fields = {"id": str(eid), "type": type_, "emitter": emitter, "emitterId": str(eid_of_emitter or ""),
              "correlationId": str(correlation or ""), ("traceparent" if trace == "traceparent" else "traceId"):
              str(traceparent or ""), "version": str(version), "createdAt": str(int(created.timestamp() * 1000)),
              "payload": json.dumps(payload), "event": json.dumps(event)}
    out = []
    for target in targets:
        stream = f"{STREAM_PREFIX}{target}"
        out.append((stream, r.xadd(stream, fields, maxlen=10000, approximate=True).decode()))
    conn.execute("UPDATE event_queue SET status = 'COMPLETED', processed_at = now(), updated_at = now() "
                 "WHERE id = %s", (event_id,))
    return out


# -- the worker (BaseWorker) -------------------------------------------------------------


def worker_start(
    conn: psycopg.Connection, r: redis.Redis | None, job_id: str, *, worker_id: str = "worker-event-1",
    attempt: int = 1, started_age_s: float = 0,
) -> None:
    """BullMQ hands the job to a worker; ``BaseWorker`` upserts job_audit PROCESSING before the handler.

    The upsert writes ``{job_id, job_type, status, worker_id, emitter, current_attempt, started_at}``
    and never ``updated_at``. The envelope's type and emitter are those of the jobs_outbox row.
    """
    row = conn.execute("SELECT type, target, emitter FROM jobs_outbox WHERE id = %s", (job_id,)).fetchone()
    if row is None:
        raise ValueError(f"no jobs_outbox row {job_id}")
    job_type, queue, emitter = row
    if r is not None:
        r.lrem(f"{BULL}:{queue}:wait", 1, job_id)
        r.lpush(f"{BULL}:{queue}:active", job_id)
        r.hset(f"{BULL}:{queue}:{job_id}", "processedOn", int((time.time() - started_age_s) * 1000))
        r.set(f"{BULL}:{queue}:{job_id}:lock", worker_id, px=30_000)
    conn.execute(
        """INSERT INTO job_audit (job_id, job_type, status, worker_id, emitter, current_attempt, started_at)
           VALUES (%s, %s, 'PROCESSING', %s, %s, %s, now() - make_interval(secs => %s))
           ON CONFLICT (job_id) DO UPDATE SET job_type = EXCLUDED.job_type, status = EXCLUDED.status,
             worker_id = EXCLUDED.worker_id, emitter = EXCLUDED.emitter,
             current_attempt = EXCLUDED.current_attempt, started_at = EXCLUDED.started_at""",
        (job_id, job_type, worker_id, emitter, attempt, started_age_s),
    )


def worker_succeed(
    conn: psycopg.Connection, r: redis.Redis | None, job_id: str, *, result: dict[str, Any] | None = None,
) -> psycopg.Error | None:
    """The handler returned: guard ``job:completed:<id>`` first, then job_audit COMPLETED.

    The update's error is swallowed (the worker logs it): it is returned, the audit row stays PROCESSING.
    BullMQ then removes the job (``removeOnComplete``).
    """
    original = conn.execute("SELECT payload, target FROM jobs_outbox WHERE id = %s", (job_id,)).fetchone()
    payload, queue = original if original else ({}, QUEUE)
    if r is not None:
        r.set(GUARD_KEY.format(job_id=job_id), "true", ex=86400)
    error = None
    try:
        conn.execute(
            "UPDATE job_audit SET status = 'COMPLETED', finished_at = now(), result_payload = %s WHERE job_id = %s",
            (json.dumps(result if result is not None else {"originalPayload": payload}), job_id),
        )
    except psycopg.Error as exc:
        error = exc
    if r is not None:
        r.lrem(f"{BULL}:{queue}:active", 1, job_id)
        r.delete(f"{BULL}:{queue}:{job_id}", f"{BULL}:{queue}:{job_id}:lock")
    return error


def worker_fail(
    conn: psycopg.Connection, r: redis.Redis | None, job_id: str, error: str, *, attempt: int = 1,
    attempts: int = 3,
) -> psycopg.Error | None:
    """The handler threw on attempt ``attempt``: job_audit FAILED (once per attempt); BullMQ retries
    (``delayed``) or, on the last attempt, moves the job to ``failed``. Returns the update's error, if any."""
    row = conn.execute("SELECT target FROM jobs_outbox WHERE id = %s", (job_id,)).fetchone()
    queue = row[0] if row else QUEUE
    failure = None
    try:
        conn.execute(
            """UPDATE job_audit SET status = 'FAILED', error_message = %s, error_stack = %s, finished_at = now(),
                                    current_attempt = %s WHERE job_id = %s""",
            (error, f"Error: {error}\n    at Handler.handle", attempt, job_id),
        )
    except psycopg.Error as exc:
        failure = exc
    if r is not None:
        key = f"{BULL}:{queue}:{job_id}"
        now_ms = int(time.time() * 1000)
        r.lrem(f"{BULL}:{queue}:active", 1, job_id)
        r.delete(f"{key}:lock")
        r.hset(key, mapping={"failedReason": error, "attemptsMade": attempt,
                             "stacktrace": json.dumps([f"Error: {error}"]), "finishedOn": now_ms})
        if attempt >= attempts:
            r.zadd(f"{BULL}:{queue}:failed", {job_id: now_ms})
        else:
            r.zadd(f"{BULL}:{queue}:delayed", {job_id: now_ms + 1000 * 2 ** (attempt - 1)})
    return failure


def run_failing_job(conn: psycopg.Connection, r: redis.Redis | None, job_id: str, error: str,
                    attempts: int = 3) -> None:
    """Every BullMQ attempt of a job whose handler always throws: PROCESSING then FAILED, ``attempts`` times."""
    for attempt in range(1, attempts + 1):
        if r is not None and attempt > 1:
            queue = conn.execute("SELECT target FROM jobs_outbox WHERE id = %s", (job_id,)).fetchone()[0]
            r.zrem(f"{BULL}:{queue}:delayed", job_id)
        worker_start(conn, r, job_id, attempt=attempt)
        worker_fail(conn, r, job_id, error, attempt=attempt, attempts=attempts)


# -- event_queue and the post-processors -------------------------------------------------


def outcome_rows(conn: psycopg.Connection, job_id: str) -> list[dict[str, Any]]:
    """The trigger's rows of a job (``payload.after.job_id``), oldest first."""
    cur = conn.execute(
        "SELECT * FROM event_queue WHERE payload->'after'->>'job_id' = %s ORDER BY created_at, id", (job_id,))
    names = [d.name for d in cur.description or []]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def group_consume(r: redis.Redis, stream: str, group: str, *, consumer: str = "consumer-1",
                  ack: bool = True) -> list[str]:
    """A post-processor's group reads the new entries (XREADGROUP, creating the group at 0) and, with
    ``ack``, acknowledges them after its idempotency lock; without, they stay pending."""
    try:
        r.xgroup_create(stream, group, id="0", mkstream=True)
    except redis.ResponseError as exc:
        if "BUSYGROUP" not in str(exc):
            raise
    got = r.xreadgroup(group, consumer, {stream: ">"}, count=100)
    ids = [entry.decode() for _, entries in got for entry, _ in entries]
    for entry in ids if ack else []:
        r.set(f"idempotency:post-processor:{group}:{entry}", "1", nx=True, ex=86400)
        r.xack(stream, group, entry)
    return ids


@dataclass(frozen=True)
class Feedback:
    event_id: str
    type: str


def success_post_processor(
    conn: psycopg.Connection, outcome_event_id: str, *, feedback_type: str, ws_target: str,
) -> Feedback:
    """The common success post-processor: takes ``payload.after.job_id``, deletes that jobs_outbox row and
    writes the feedback event (``getEventForJob(payload.after.job_type)``, given as ``feedback_type``),
    emitter ``ms-post-processors``, ``"emitterId"`` = the job id, in one transaction."""
    row = conn.execute("SELECT payload FROM event_queue WHERE id = %s", (outcome_event_id,)).fetchone()
    if row is None:
        raise ValueError(f"no event_queue row {outcome_event_id}")
    after = row[0]["after"]
    job_id = after["job_id"]
    original = (after.get("result_payload") or {}).get("originalPayload", {})
    feedback_id = str(uuid.uuid4())
    # an older schema has no "emitterId" column on event_queue (it came with the NOT NULL migration)
    with_emitter_id = "emitterId" in event_queue_columns(conn)
    with conn.transaction():
        conn.execute("DELETE FROM jobs_outbox WHERE id = %s", (job_id,))
        if with_emitter_id:
            conn.execute(
                """INSERT INTO event_queue (id, type, emitter, "emitterId", payload, target_services)
                   VALUES (%s, %s, %s, %s, %s, %s)""",
                (feedback_id, feedback_type, POST_PROCESSORS_EMITTER, job_id, json.dumps(original), [ws_target]),
            )
        else:
            conn.execute(
                "INSERT INTO event_queue (id, type, emitter, payload, target_services) VALUES (%s, %s, %s, %s, %s)",
                (feedback_id, feedback_type, POST_PROCESSORS_EMITTER, json.dumps(original), [ws_target]),
            )
    return Feedback(event_id=feedback_id, type=feedback_type)


# -- scratch databases per chain state ---------------------------------------------------


class ChainDatabases:
    """One scratch database per chain state, migrated on first use and shared (each test works on its own
    jobs, which the tools look up by id); :meth:`close` drops them. Creating and dropping a database costs
    seconds on a loaded machine: sharing keeps the tests of the chain fast."""

    def __init__(self, admin_url: str) -> None:
        self.admin_url = admin_url
        self.urls: dict[str, str] = {}

    def url(self, upto: str = LATEST) -> str:
        if upto not in self.urls:
            name = f"mesh_chain_{uuid.uuid4().hex[:10]}"
            with psycopg.connect(self.admin_url, autocommit=True) as conn:
                conn.execute(f'CREATE DATABASE "{name}"')
            info = psycopg.conninfo.conninfo_to_dict(self.admin_url)
            password = f":{info['password']}" if info.get("password") else ""
            host, port = info.get("host", "127.0.0.1"), info.get("port", "5432")
            url = (f"postgresql://{info.get('user', 'postgres')}{password}@/{name}?host={host}&port={port}"
                   if str(host).startswith("/") else
                   f"postgresql://{info.get('user', 'postgres')}{password}@{host}:{port}/{name}")
            self.urls[upto] = url
            apply_chain(url, upto)
        return self.urls[upto]

    def close(self) -> None:
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            for url in self.urls.values():
                name = psycopg.conninfo.conninfo_to_dict(url)["dbname"]
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        self.urls.clear()


@pytest.fixture(scope="session")
def chain_dbs(pg_admin_url: str) -> Iterator[ChainDatabases]:
    """Session-wide :class:`ChainDatabases` (import this fixture into the test module that uses it)."""
    dbs = ChainDatabases(pg_admin_url)
    yield dbs
    dbs.close()
