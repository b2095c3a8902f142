"""Benchmark of the static index on a generated workspace of N files (default 20,000).

    python bench/static_bench.py [--files 20000] [--workspace DIR] [--queries 300] [--workers N]

Prints, in one run:

- parse-only: tree-sitter parse of every file, nothing else, in parallel across the cores
  (the same process pool and chunking as the index): the floor;
- cold index: a new IndexService with an empty cache (discover, parse + extract in
  parallel, store in SQLite, link);
- warm index, new process: a new IndexService on the filled cache, nothing changed
  (what ``mesh-mcp impact`` pays); warm in-process: ``refresh()`` again in the same
  service (what the MCP server pays before each call);
- incremental: one file changed, ``refresh()`` in the long-running service (re-parse
  that file and relink), and in a new process;
- analyze_impact p50/p95/max over targets drawn from the catalogue (member names,
  qualified names, values, queues, streams; depth 1 and 2), and list_catalogue;
- peak RSS of this process and of the largest worker process.

Goals at 20,000 files: cold <= 2x parse-only, warm < 5% of cold, incremental < 0.5 s,
query p95 < 20 ms, peak RSS < 600 MB.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import statistics
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.gen_workspace import generate
from server.config import Conventions
from tools.mesh_index.indexer import CHUNK, worker_count
from tools.mesh_index.service import IndexService
from tools.mesh_index.workspace import discover


def _parse_chunk(root: str, items: list[tuple[str, str]]) -> int:
    from tools.mesh_index.ts_queries import parser

    n = 0
    for rel, kind in items:
        if kind not in ("ts", "tsx"):
            continue
        with open(os.path.join(root, rel), "rb") as fh:
            parser(kind).parse(fh.read())
        n += 1
    return n


def parse_only(root: Path, workers: int) -> tuple[float, int]:
    found = discover(root, Conventions().static.skip_dirs)
    items = [(f.rel, f.kind) for f in found.files]
    chunks = [items[i:i + CHUNK] for i in range(0, len(items), CHUNK)]
    start = time.perf_counter()
    with ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn")) as pool:
        parsed = sum(pool.map(_parse_chunk, [str(root)] * len(chunks), chunks))
    return time.perf_counter() - start, parsed


def timed(fn):
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, round(q * (len(values) - 1)))]


def main() -> int:
    ap = argparse.ArgumentParser(description="static index benchmark")
    ap.add_argument("--files", type=int, default=20000)
    ap.add_argument("--workspace", type=Path, help="benchmark an existing workspace instead of generating one")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--workers", type=int, default=worker_count())
    ap.add_argument("--keep", action="store_true", help="keep the generated workspace")
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="mesh-static-bench-"))
    root = args.workspace or tmp / "ws"
    if args.workspace is None:
        t, written = timed(lambda: generate(root, args.files))
        print(f"generated {written} files in {t:.1f} s under {root}")
    cache = tmp / "state"
    conv = Conventions()
    print(f"machine: {os.cpu_count()} cores, Python {sys.version.split()[0]}, workers={args.workers}")

    parse_s, parsed = parse_only(root, args.workers)
    print(f"parse-only (tree-sitter, {args.workers} processes): {parse_s:.2f} s for {parsed} files")

    svc = IndexService(root, conv, cache, workers=args.workers)
    cold_s, info = timed(svc.refresh)
    print(f"cold index: {cold_s:.2f} s ({info.files} files, {info.parse_errors} parse errors) "
          f"= {cold_s / parse_s:.2f}x parse-only")

    fresh = IndexService(root, conv, cache, workers=args.workers)
    warm_new_s, info2 = timed(fresh.refresh)
    assert info2.reparsed == 0, info2.reparsed
    fresh.close()
    warm_in_s, info3 = timed(svc.refresh)
    assert info3.reparsed == 0
    print(f"warm index, new process: {warm_new_s:.3f} s ({100 * warm_new_s / cold_s:.1f}% of cold); "
          f"in-process: {warm_in_s:.3f} s ({100 * warm_in_s / cold_s:.1f}% of cold)")

    target_file = next(p for p in sorted(root.glob("ms-*/src/*.producer.service.ts")))
    original = target_file.read_text()
    incr = []
    for n in range(3):
        target_file.write_text(original.replace("JOB_0,", "JOB_4,", 1) if n % 2 == 0 else original)
        t, inf = timed(svc.refresh)
        assert inf.reparsed == 1, inf.reparsed
        incr.append(t)
    target_file.write_text(original.replace("JOB_1,", "JOB_4,", 1))
    other = IndexService(root, conv, cache, workers=args.workers)
    incr_new_s, inf = timed(other.refresh)
    assert inf.reparsed == 1
    other.close()
    svc.refresh()
    print(f"incremental (1 file changed), in-process: median {statistics.median(incr):.3f} s "
          f"(runs: {', '.join(f'{x:.3f}' for x in incr)}); new process: {incr_new_s:.3f} s")

    catalogue = svc.catalogue()
    rng = random.Random(7)
    entries = catalogue.entries
    targets = []
    for e in rng.sample(entries, min(len(entries), args.queries)):
        targets.append(rng.choice([e.value, e.name, e.name.split(".")[-1]]))
    for depth in (1, 2):
        times = []
        for t in targets:
            start = time.perf_counter()
            svc.analyze_impact(t, depth=depth)
            times.append((time.perf_counter() - start) * 1000)
        print(f"analyze_impact depth {depth} over {len(times)} targets: p50 {pct(times, 0.5):.2f} ms, "
              f"p95 {pct(times, 0.95):.2f} ms, max {max(times):.2f} ms")
    cat_s, cat = timed(svc.catalogue)
    print(f"list_catalogue: {cat_s * 1000:.0f} ms ({len(cat.entries)} entries, {cat.orphans} orphans)")
    self_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    child_rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"peak RSS: this process {self_rss:.0f} MB, largest worker process {child_rss:.0f} MB")
    svc.close()
    if not args.keep:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
