"""Benchmark of plan_flow on the generated workspace of bench/verify_bench.py.

    python bench/plan_flow_bench.py [--domains 20] [--jobs-per-domain 40] [--events-per-domain 10] [--samples 40]

Generates the same workspace as the verify_flow bench (per domain a job enum, queue and
event enums, a service producing every job and event, a handler file per job, a worker, an
app module, a post-processor), indexes it with the real static index, then prints the
latency of plan_flow for a new job and a new event in each sampled domain (p50 / p95 / max;
the first call of an index build pays for the registry and module scans and shows as the
max), and the peak RSS of the process.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.verify_bench import generate, pct
from server.config import Conventions
from tools.mesh_index.service import IndexService
from tools.plan_flow.service import plan_flow


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--domains", type=int, default=20)
    parser.add_argument("--jobs-per-domain", type=int, default=40)
    parser.add_argument("--events-per-domain", type=int, default=10)
    parser.add_argument("--samples", type=int, default=40, help="plan_flow calls timed per kind")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mesh-plan-bench-") as tmp:
        root = Path(tmp) / "ws"
        jobs, events = generate(root, args.domains, args.jobs_per_domain, args.events_per_domain)
        files = sum(1 for p in root.rglob("*") if p.is_file())
        print(f"workspace: {files} files, {len(jobs)} job types, {len(events)} event types")
        index = IndexService(root, Conventions(), cache_dir=Path(tmp) / "cache")
        started = time.perf_counter()
        index.refresh()
        print(f"index cold build: {time.perf_counter() - started:.2f} s")
        for kind in ("job", "event"):
            timings, steps = [], 0
            for i in range(args.samples):
                domain = f"d{i % args.domains}"
                t0 = time.perf_counter()
                plan = plan_flow(index, kind, f"BENCH_NEW_{i}", domain)
                timings.append((time.perf_counter() - t0) * 1000)
                steps += sum(len(p.steps) for p in plan.phases)
            print(
                f"plan_flow ({kind}, {len(timings)} calls, {steps / len(timings):.1f} steps each): "
                f"p50 {statistics.median(timings):.1f} ms, p95 {pct(timings, 0.95):.1f} ms, "
                f"max {max(timings):.1f} ms"
            )
        index.close()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS: {rss:.0f} MB")


if __name__ == "__main__":
    main()
