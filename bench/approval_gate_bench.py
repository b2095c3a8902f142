"""Approval gate benchmark: the costs issue 23 added to propose, approve and apply.

- ``earlier_replay`` (the replay guard) over a target stream whose whole window must be
  scanned: ``--entries`` entries (default 99,500, just under the default scan bound of
  ``[limits]`` max_count 500 x scan_max_iterations 200) and a plan of ``--plan`` messages;
- the audit log: one ``record`` (portable lock, fsync), ``verify`` of the whole log and
  ``head``, on a log of ``--records`` records (default 10,000);
- the trust check (``protection_problems``) of a trust file five folders deep.

    python bench/approval_gate_bench.py --redis redis://127.0.0.1:6379/9

``--redis`` must be an empty logical database; it is flushed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import anyio
import redis
import redis.asyncio as aredis

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from server.approval.audit import AuditLog  # noqa: E402
from server.approval.trust import protection_problems  # noqa: E402
from server.config import load_settings  # noqa: E402
from server.filelocks import lock_kind  # noqa: E402
from tools.remediation.model import ReplayMessage, XAddOp  # noqa: E402
from tools.remediation.replays import earlier_replay  # noqa: E402

STREAM = "stream:bench:guard"


def seed(r: redis.Redis, entries: int) -> None:
    pipe = r.pipeline(transaction=False)
    for i in range(entries):
        event = {"id": str(uuid.uuid4()), "type": "created", "payload": {"n": i}}
        pipe.xadd(STREAM, {"id": event["id"], "type": "created", "event": json.dumps(event)})
        if i % 5000 == 4999:
            pipe.execute()
    pipe.execute()


def timed(fn, runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1000)
    return out


async def guard(url: str, settings, audit: AuditLog, op: XAddOp, runs: int) -> tuple[list[float], list[float]]:
    """(full scans, resumed second looks) in ms: the pre-flight's look, then the step's own re-check."""
    client = aredis.Redis.from_url(url)
    full, resumed = [], []
    try:
        for _ in range(runs):
            scanned: dict[str, str] = {}
            for out in (full, resumed):
                t = time.perf_counter()
                problem = await earlier_replay(client, settings, audit, "p-bench", op, 0, scanned)
                out.append((time.perf_counter() - t) * 1000)
                assert problem is None, problem
    finally:
        await client.aclose()
    return full, resumed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=99_500)
    parser.add_argument("--plan", type=int, default=100)
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/9")
    args = parser.parse_args()
    print(f"machine: {platform.platform()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"lock {lock_kind()}")
    r = redis.Redis.from_url(args.redis)
    if r.dbsize():
        raise SystemExit(f"{args.redis} is not empty: pick an empty logical database with --redis")
    state = Path(tempfile.mkdtemp(prefix="mesh-gate-bench-"))
    figures: dict[str, float] = {}
    try:
        seed(r, args.entries)
        settings = load_settings(environ={}, overrides={"state_dir": str(state), "redis": {"url": args.redis}})
        messages = [ReplayMessage(dlq_key=f"{STREAM}-dlq", dlq_id=f"1-{i}", message_id=f"1-{i}", source="stream",
                                  fields=[("id", str(uuid.uuid4())), ("type", "created"), ("event", "{}")])
                    for i in range(args.plan)]
        op = XAddOp(stream=STREAM, maxlen=None, messages=messages)
        audit = AuditLog(state / "audit.log")
        record = timed(lambda: audit.record("step", plan_id="p-bench", result="done", detail="x" * 200), args.records)
        figures[f"audit record (ms, median of {args.records})"] = statistics.median(record)
        figures["audit record p95 (ms)"] = sorted(record)[int(len(record) * 0.95)]
        figures[f"audit verify of {args.records} records (ms)"] = statistics.median(timed(audit.verify, 3))
        figures["audit head (ms)"] = statistics.median(timed(audit.head, 100))
        full, resumed = anyio.run(guard, args.redis, settings, audit, op, 3)
        figures[f"replay guard, {args.entries} entries scanned + audit tail (ms, median of 3)"] = statistics.median(
            full)
        figures["replay guard, the step's re-check resuming the scan (ms)"] = statistics.median(resumed)
        deep = state / "a" / "b" / "c" / "d" / "trust.toml"
        deep.parent.mkdir(parents=True)
        deep.write_text("[approvers]\n")
        figures["trust check, 5 folders deep (ms)"] = statistics.median(
            timed(lambda: protection_problems(deep, uid=os.geteuid() + 4242, gids=set()), 100))
    finally:
        r.flushdb()
    for name, value in figures.items():
        print(f"{name}: {value:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
