"""Streams and queues benchmark: inspect_stream, list_pending, dlq_list, list_streams on a big Redis.

Seeds one Redis logical database (it must be empty; it is flushed at the end unless
``--keep``) with:

- ``stream:bench:event`` holding ``--entries`` entries (default 1,000,000) in the target
  system's entry format, trimmed by 1 % so that some pending entries lost their message;
- 3 consumer groups, each with ``--pending`` pending entries (default 100,000) held by
  4 consumers (XREADGROUP here, in the seeding), one idempotency lock per 100 pending
  entries and a retry queue of 1,000 members per group;
- ``stream:bench:event-dlq`` with ``--dlq`` dead letters (default 10,000) plus their retry keys;
- filler keys (strings, 100 other streams with their DLQs, a BullMQ queue of 1,000 jobs)
  up to ``--keys`` keys in the database (default 100,000).

It then times the library calls the MCP tools run (the same code, without the
transport), with the dead-consumer and lag thresholds lowered to 1 s and the claim
interval to 1 s so that every anomaly rule fires and follows its longest path, and the
redis-cli commands a person would type for the same answer (one process per command,
as typed). Goals: inspect_stream p95 < 100 ms, a list_pending page
< 50 ms, a dlq_list page < 50 ms, list_streams on 100,000 keys < 1 s.

    python bench/streams_bench.py                    # full size (seeding takes about a minute)
    python bench/streams_bench.py --entries 100000 --pending 10000 --dlq 1000 --keys 20000
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import shutil
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import redis

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from server.config import Settings, load_settings  # noqa: E402
from server.connections import Connections  # noqa: E402
from tools.queues.bull import inspect_queue  # noqa: E402
from tools.queues.discovery import list_queues  # noqa: E402
from tools.streams.cursor import encode_cursor, fingerprint  # noqa: E402
from tools.streams.discovery import list_streams  # noqa: E402
from tools.streams.dlq import list_dead_letters  # noqa: E402
from tools.streams.inspect import inspect_stream  # noqa: E402
from tools.streams.pending import list_pending  # noqa: E402

STREAM = "stream:bench:event"
GROUPS = ("pp-notify", "pp-search", "pp-audit")
CONSUMERS = 4
QUEUE = "bench-queue"
GOALS_MS = {"inspect_stream": 100.0, "list_pending page": 50.0, "dlq_list page": 50.0, "list_streams": 1000.0}
BATCH = 10_000
THRESHOLD_S = 1


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def entry(n: int) -> dict[str, str]:
    return {
        "id": str(uuid.UUID(int=n)), "type": f"bench.event_{n % 12}", "emitter": "ms-bench",
        "emitterId": str(uuid.UUID(int=n * 7)), "correlationId": str(uuid.UUID(int=n * 13)), "traceId": "",
        "version": "1", "createdAt": "2026-11-30T02:00:00.000Z",
        "payload": json.dumps({"before": None, "after": {"id": n, "title": f"item {n}", "tags": ["a", "b"]}}),
        "event": json.dumps({"type": f"bench.event_{n % 12}", "id": n}),
    }


def seed(client: redis.Redis, args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    conv = settings.conventions
    t0 = time.perf_counter()
    ids: list[str] = []
    for start in range(0, args.entries, BATCH):
        pipe = client.pipeline(transaction=False)
        for n in range(start, min(start + BATCH, args.entries)):
            pipe.xadd(STREAM, entry(n))
        ids.extend(i.decode() for i in pipe.execute())
    for group in GROUPS:
        client.xgroup_create(STREAM, group, id="0")
        per_consumer = args.pending // CONSUMERS
        for c in range(CONSUMERS):
            left = per_consumer
            while left:
                got = client.xreadgroup(group, f"{group}-c{c}", {STREAM: ">"}, count=min(left, BATCH))
                left -= len(got[0][1]) if got else left
        pipe = client.pipeline(transaction=False)
        for n in range(0, args.pending, 100):
            pipe.set(conv.idempotency_key.format(group=group, message_id=ids[n]), "1", ex=86400)
        retry_queue = conv.retry_queue_key.format(group=group)
        for n in range(1000):
            pipe.zadd(retry_queue, {ids[args.pending + n]: time.time() * 1000 + 60_000})
        pipe.execute()
    client.xtrim(STREAM, maxlen=args.entries - args.entries // 100, approximate=False)
    last_read = time.perf_counter()
    seeded_stream = last_read - t0

    dlq = STREAM + conv.dlq_suffix
    for start in range(0, args.dlq, BATCH):
        pipe = client.pipeline(transaction=False)
        for n in range(start, min(start + BATCH, args.dlq)):
            source = ids[args.pending + 2000 + n]
            message = {"id": str(uuid.UUID(int=n)), "type": f"bench.event_{n % 12}", "payload": {"n": n}}
            error = "EntityNotFound: organiser missing" if n % 3 else "QueryFailedError: FK violation"
            pipe.xadd(dlq, {"messageId": source, "error": f"{error}\n    at Handler.handle (handler.ts:10:5)",
                            "payload": json.dumps(message), "timestamp": str(int(time.time() * 1000))})
            if n % 2 == 0:
                base = conv.retry_key.format(group=GROUPS[0], message_id=source)
                pipe.set(base + conv.retry_attempt_suffix, "5")
                pipe.set(base + conv.retry_last_error_suffix, error)
        pipe.execute()

    pipe = client.pipeline(transaction=False)
    for s in range(100):
        pipe.xadd(f"stream:bench:other-{s}", {"n": "1"})
        pipe.xadd(f"stream:bench:other-{s}{conv.dlq_suffix}", {"messageId": "1-0", "error": "e", "payload": "{}",
                                                                 "timestamp": "1"})
    for n in range(1000):
        job = f"{conv.bullmq_prefix}:{QUEUE}:{n}"
        pipe.hset(job, mapping={"name": "bench.job", "data": json.dumps({"n": n}), "timestamp": n,
                                "attemptsMade": 3 if n % 10 == 0 else 0, "failedReason": "boom" if n % 10 == 0 else ""})
        if n % 10 == 0:
            pipe.zadd(f"{conv.bullmq_prefix}:{QUEUE}:failed", {str(n): n})
        else:
            pipe.lpush(f"{conv.bullmq_prefix}:{QUEUE}:wait", str(n))
    pipe.set(f"{conv.bullmq_prefix}:{QUEUE}:id", 1000)
    pipe.execute()
    filler = max(0, args.keys - client.dbsize())
    for start in range(0, filler, BATCH):
        client.mset({f"bench:filler:{n}": "x" for n in range(start, min(start + BATCH, filler))})
    return {"seed_s": round(time.perf_counter() - t0, 1), "seed_stream_s": round(seeded_stream, 1),
            "keys": client.dbsize(), "stream_length": client.xlen(STREAM), "ids": ids, "last_read": last_read}


async def timed(call: Callable[[], Awaitable[Any]], runs: int) -> tuple[list[float], Any]:
    samples, result = [], None
    for _ in range(runs):
        t = time.perf_counter()
        result = await call()
        samples.append((time.perf_counter() - t) * 1000)
    return samples, result


async def measure(settings: Settings, runs: int, ids: list[str], pending: int) -> dict[str, dict[str, Any]]:
    conns = Connections(settings)
    out: dict[str, dict[str, Any]] = {}
    try:
        async def record(name: str, call: Callable[[], Awaitable[Any]], n: int, note: str = "") -> Any:
            await call()  # warm the connection
            samples, result = await timed(call, n)
            out[name] = {"p50_ms": round(statistics.median(samples), 1), "p95_ms": round(p95(samples), 1),
                         "max_ms": round(max(samples), 1), "runs": n, "note": note}
            return result

        report = await record("inspect_stream", lambda: inspect_stream(conns, settings, STREAM), runs)
        out["inspect_stream"]["note"] = "anomalies: " + ", ".join(sorted({a.code for a in report.anomalies}))
        await record("list_pending page", lambda: list_pending(conns, settings, STREAM, GROUPS[0], count=50),
                     runs, "first page: 50 entries whose messages were trimmed")
        middle = encode_cursor({"after": ids[pending // 2]}, fingerprint("list_pending", STREAM, GROUPS[2], None, 0))
        await record("list_pending page (mid-PEL)",
                     lambda: list_pending(conns, settings, STREAM, GROUPS[2], count=50, cursor=middle),
                     runs, "50 entries with their messages (XRANGE each)")
        await record("list_pending page (consumer filter)",
                     lambda: list_pending(conns, settings, STREAM, GROUPS[2], consumer=f"{GROUPS[2]}-c3", count=50),
                     runs, "the consumer holds the last quarter of the PEL: XPENDING skips the rest")
        await record("dlq_list page", lambda: list_dead_letters(conns, settings, stream=STREAM, count=50), runs,
                     "50 parsed entries joined with retry keys, locks and PELs of 3 groups")
        await record("dlq_list page (filter contains)",
                     lambda: list_dead_letters(conns, settings, stream=STREAM, count=50, contains="fk violation"),
                     runs, "1 entry in 3 matches")
        await record("dlq_list page (every DLQ, SCAN)", lambda: list_dead_letters(conns, settings, count=50),
                     max(3, runs // 10), "includes the bounded SCAN of the whole keyspace")
        result = await record("list_streams", lambda: list_streams(conns, settings), max(3, runs // 10))
        out["list_streams"]["note"] = f"{result.total_found} streams, scan complete: {result.scan_complete}"
        qlist = await record("list_queues", lambda: list_queues(conns, settings), max(3, runs // 10))
        out["list_queues"]["note"] = f"{qlist.total_found} queue(s), scan complete: {qlist.scan_complete}"
        await record("inspect_queue", lambda: inspect_queue(conns, settings, QUEUE, job_id="10"), runs)
    finally:
        await conns.aclose()
    return out


def redis_cli(url: str, db: int) -> dict[str, dict[str, Any]]:
    """Wall time of the redis-cli commands a person would type for the same answers."""
    cli = shutil.which("redis-cli")
    if cli is None:
        return {}
    host_port = url.split("://", 1)[1].split("/", 1)[0]
    host, _, port = host_port.rpartition(":")
    base = [cli, "-h", host or "127.0.0.1", "-p", port or "6379", "-n", str(db)]

    def run(*cmds: list[str]) -> float:
        t = time.perf_counter()
        for cmd in cmds:
            subprocess.run(base + cmd, check=True, stdout=subprocess.DEVNULL)
        return round((time.perf_counter() - t) * 1000, 1)

    inspect_cmds = [["XINFO", "STREAM", STREAM], ["XINFO", "GROUPS", STREAM]]
    for g in GROUPS:
        inspect_cmds += [["XINFO", "CONSUMERS", STREAM, g], ["XPENDING", STREAM, g]]
    return {
        "inspect_stream": {"ms": run(*inspect_cmds), "commands": len(inspect_cmds),
                           "what": "XINFO STREAM, XINFO GROUPS, then XINFO CONSUMERS + XPENDING per group "
                                   "(no anomaly, no lock or trim check)"},
        "list_pending page": {"ms": run(["XPENDING", STREAM, GROUPS[0], "-", "+", "50"]), "commands": 1,
                              "what": "XPENDING - + 50 (ids only; the messages need one XRANGE each)"},
        "dlq_list page": {"ms": run(["XRANGE", STREAM + "-dlq", "-", "+", "COUNT", "50"]), "commands": 1,
                          "what": "XRANGE <dlq> - + COUNT 50 (raw fields, no parsing, no retry keys)"},
        "list_streams": scan_streams(base),
    }


def scan_streams(base: list[str]) -> dict[str, Any]:
    """``redis-cli --scan --type stream`` (redis-cli 7.2+), else the SCAN ... TYPE stream loop typed by hand."""
    t = time.perf_counter()
    if subprocess.run([*base, "--scan", "--type", "stream"], stdout=subprocess.DEVNULL,
                      stderr=subprocess.DEVNULL).returncode == 0:
        return {"ms": round((time.perf_counter() - t) * 1000, 1), "commands": 1,
                "what": "redis-cli --scan --type stream (names only)"}
    t = time.perf_counter()
    cursor, commands = "0", 0
    while True:
        out = subprocess.run([*base, "SCAN", cursor, "TYPE", "stream", "COUNT", "1000"], check=True,
                             capture_output=True, text=True).stdout.split()
        commands += 1
        cursor = out[0] if out else "0"
        if cursor == "0":
            break
    return {"ms": round((time.perf_counter() - t) * 1000, 1), "commands": commands,
            "what": f"SCAN <cursor> TYPE stream COUNT 1000, {commands} times (this redis-cli has no --type)"}


DB_LOCK = "mesh-mcp:test-db-lock:{db}"
"""The claim key the test fixtures take in database 0 (tests/conftest.py ``_LOCK``): holding it
for the whole run keeps a concurrent test from taking the same database, and the reverse."""


def claim_db(base_url: str, wanted: int | None) -> tuple[int, str]:
    """An empty logical database and the claim token held on it; release it with :func:`release_db`."""
    base = redis.Redis.from_url(f"{base_url}/0")
    token = f"bench-{uuid.uuid4().hex}"
    try:
        for db in [wanted] if wanted is not None else list(range(11, 0, -1)):
            if not base.set(DB_LOCK.format(db=db), token, nx=True, ex=3600):
                continue
            client = redis.Redis.from_url(f"{base_url}/{db}")
            try:
                if client.dbsize() == 0:
                    return int(db), token
            finally:
                client.close()
            base.delete(DB_LOCK.format(db=db))
    finally:
        base.close()
    raise SystemExit("no empty, unclaimed Redis logical database for the bench (pass --db with an empty one)")


def release_db(base_url: str, db: int, token: str) -> None:
    base = redis.Redis.from_url(f"{base_url}/0")
    try:
        if base.get(DB_LOCK.format(db=db)) == token.encode():
            base.delete(DB_LOCK.format(db=db))
    finally:
        base.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--redis", default="redis://127.0.0.1:6379", help="Redis URL without the db number")
    parser.add_argument("--db", type=int, help="an empty logical database to use (default: the first empty of 11..1)")
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--pending", type=int, default=100_000, help="pending entries per group (3 groups)")
    parser.add_argument("--dlq", type=int, default=10_000)
    parser.add_argument("--keys", type=int, default=100_000, help="keys in the database for the SCAN-based tools")
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--keep", action="store_true", help="do not flush the database at the end")
    args = parser.parse_args()
    if args.pending * 1.1 + 3000 + args.dlq > args.entries:
        parser.error("--entries must exceed --pending * 1.1 + --dlq + 3000")
    base = args.redis.rstrip("/")
    db, token = claim_db(base, args.db)
    url = f"{base}/{db}"
    client = redis.Redis.from_url(url)
    # thresholds of 1 s, not minutes, so that every rule fires on the freshly seeded data (the worst case)
    settings = load_settings(environ={}, overrides={
        "redis": {"url": url},
        "limits": {"dead_consumer_idle_ms": THRESHOLD_S * 1000, "lag_max_age_ms": THRESHOLD_S * 1000},
        "conventions": {"claim_interval_ms": THRESHOLD_S * 1000},
    })
    try:
        seeded = seed(client, args, settings)
        ids = seeded.pop("ids")
        # a small (--quick) seeding ends before the 1 s thresholds: wait them out so every rule fires
        time.sleep(max(0.0, THRESHOLD_S + 0.1 - (time.perf_counter() - seeded.pop("last_read"))))
        figures = anyio.run(measure, settings, args.runs, ids, args.pending)
        cli = redis_cli(base, db)
        memory = client.info("memory")["used_memory_human"]
        server = client.info("server")["redis_version"]
    finally:
        if not args.keep:
            client.flushdb()
        client.close()
        release_db(base, db, token)  # with --keep the data stays; test fixtures skip a database holding keys
    result = {
        "machine": {"python": platform.python_version(), "cpus": __import__("os").cpu_count(),
                    "redis": server, "platform": platform.platform()},
        "dataset": {**seeded, "entries_added": args.entries, "pending_per_group": args.pending, "groups": len(GROUPS),
                    "dlq": args.dlq, "redis_memory": memory},
        "tools": figures, "redis_cli": cli, "goals_ms": GOALS_MS,
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"Redis {server}, Python {platform.python_version()}, {result['machine']['cpus']} CPUs; dataset: "
          f"{seeded['stream_length']} entries, {len(GROUPS)} groups x {args.pending} pending, {args.dlq} dead letters, "
          f"{seeded['keys']} keys ({memory}); seeded in {seeded['seed_s']} s")
    print(f"{'tool call':48} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8}  goal    redis-cli equivalent")
    for name, fig in figures.items():
        goal = GOALS_MS.get(name)
        verdict = "" if goal is None else ("ok   " if fig["p95_ms"] < goal else "MISS ") + f"<{goal:g}"
        same = cli.get(name)
        cli_text = f"{same['ms']} ms, {same['commands']} command(s)" if same else ""
        print(f"{name:48} {fig['p50_ms']:8} {fig['p95_ms']:8} {fig['max_ms']:8}  {verdict:11} {cli_text}")
        if fig["note"]:
            print(f"{'':50}{fig['note']}")
    for name, c in cli.items():
        print(f"redis-cli for {name}: {c['what']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
