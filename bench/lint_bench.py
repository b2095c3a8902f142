"""Benchmark of lint_flows on a generated workspace (bench/gen_workspace.py shapes) or an existing one.

    python bench/lint_bench.py [--files 5000] [--workspace DIR] [--runs 3]

Prints the index build time (for scale), the time of each lint run over the built index
(every code, info included; each run re-reads and re-parses what the checks need), the
findings per code of the last run, and the peak RSS of the process.
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

from bench.gen_workspace import generate
from server.config import Conventions
from tools.lint.engine import lint
from tools.mesh_index.service import IndexService


def main() -> int:
    ap = argparse.ArgumentParser(description="lint_flows benchmark")
    ap.add_argument("--files", type=int, default=5000)
    ap.add_argument("--workspace", type=Path, help="lint an existing workspace instead of generating one")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = args.workspace
        if root is None:
            root = Path(tmp) / "ws"
            written = generate(root, args.files)
            print(f"generated {written} files")
        service = IndexService(root, Conventions(), cache_dir=Path(tmp) / "cache")
        started = time.perf_counter()
        info = service.refresh()
        print(f"index: {info.files} files in {time.perf_counter() - started:.2f} s")
        times = []
        report = None
        for _ in range(args.runs):
            started = time.perf_counter()
            report = lint(service, min_severity="info")
            times.append(time.perf_counter() - started)
        assert report is not None
        print(f"lint (every code, info included): median {statistics.median(times):.2f} s, "
              f"max {max(times):.2f} s over {args.runs} run(s)")
        print(f"findings: {report.summary.total} {report.summary.by_severity}")
        for code, count in report.summary.by_code.items():
            print(f"  {code}: {count}")
        for note in report.notes:
            print(f"note: {note}")
        service.close()
    print(f"peak RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
