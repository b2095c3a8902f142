"""Remediation benchmark: propose and apply a full DLQ replay plan; token and key costs.

Seeds one empty Redis logical database and one scratch PostgreSQL database with:

- ``stream:bench:rem`` holding ``--entries`` entries (default 100,000) in the target
  system's format, one consumer group;
- ``stream:bench:rem-dlq`` holding ``--dlq`` dead letters (default 10,000) written as the
  post-processors' RetryHelper writes them, with their ``:attempt`` / ``:lastError`` keys;
- one FAILED ``event_queue`` row per dead letter.

Then it times, with the library calls the MCP tools run (no transport):

- ``propose dlq_replay`` of a full plan (``[limits] max_plan_messages`` = ``--plan``, default
  100 dead letters): goal < 1 s;
- ``apply`` of that plan with a live consumer acknowledging replays in a thread: every step,
  the confirm wait included (goal < 10 s for 100 messages);
- token verification (local HMAC and Ed25519 signature): goal < 1 ms;
- loading an approver key (scrypt-stretched passphrase): this is the cost of one offline
  passphrase guess, a floor rather than a ceiling (goal >= 0.2 s).

    python bench/remediation_bench.py
    python bench/remediation_bench.py --entries 20000 --dlq 1000 --plan 50

Uses ``--redis`` (default redis://127.0.0.1:6379/8, must be empty, flushed at the end) and
creates then drops a database on ``--postgres`` (default postgresql://postgres@127.0.0.1:5432/postgres).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import psycopg
import redis

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from server.approval.keys import create_approver_key, load_approver_key  # noqa: E402
from server.approval.tokens import mint_token, verify_token  # noqa: E402
from server.config import Settings, load_settings  # noqa: E402
from server.connections import Connections  # noqa: E402
from tools.remediation.executor import apply_plan  # noqa: E402
from tools.remediation.planner import Request, propose  # noqa: E402

STREAM = "stream:bench:rem"
GROUP = "pp-bench"
BATCH = 5_000


def js(value: object) -> str:
    return json.dumps(value, separators=(",", ":"))


def seed(r: redis.Redis, pg: str, args: argparse.Namespace) -> None:
    r.xgroup_create(STREAM, GROUP, id="0", mkstream=True)
    ids: list[str] = []
    events: list[dict] = []
    for start in range(0, args.entries, BATCH):
        pipe = r.pipeline(transaction=False)
        for n in range(start, min(start + BATCH, args.entries)):
            event = {"id": str(uuid.UUID(int=n + 1)), "type": "bench.created", "emitter": "ms-bench",
                     "emitterId": str(uuid.UUID(int=n * 7 + 1)), "correlationId": str(uuid.UUID(int=n * 13 + 1)),
                     "traceId": "", "version": 1, "payload": {"before": None, "after": {"n": n}}}
            if n < args.dlq:
                events.append(event)
            pipe.xadd(STREAM, {"id": event["id"], "type": event["type"], "emitter": event["emitter"],
                               "emitterId": event["emitterId"], "correlationId": event["correlationId"],
                               "traceId": "", "version": "1", "createdAt": "2026-11-30T02:00:00.000Z",
                               "payload": js(event["payload"]), "event": js(event)})
        ids += [i.decode() for i in pipe.execute()]
    r.xreadgroup(GROUP, "pp-seed", {STREAM: ">"}, count=args.entries)  # everything delivered...
    for start in range(0, args.entries, BATCH):  # ...and acknowledged, the dead letters as RetryHelper does
        r.xack(STREAM, GROUP, *ids[start:start + BATCH])
    for start in range(0, args.dlq, BATCH):
        pipe = r.pipeline(transaction=False)
        for n in range(start, min(start + BATCH, args.dlq)):
            event, message_id = events[n], ids[n]
            pipe.xadd(f"{STREAM}-dlq", {"messageId": message_id, "error": "entity not found",
                                        "payload": js({"success": True, "type": event["type"], "id": event["id"],
                                                       "payload": js(event)}),
                                        "timestamp": str(int(time.time() * 1000))})
            base = f"retry:post-processor:{GROUP}:{message_id}"
            pipe.set(base + ":attempt", 5)
            pipe.set(base + ":lastError", "entity not found", ex=86400)
        pipe.execute()
    with psycopg.connect(pg, autocommit=True) as conn:
        conn.execute((REPO / "tools" / "outbox" / "schema.sql").read_text())
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO event_queue (id, status, type, emitter) VALUES (%s, 'FAILED', %s, %s)",
                            [(e["id"], e["type"], e["emitter"]) for e in events])


class Consumer(threading.Thread):
    """A live post-processor: reads new entries and acknowledges them."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.r = redis.Redis.from_url(url)
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            for _, rows in self.r.xreadgroup(GROUP, "pp-live", {STREAM: ">"}, count=100, block=20) or []:
                if rows:
                    self.r.xack(STREAM, GROUP, *[i for i, _ in rows])


