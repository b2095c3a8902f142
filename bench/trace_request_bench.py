"""trace_request benchmark: one request looked up across three services with big outbox tables.

Seeds three scratch service databases (``--rows`` rows in each of jobs_outbox, event_queue and
job_audit per service; the issue's size is 1,000,000) with the project's schema: requests of
three rows (an event, a job, a follow-up event) sharing a correlation id and a trace id, spread
over the services. Creates the indexes ``mesh-mcp doctor`` recommends (outbox's and
trace_request's), then times ``trace_request`` (the library call the MCP adapter runs) by
correlation_id and by trace_id for ``--lookups`` random requests, and prints p50/p95 per way in.
Goal (issue 14): p95 < 200 ms per lookup with the recommended indexes.

    python bench/trace_request_bench.py --rows 1000000
    python bench/trace_request_bench.py --rows 100000 --lookups 50   # quicker

Needs a PostgreSQL where it may CREATE DATABASE (``--pg``) and a Redis logical database that is
empty (``--redis``; refused when not empty, flushed at the end). Databases are dropped at the end.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import platform
import random
import statistics
import sys
import time
import uuid
from pathlib import Path

import anyio
import psycopg
import redis

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from server.config import load_settings  # noqa: E402
from server.runtime import Runtime  # noqa: E402
from tools.outbox.indexes import recommended_indexes  # noqa: E402
from tools.outbox.mcp_tools import catalog_of  # noqa: E402
from tools.outbox.schema_discovery import TABLE_KINDS  # noqa: E402
from tools.trace_request.explain import explain_query, lookup_queries, scans  # noqa: E402
from tools.trace_request.indexes import recommended  # noqa: E402
from tools.trace_request.service import trace_request  # noqa: E402

SERVICES = ("event", "notification", "social")
GOAL_MS = 200.0
SCHEMA = (REPO / "tools" / "outbox" / "schema.sql").read_text(encoding="utf-8")

# request k: correlation = md5-uuid of k, trace = md5(k); its event lives in service k % 3,
# its job and follow-up in service (k + 1) % 3. Every service gets `rows` rows per table.
SEED_SQL = """
ALTER TABLE job_audit DISABLE TRIGGER USER;
INSERT INTO event_queue (id, status, type, emitter, payload, target_services, correlation_id, traceparent,
                         created_at, updated_at)
SELECT gen_random_uuid(), 'PENDING', CASE WHEN g % 2 = 0 THEN 'event:created' ELSE 'notification:sent' END,
       'ms-bench', jsonb_build_object('after', jsonb_build_object('id', 'entity-' || (g / 2))), ARRAY['bench'],
       md5('c' || (g / 2))::uuid,
       '00-' || md5('t' || (g / 2)) || '-' || substr(md5('s' || g), 1, 16) || '-01',
       now() - make_interval(secs => (g % 86400)), now() - make_interval(secs => (g % 86400))
FROM generate_series(%(lo)s, %(hi)s) AS g;
INSERT INTO jobs_outbox (id, status, type, emitter, target, payload, traceparent, scheduled_at, created_at, updated_at)
SELECT md5('j' || g)::uuid, 'PENDING', 'bench.job', 'ms-bench', 'bench-queue', '{}'::jsonb,
       '00-' || md5('t' || (g / 2)) || '-' || substr(md5('js' || g), 1, 16) || '-01',
       now(), now() - make_interval(secs => (g % 86400)), now() - make_interval(secs => (g % 86400))
FROM generate_series(%(lo)s, %(hi)s) AS g;
INSERT INTO job_audit (job_id, job_type, status, worker_id, emitter, current_attempt, started_at, created_at,
                       updated_at)
