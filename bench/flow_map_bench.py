"""flow_map benchmark: picture time and size for every job and event of a generated workspace.

Generates a workspace (bench/gen_workspace.py), builds the index once, then draws the static
picture of every job and event type of the catalogue (at most ``--targets``) at depth 3 and 5,
and prints p50 / p95 / max of the time per picture (index already warm: graph, folding,
Mermaid), the largest picture in bytes, and how many pictures had to fold fan-out.

Usage: ``python bench/flow_map_bench.py --files 5000 [--targets 300]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.gen_workspace import generate
from server.config import Conventions
from tools.flow_map.service import MAX_BYTES, build_map
from tools.mesh_index.service import IndexService


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> int:
    ap = argparse.ArgumentParser(description="flow_map benchmark")
    ap.add_argument("--files", type=int, default=5000)
    ap.add_argument("--targets", type=int, default=300)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="mesh-flow-bench-"))
    written = generate(tmp / "ws", args.files)
    svc = IndexService(tmp / "ws", Conventions(), tmp / "state")
    started = time.perf_counter()
    info = svc.refresh()
    print(f"machine: {os.cpu_count()} cores, Python {sys.version.split()[0]}; {written} files generated, "
          f"indexed in {time.perf_counter() - started:.1f} s ({info.files} files)")
    entries = [e for e in svc.catalogue(with_checks=False).entries if e.kind in ("job", "event")][: args.targets]
    for depth in (3, 5):
        times, sizes, folded, over = [], [], 0, 0
        for e in entries:
            t0 = time.perf_counter()
            result, _graph = build_map(svc, e.value, depth, "LR")
            times.append((time.perf_counter() - t0) * 1000)
            sizes.append(result.mermaid_bytes)
            folded += bool(result.folded)
            over += result.mermaid_bytes > MAX_BYTES
        print(f"depth {depth}: {len(entries)} pictures, p50 {pct(times, 0.5):.2f} ms, p95 {pct(times, 0.95):.2f} ms, "
              f"max {max(times):.2f} ms; largest {max(sizes)} bytes (budget {MAX_BYTES}), "
              f"{folded} folded, {over} over budget")
    svc.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