def timed(fn, repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1000)
    return out


async def run(args: argparse.Namespace, settings: Settings) -> dict[str, float]:
    figures: dict[str, float] = {}
    connections = Connections(settings)
    try:
        samples = []
        for _ in range(3):
            t = time.perf_counter()
            plan = await propose(settings, connections, Request("dlq_replay", STREAM, None, "bench", None, None))
            samples.append((time.perf_counter() - t) * 1000)
        figures["propose (ms, median of 3)"] = statistics.median(samples)
        print(f"plan {plan.plan_id}: {len(plan.steps)} steps, {plan.blast_radius.messages} messages, "
              f"{plan.blast_radius.rows} rows, {plan.blast_radius.keys} keys")
        token, _ = mint_token(settings, plan_id=plan.plan_id, plan_sha256=plan.plan_sha256,
                              plan_expires_at=datetime.fromisoformat(plan.expires_at), approver="bench")
        consumer = Consumer(settings.redis.url)
        consumer.start()
        t = time.perf_counter()
        report = await apply_plan(settings, connections, plan.plan_id, token)
        figures["apply (ms)"] = (time.perf_counter() - t) * 1000
        consumer.stop.set()
        consumer.join()
        print(f"apply: {report.status}; " + "; ".join(f"{s.action} {s.status}" for s in report.steps))
        if report.status != "completed":
            print(report.summary_text())
    finally:
        await connections.aclose()
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--dlq", type=int, default=10_000)
    parser.add_argument("--plan", type=int, default=100)
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/8")
    parser.add_argument("--postgres", default="postgresql://postgres@127.0.0.1:5432/postgres")
    args = parser.parse_args()
    print(f"machine: {platform.platform()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    r = redis.Redis.from_url(args.redis)
    if r.dbsize():
        raise SystemExit(f"{args.redis} is not empty: pick an empty logical database with --redis")
    dbname = f"mesh_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(args.postgres, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{dbname}"')
    pg = psycopg.conninfo.make_conninfo(args.postgres, dbname=dbname)
    state = Path(tempfile.mkdtemp(prefix="mesh-bench-"))
    try:
        t = time.perf_counter()
        seed(r, pg, args)
        print(f"seeded {args.entries} entries, {args.dlq} dead letters in {time.perf_counter() - t:.1f} s")
        settings = load_settings(environ={}, overrides={
            "state_dir": str(state / "state"), "redis": {"url": args.redis},
            "services": {"bench": {"postgres": pg}}, "limits": {"max_plan_messages": args.plan},
            "approval": {"secret_file": str(state / "approval.key")}})
        figures = anyio.run(run, args, settings)
        plan_id, sha = "p-20261130-000000-00000000", "0" * 64
        expiry = datetime.now(UTC) + timedelta(hours=1)
        token, _ = mint_token(settings, plan_id=plan_id, plan_sha256=sha, plan_expires_at=expiry, approver="b")
        figures["verify local token (ms)"] = statistics.median(
            timed(lambda: verify_token(settings, token, plan_id=plan_id, plan_sha256=sha), 200))
        public = create_approver_key(state / "k.key", "bench", "bench passphrase 1")
        sig = load_settings(environ={}, overrides={"state_dir": str(state / "state"), "approval": {
            "mode": "signature", "approvers": {"bench": public}}})
        key_load = timed(lambda: load_approver_key(state / "k.key", "bench passphrase 1"), 3)
        figures["load approver key = one passphrase guess (ms)"] = statistics.median(key_load)
        _, key = load_approver_key(state / "k.key", "bench passphrase 1")
        stoken, _ = mint_token(sig, plan_id=plan_id, plan_sha256=sha, plan_expires_at=expiry, approver="bench",
                               private_key=key)
        figures["verify signature token (ms)"] = statistics.median(
            timed(lambda: verify_token(sig, stoken, plan_id=plan_id, plan_sha256=sha), 200))
    finally:
        r.flushdb()
        with psycopg.connect(args.postgres, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')
    goals = {"propose (ms, median of 3)": ("<", 1000), "apply (ms)": ("<", 10_000),
             "verify local token (ms)": ("<", 1), "verify signature token (ms)": ("<", 1),
             "load approver key = one passphrase guess (ms)": (">=", 200)}
    ok = True
    for name, value in figures.items():
        op, goal = goals[name]
        met = value < goal if op == "<" else value >= goal
        ok &= met
        print(f"{name}: {value:.2f}  (goal {op} {goal}: {'OK' if met else 'MISSED'})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