SELECT md5('j' || g)::uuid::text, 'bench.job', 'PROCESSING', 'w1', 'ms-bench', 1, now(), now(), now()
FROM generate_series(%(lo)s, %(hi)s) AS g;
ALTER TABLE job_audit ENABLE TRIGGER USER;
ANALYZE;
"""


def _with_db(url: str, name: str) -> str:
    info = psycopg.conninfo.conninfo_to_dict(url)
    info["dbname"] = name
    return psycopg.conninfo.make_conninfo(**info)


def seed(dsn: str, rows: int, offset: int) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(SCHEMA)
        conn.execute(SEED_SQL.replace("%(lo)s", str(offset)).replace("%(hi)s", str(offset + rows - 1)))


def create_indexes(dsn: str, settings) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        tables = anyio.run(_tables, settings, dsn)
        for kind in TABLE_KINDS:
            for rec in [*recommended_indexes(tables[kind], settings.conventions), *recommended(tables[kind]).values()]:
                conn.execute(rec.ddl.replace(" CONCURRENTLY", ""))
        conn.execute("ANALYZE")


async def _tables(settings, dsn):
    runtime = Runtime(settings)
    try:
        name = next(n for n, s in settings.services.items() if s.postgres == dsn)
        return await catalog_of(runtime).tables(name, with_indexes=True)
    finally:
        await runtime.aclose()


async def measure(settings, way: str, values: list[str]) -> tuple[list[float], list[int]]:
    """Time each lookup (one warm-up call first: the server caches the schemas across calls)."""
    runtime = Runtime(settings)
    times, trips = [], []
    try:
        await trace_request(runtime.connections, settings, catalog_of(runtime), **{way: values[0]})
        for value in values:
            t0 = time.perf_counter()
            report = await trace_request(runtime.connections, settings, catalog_of(runtime), **{way: value})
            times.append((time.perf_counter() - t0) * 1000)
            trips.append(report.sql_round_trips)
            assert len(report.items) >= 2, f"{way}={value}: the request was not found whole ({report.items})"
            assert not report.unindexed, f"{way}={value}: lookups ran without an index: {report.unindexed}"
    finally:
        await runtime.aclose()
    return times, trips


async def plans(settings) -> list[str]:
    """EXPLAIN of every lookup in every service: none may scan a big table sequentially."""
    runtime = Runtime(settings)
    out = []
    try:
        for service in SERVICES:
            tables = await catalog_of(runtime).tables(service, with_indexes=True)
            for label, query in lookup_queries(tables, settings):
                text, params = explain_query(query)
                result = await runtime.connections.read(service, text, params, max_rows=1)
                found = scans(next(iter(result.rows[0].values())))
                ok = bool(found) and not any(s.startswith("Seq Scan") for s in found)
                out.append(f"    {service} {label}: {', '.join(found)}" + ("" if ok else "  <- SEQUENTIAL SCAN"))
                assert ok, out[-1]
    finally:
        await runtime.aclose()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000, help="rows per table per service (default 1,000,000)")
    ap.add_argument("--lookups", type=int, default=100, help="requests looked up per way in")
    ap.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432/postgres")
    ap.add_argument("--redis", default="redis://127.0.0.1:6379/12")
    args = ap.parse_args()
    r = redis.Redis.from_url(args.redis)
    if r.dbsize():
        print(f"refused: {args.redis} is not empty", file=sys.stderr)
        return 2
    names = [f"mesh_bench_tr_{uuid.uuid4().hex[:8]}" for _ in SERVICES]
    with psycopg.connect(args.pg, autocommit=True) as admin:
        for name in names:
            admin.execute(f'CREATE DATABASE "{name}"')
    try:
        dsns = [_with_db(args.pg, n) for n in names]
        settings = load_settings(environ={}, overrides={
            "services": {svc: {"postgres": dsn} for svc, dsn in zip(SERVICES, dsns, strict=True)},
            "redis": {"url": args.redis}, "state_dir": "/tmp/mesh-bench-tr"})
        t0 = time.perf_counter()
        for i, dsn in enumerate(dsns):
            seed(dsn, args.rows, i * args.rows)
        seeded = time.perf_counter() - t0
        t0 = time.perf_counter()
        for dsn in dsns:
            create_indexes(dsn, settings)
        indexed = time.perf_counter() - t0
        total_requests = (len(SERVICES) * args.rows) // 2
        rng = random.Random(14)
        picks = [rng.randrange(total_requests) for _ in range(args.lookups)]
        corr = [str(uuid.UUID(hex=hashlib.md5(f"c{k}".encode()).hexdigest())) for k in picks]
        trace = [hashlib.md5(f"t{k}".encode()).hexdigest() for k in picks]
        print(f"trace_request bench: {len(SERVICES)} services x {args.rows:,} rows per table; "
              f"seeded in {seeded:.0f}s, indexed in {indexed:.0f}s; {platform.python_version()}, "
              f"{platform.machine()}")
        print("  plans of the lookups (EXPLAIN):")
        for line in anyio.run(plans, settings):
            print(line)
        print(f"  load average before timing: {' '.join(f'{x:.2f}' for x in os.getloadavg())} "
              f"({os.cpu_count()} cores)")
        worst = 0.0
        for way, values in (("correlation_id", corr), ("trace_id", trace)):
            ms, trips = anyio.run(measure, settings, way, values)
            p50 = statistics.median(ms)
            p95 = statistics.quantiles(ms, n=20)[-1] if len(ms) >= 20 else max(ms)
            worst = max(worst, p95)
            print(f"  trace_request({way}): n={len(ms)} p50 {p50:.1f} ms  p95 {p95:.1f} ms  max {max(ms):.1f} ms  "
                  f"SQL round trips per lookup {statistics.median(trips):.0f}  (goal p95 < {GOAL_MS:.0f})")
        print(f"  load average after timing: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        print("goal met" if worst < GOAL_MS else "goal NOT met")
    finally:
        r.flushdb()
        with psycopg.connect(args.pg, autocommit=True) as admin:
            for name in names:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    return 0


if __name__ == "__main__":
    sys.exit(main())
