"""visualize_mesh on a generated workspace: time and size per format (no goal in the issue; a record).

    python -m bench.mesh_bench [--files 5000]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from bench.gen_workspace import generate
from server.config import Conventions
from tools.mesh_index.service import IndexService
from tools.pictures.service import visualize


def main() -> int:
    ap = argparse.ArgumentParser(description="visualize_mesh benchmark")
    ap.add_argument("--files", type=int, default=5000)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="mesh-graph-bench-"))
    written = generate(tmp / "ws", args.files)
    svc = IndexService(tmp / "ws", Conventions(), tmp / "state")
    info = svc.refresh()
    print(f"machine: {os.cpu_count()} cores, Python {sys.version.split()[0]}; {written} files, {info.files} indexed")
    for fmt in ("mermaid", "json", "html", "mermaid"):
        t0 = time.perf_counter()
        graph = visualize(svc, fmt)
        ms = (time.perf_counter() - t0) * 1000
        size = len(graph.mermaid or graph.html or graph.model_dump_json())
        print(f"{fmt}: {ms:.0f} ms, {size} bytes; {graph.counts}, folded {graph.folded}")
    svc.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
