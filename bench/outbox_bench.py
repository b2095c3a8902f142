"""Runtime SQL benchmark: query_outbox, outbox_health and trace_job on big outbox tables.

Seeds a scratch database (1,000,000 rows in jobs_outbox and event_queue, 500,000 in
job_audit by default; ``--rows N`` scales everything down) with the project's schema,
plus a Redis state for the traced jobs (BullMQ keys, a full 10,000-entry outcome stream
with a consumer group), then measures the tools' library calls (the exact code the MCP
adapters run, without the transport) twice: with only the schema's own indexes, then
with the indexes and statistics ``mesh-mcp doctor`` recommends. Prints p50/p95 per query and the goals:
query_outbox filtered p95 < 50 ms, outbox_health p95 < 500 ms, trace_job p95 < 100 ms.

    python bench/outbox_bench.py                 # full size (seeding takes a few minutes)
    python bench/outbox_bench.py --rows 100000   # quicker

Needs a PostgreSQL where it may CREATE DATABASE (``--pg``, default the local server) and an
empty Redis logical database (``--redis``, default db 12; claimed atomically, refused when
not empty). Both are dropped or flushed at the end unless ``--keep``.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import psycopg
import redis

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from server.config import Settings, load_settings  # noqa: E402
from server.runtime import Runtime  # noqa: E402
from tools.outbox.health import outbox_health  # noqa: E402
from tools.outbox.indexes import recommended_indexes, recommended_statistics  # noqa: E402
from tools.outbox.query_outbox import query_outbox  # noqa: E402
from tools.outbox.schema_discovery import TABLE_KINDS, SchemaCatalog  # noqa: E402
from tools.outbox.trace import Tracer  # noqa: E402

GOALS_MS = {"query_outbox": 50.0, "outbox_health": 500.0, "trace_job": 100.0}
TRACED_JOBS = 100
STREAM_TARGET = "bench:job:outbox:success"
STREAM_SPACING_MS = 60


def _with_db(url: str, name: str) -> str:
    info = psycopg.conninfo.conninfo_to_dict(url)
    info["dbname"] = name
    return psycopg.conninfo.make_conninfo(**info)


def seed(dsn: str, rows: int) -> None:
    """Schema + rows with realistic status mixes, spread over 30 days (seconds to minutes)."""
    audit_rows = rows // 2
    schema = (REPO / "tools" / "outbox" / "schema.sql").read_text(encoding="utf-8")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(schema)
        conn.execute("ALTER TABLE job_audit DISABLE TRIGGER job_audit_status_trigger")
        t0 = time.perf_counter()
        # jobs_outbox: 88% COMPLETED (pushed), 5% PENDING, 2% PROCESSING, 5% FAILED; 40 types, 8 queues
        conn.execute(
            """
            INSERT INTO jobs_outbox (id, status, attempts, "lastError", type, emitter, "emitterId", target, payload,
                                     scheduled_at, created_at, updated_at)
            SELECT gen_random_uuid(),
                   CASE WHEN g %% 100 < 88 THEN 'COMPLETED' WHEN g %% 100 < 93 THEN 'PENDING'
                        WHEN g %% 100 < 95 THEN 'PROCESSING' ELSE 'FAILED' END,
                   (g %% 3), CASE WHEN g %% 100 >= 95 THEN 'ECONNREFUSED 10.0.0.5:6379' END,
                   'bench.job_type_' || (g %% 40), 'ms-bench', gen_random_uuid(), 'queue-' || (g %% 8),
                   jsonb_build_object('userId', g, 'note', repeat('x', 40 + g %% 200)),
                   ts, ts, ts + interval '2 seconds'
            FROM (SELECT g, now() - make_interval(secs => (g::float8 * 2592000 / %s)) AS ts
                  FROM generate_series(1, %s) AS g) s
            """,
            (rows, rows),
        )
        # job_audit: the newest-half of the jobs ran; 92% COMPLETED, 6% FAILED, 2% PROCESSING
        conn.execute(
            """
            INSERT INTO job_audit (job_id, job_type, status, worker_id, emitter, current_attempt, started_at,
                                   finished_at, error_message, created_at, updated_at)
            SELECT id::text, type,
                   CASE WHEN n %% 100 < 92 THEN 'COMPLETED' WHEN n %% 100 < 98 THEN 'FAILED' ELSE 'PROCESSING' END,
                   'worker-' || (n %% 4), emitter, 1, created_at, created_at + interval '1 second',
                   CASE WHEN n %% 100 BETWEEN 92 AND 97 THEN 'handler error ' || n END,
                   created_at + interval '1 second', NULL  -- the worker never writes job_audit.updated_at
            FROM (SELECT id, type, emitter, created_at, row_number() OVER () AS n
                  FROM jobs_outbox WHERE status = 'COMPLETED' LIMIT %s) j
            """,
            (audit_rows,),
        )
        # event_queue: one outcome event per audited job, the rest domain events
        conn.execute(
            """
            INSERT INTO event_queue (id, status, type, emitter, "emitterId", payload, version, target_services,
                                     created_at, updated_at, processed_at)
            SELECT gen_random_uuid(), 'COMPLETED',
                   CASE WHEN status = 'FAILED' THEN 'bench:job:outbox:failure' ELSE 'bench:job:outbox:success' END,
                   'ms-bench', job_id::uuid,
                   -- the audit trigger's payload: the old and the new job_audit row (job id at after.job_id)
                   jsonb_build_object('before', to_jsonb(a) || jsonb_build_object('status', 'PROCESSING'),
                                      'after', to_jsonb(a)),
                   1,
                   ARRAY[CASE WHEN status = 'FAILED' THEN 'bench:job:outbox:failure'
                              ELSE 'bench:job:outbox:success' END],
                   coalesce(finished_at, started_at, created_at), coalesce(finished_at, started_at, created_at)
                   + interval '1 second', coalesce(finished_at, started_at, created_at) + interval '1 second'
            FROM job_audit a WHERE status IN ('COMPLETED', 'FAILED')
            """
        )
        done = conn.execute("SELECT count(*) FROM event_queue").fetchone()[0]
        conn.execute(
            """
            INSERT INTO event_queue (id, status, attempts, type, emitter, payload, target_services, correlation_id,
                                     created_at, updated_at, processed_at)
            SELECT gen_random_uuid(),
                   CASE WHEN g %% 100 < 95 THEN 'COMPLETED' WHEN g %% 100 < 98 THEN 'PENDING' ELSE 'FAILED' END,
                   g %% 2, 'bench:event_' || (g %% 30), 'ms-bench',
                   jsonb_build_object('before', NULL, 'after', jsonb_build_object('id', g)),
                   ARRAY['bench:event_' || (g %% 30)], gen_random_uuid(), ts, ts, ts
            FROM (SELECT g, now() - make_interval(secs => (g::float8 * 2592000 / %s)) AS ts
                  FROM generate_series(1, %s) AS g) s
            """,
            (rows, max(0, rows - done)),
        )
        conn.execute("ALTER TABLE job_audit ENABLE TRIGGER job_audit_status_trigger")
        conn.execute("VACUUM ANALYZE jobs_outbox")
        conn.execute("VACUUM ANALYZE job_audit")
        conn.execute("VACUUM ANALYZE event_queue")
        counts = {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLE_KINDS}
        print(f"seeded {counts} in {time.perf_counter() - t0:.1f}s", flush=True)


def prepare_traced_jobs(dsn: str, r: redis.Redis) -> list[str]:
    """Make the newest audited jobs fully traceable, as the runner would have left them.

    Their success events are pushed into a full stream (10,000 entries, its MAXLEN, spread
    over the last 10 minutes) interleaved with other entries, and marked COMPLETED with
    ``processed_at`` = their push time (the runner XADDs, then marks the row); a
    consumer group read everything and acknowledged all but the last 50 entries. Each
    traced job's queue gets a 20,000-job wait list its BullMQ lookup must not scan whole.
    """
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            """SELECT j.id::text, j.target, e.id::text FROM jobs_outbox j
               JOIN job_audit a ON a.job_id = j.id::text AND a.status = 'COMPLETED'
               JOIN event_queue e ON e.payload->'after'->>'job_id' = a.job_id
               ORDER BY j.created_at DESC LIMIT %s""",
            (TRACED_JOBS,),
        ).fetchall()
        stream = f"stream:{STREAM_TARGET}"
        pipe = r.pipeline(transaction=False)
        traced = iter(rows)
        order: list[str | None] = []
        every = 10_000 // max(1, len(rows))
        seconds, micros = r.time()
        now_ms = int(seconds) * 1000 + int(micros) // 1000
        for i in range(10_000):
            # a busy stream: 10,000 entries (its MAXLEN) pushed over the last 10 minutes, ~16 per second
            entry_id = f"{now_ms - (10_000 - i) * STREAM_SPACING_MS}-0"
            row = next(traced, None) if i % every == every // 2 else None
            if row is not None:
                job_id, _queue, event_id = row
                pipe.xadd(stream, {"id": event_id, "type": STREAM_TARGET, "emitterId": job_id,
                                   "payload": json.dumps({"before": None, "after": {"job_id": job_id}})}, id=entry_id)
                order.append(event_id)
            else:
                pipe.xadd(stream, {"id": str(uuid.uuid4()), "type": STREAM_TARGET, "n": str(i)}, id=entry_id)
                order.append(None)
        entry_ids = pipe.execute()
        pushed = [(event_id, int(entry.decode().split("-")[0])) for event_id, entry in zip(order, entry_ids,
                                                                                           strict=True) if event_id]
        conn.execute(
            """UPDATE event_queue e SET processed_at = to_timestamp(p.ms / 1000.0)::timestamp,
                                        updated_at = to_timestamp(p.ms / 1000.0)::timestamp
               FROM unnest(%s::uuid[], %s::bigint[]) AS p(id, ms) WHERE e.id = p.id""",
            ([e for e, _ in pushed], [ms for _, ms in pushed]),
        )
    pipe = r.pipeline(transaction=False)
    for job_id, _queue, _event_id in rows:
        pipe.set(f"job:completed:{job_id}", "true", ex=86400)
    for queue in sorted({q for _, q, _ in rows}):
        for _ in range(20):
            pipe.lpush(f"bull:{queue}:wait", *[str(uuid.uuid4()) for _ in range(1000)])
    pipe.execute()
    r.xgroup_create(stream, "pp-common", id="0")
    r.xreadgroup("pp-common", "pp-1", {stream: ">"}, count=20_000)
    pending = r.xpending_range(stream, "pp-common", min="-", max="+", count=20_000)
    ids = [p["message_id"] for p in pending]
    r.xack(stream, "pp-common", *ids[: len(ids) - 50])  # the last few stay in the PEL
    return [job_id for job_id, _, _ in rows]


async def timed(fn: Callable[[], Awaitable[Any]], runs: int) -> list[float]:
    await fn()  # warm-up (connections, schema cache)
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        await fn()
        out.append((time.perf_counter() - t0) * 1000)
    return out


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


async def measure(settings: Settings, job_ids: list[str], runs: int) -> dict[str, list[float]]:
    runtime = Runtime(settings)
    catalog = SchemaCatalog(runtime.connections, settings)
    conn = runtime.connections
    results: dict[str, list[float]] = {}
    try:
        first = await query_outbox(conn, settings, catalog, service="bench", table="jobs_outbox", status="FAILED",
                                   limit=50)
        queries: dict[str, Callable[[], Awaitable[Any]]] = {
            "query_outbox jobs_outbox status=FAILED": lambda: query_outbox(
                conn, settings, catalog, service="bench", table="jobs_outbox", status="FAILED", limit=50),
            "query_outbox jobs_outbox status=FAILED page 2": lambda: query_outbox(
                conn, settings, catalog, service="bench", table="jobs_outbox", status="FAILED", limit=50,
                cursor=first.next_cursor),
            "query_outbox jobs_outbox type=.. status=PENDING": lambda: query_outbox(
                conn, settings, catalog, service="bench", table="jobs_outbox", type="bench.job_type_7",
                status="PENDING", limit=50),
            "query_outbox event_queue type=..": lambda: query_outbox(
                conn, settings, catalog, service="bench", table="event_queue", type="bench:event_3", limit=50),
            "query_outbox job_audit status=FAILED older_than_s=86400": lambda: query_outbox(
                conn, settings, catalog, service="bench", table="job_audit", status="FAILED",
                older_than_s=86400, limit=50),
            "query_outbox event_queue (no filter)": lambda: query_outbox(
                conn, settings, catalog, service="bench", table="event_queue", limit=50),
        }
        for name, fn in queries.items():
            results[name] = await timed(fn, runs)
            print(f"  {name}: p95 {p95(results[name]):.1f} ms", flush=True)
        results["outbox_health"] = await timed(lambda: outbox_health(conn, settings, catalog, None),
                                               max(5, runs // 5))
        print(f"  outbox_health: p95 {p95(results['outbox_health']):.1f} ms", flush=True)
        position = iter(range(10**9))

        async def trace_one() -> None:
            job_id = job_ids[next(position) % len(job_ids)]
            report = await Tracer(conn, settings, catalog).trace_job("bench", job_id)
            assert report.verdict.code in ("success_not_cleaned", "in_pel"), report.verdict

        results["trace_job"] = await timed(trace_one, runs)
        print(f"  trace_job: p95 {p95(results['trace_job']):.1f} ms", flush=True)
    finally:
        await runtime.aclose()
    return results


def set_indexes(dsn: str, settings: Settings, create: bool) -> list[str]:
    """Create (or drop) the recommended indexes and statistics; returns their DDL."""
    catalog_runtime = Runtime(settings)

    async def schemas() -> dict[str, Any]:
        try:
            return await SchemaCatalog(catalog_runtime.connections, settings).tables("bench")
        finally:
            await catalog_runtime.aclose()

    tables = anyio.run(schemas)
    ddl = [ix.ddl for kind in TABLE_KINDS for ix in recommended_indexes(tables[kind], settings.conventions)]
    ddl += [st.ddl for kind in TABLE_KINDS for st in recommended_statistics(tables[kind])]
    with psycopg.connect(dsn, autocommit=True) as conn:
        if create:
            for statement in ddl:
                if "job_id)" in statement and "job_audit" in statement:
                    continue  # the UNIQUE constraint already indexes job_audit.job_id
                conn.execute(statement.replace(" CONCURRENTLY", ""))
            for kind in TABLE_KINDS:
                conn.execute(f"VACUUM ANALYZE {kind}")
        else:
            rows = conn.execute(
                """SELECT indexrelid::regclass::text FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid
                   WHERE c.relname = ANY(%s) AND NOT i.indisprimary AND NOT i.indisunique
                   AND indexrelid::regclass::text NOT IN
                       ('idx_job_audit_status', 'idx_job_audit_worker_id', 'idx_job_audit_job_type')""",
                (list(TABLE_KINDS),),
            ).fetchall()
            for (name,) in rows:
                conn.execute(f"DROP INDEX {name}")
            stats = conn.execute(
                "SELECT stxname FROM pg_statistic_ext WHERE stxrelid = ANY(%s::regclass[])", (list(TABLE_KINDS),)
            ).fetchall()
            for (name,) in stats:
                conn.execute(f"DROP STATISTICS {name}")
            for kind in TABLE_KINDS:
                conn.execute(f"ANALYZE {kind}")
    return ddl


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows in jobs_outbox and event_queue")
    parser.add_argument("--runs", type=int, default=100, help="timed runs per query (health: runs/5)")
    parser.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432/postgres",
                        help="a PostgreSQL where the bench may create its database")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/12", help="a Redis db the bench may flush")
    parser.add_argument("--keep", action="store_true", help="keep the database and Redis data")
    args = parser.parse_args(argv)
    name = f"mesh_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(args.pg, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    dsn = _with_db(args.pg, name)
    r = redis.Redis.from_url(args.redis)
    claim = "if redis.call('DBSIZE') == 0 then redis.call('SET', KEYS[1], ARGV[1]) return 1 end return 0"
    if not r.eval(claim, 1, "mesh-mcp:bench-claim", name):
        with psycopg.connect(args.pg, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
        print(f"{args.redis} is not empty: pass --redis with an empty logical database", file=sys.stderr)
        return 2
    settings = load_settings(environ={}, overrides={
        "services": {"bench": {"postgres": dsn}},
        "redis": {"url": args.redis},
        "limits": {"statement_timeout_ms": 120_000},
    })
    print(f"machine: {platform.machine()}, {__import__('os').cpu_count()} cores, Python {platform.python_version()}")
    try:
        seed(dsn, args.rows)
        job_ids = prepare_traced_jobs(dsn, r)
        print("without the recommended indexes:", flush=True)
        set_indexes(dsn, settings, create=False)
        without = anyio.run(measure, settings, job_ids, max(5, args.runs // 10))
        print("with the recommended indexes:", flush=True)
        ddl = set_indexes(dsn, settings, create=True)
        with_ix = anyio.run(measure, settings, job_ids, args.runs)
    finally:
        if not args.keep:
            with psycopg.connect(args.pg, autocommit=True) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            r.flushdb()
        r.close()
    print(f"\nrows: jobs_outbox {args.rows}, event_queue {args.rows}, job_audit {args.rows // 2}")
    print(f"{'query':58} {'p50 idx':>9} {'p95 idx':>9} {'p95 no idx':>11}  goal")
    failed = False
    for key in with_ix:
        goal_key = key.split(" ")[0]
        goal = GOALS_MS.get(goal_key)
        ok = goal is None or p95(with_ix[key]) < goal
        failed = failed or not ok
        print(f"{key:58} {statistics.median(with_ix[key]):9.1f} {p95(with_ix[key]):9.1f} {p95(without[key]):11.1f}"
              f"  < {goal:.0f} ms {'ok' if ok else 'MISSED'}")
    print("\nrecommended indexes and statistics (mesh-mcp doctor prints the missing ones):")
    for statement in ddl:
        print("  " + statement)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
