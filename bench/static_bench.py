"""Benchmark of the static index on a generated workspace of N files (default 20,000) or a real one.

    python bench/static_bench.py [--files 20000] [--queries 300] [--workers N] [--runs 3]
    python bench/static_bench.py --workspace DIR [--runs 5]

Prints, in one run:

- whole processes (:mod:`bench.static_processes`, interleaved, medians of ``--runs``): the
  floor (one Python process parsing every TypeScript file with tree-sitter), cold and warm
  ``mesh-mcp index`` and their ratios to the floor; ``mesh-mcp serve`` ready for
  ``tools/list`` and its first ``analyze_impact`` (``--no-processes`` skips this part);
- in-process floor: the same tree-sitter parse of every file, sequential, in this process;
- parse-only: tree-sitter parse of every file, nothing else, in parallel across the cores
  (the same process pool, start method and chunking as the index): the 20k-file floor;
- cold index: a new IndexService with an empty cache (discover, parse + extract in
  parallel, store in SQLite, link);
- warm index, new process: a new IndexService on the filled cache, nothing changed
  (what ``mesh-mcp impact`` pays); warm in-process: ``refresh()`` again in the same
  service (what the MCP server pays before each call);
- incremental: one file changed, ``refresh()`` in the long-running service (re-parse
  that file and relink), and in a new process; then in a watched service (the server's: the
  events name the file, no walk), wall and CPU min / median / max, a file added and removed;
- analyze_impact p50/p95/max over targets drawn from the catalogue (member names,
  qualified names, values, queues, streams; depth 1 and 2), and list_catalogue;
- peak RSS: of each process a user runs (cold and warm ``mesh-mcp index``; ``mesh-mcp serve``
  after its first analyze_impact and after a file changed, read from /proc), and, said apart,
  of this bench process (it holds several index services at once) and its largest child.

Whole-process figures carry CPU seconds next to wall (a shared machine inflates wall);
``--skip-in-process`` prints only the whole-process part.

Goals at 20,000 files: cold <= 2x parse-only, warm < 5% of cold, incremental < 0.5 s,
query p95 < 20 ms, peak RSS < 600 MB (of the processes a user runs), first analyze_impact
after ``serve`` answered tools/list < 100 ms. On a workspace of 1,000-2,000 files (whole processes):
cold <= 2x the floor, warm <= 1x; ``serve`` ready < 1 s, first analyze_impact < 100 ms.
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import resource
import shutil
import statistics
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.gen_workspace import generate
from bench.static_processes import index_processes, serve_process
from server.config import Conventions
from tools.mesh_index.indexer import pool_context, split_chunks, worker_count
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


def index_items(root: Path) -> list[tuple[str, str]]:
    """(rel, kind) of every file the index reads."""
    return [(f.rel, f.kind) for f in discover(root, Conventions().static.skip_dirs).files]


def parse_in_process(root: Path, items: list[tuple[str, str]]) -> tuple[float, int]:
    """tree-sitter parse of every TypeScript file, sequential, in this process (parsers made first)."""
    from tools.mesh_index.ts_queries import parser

    parser("ts"), parser("tsx")
    start = time.perf_counter()
    n = _parse_chunk(str(root), items)
    return time.perf_counter() - start, n


def parse_only(root: Path, workers: int, items: list[tuple[str, str]]) -> tuple[float, int]:
    chunks = split_chunks(items, workers)
    start = time.perf_counter()
    with ProcessPoolExecutor(max_workers=workers, mp_context=pool_context()) as pool:
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
    ap.add_argument("--runs", type=int, default=3, help="whole-process runs of each kind (medians printed)")
    ap.add_argument("--no-processes", action="store_true", help="skip the whole-process figures")
    ap.add_argument("--skip-in-process", action="store_true",
                    help="only the whole-process figures (floor, cold, warm, serve): a shorter run")
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="mesh-static-bench-"))
    root = args.workspace or tmp / "ws"
    if args.workspace is None:
        t, written = timed(lambda: generate(root, args.files))
        print(f"generated {written} files in {t:.1f} s under {root}")
    cache = tmp / "state"
    conv = Conventions()
    print(f"machine: {os.cpu_count()} cores, Python {sys.version.split()[0]}, workers={args.workers}, "
          f"load average {os.getloadavg()[0]:.1f}; {bytecode_note()}")
    items = index_items(root)
    whole: dict[str, float] = {}
    if not args.no_processes:
        whole = index_processes(root, items, args.runs, tmp / "proc-state")
    if args.skip_in_process:
        if whole:
            probe = IndexService(root, conv, tmp / "proc-state", workers=args.workers)
            entries = probe.catalogue(with_checks=False).entries
            probe.close()
            serve_process(root, tmp / "proc-state", entries[0].value if entries else "x", args.runs,
                          change=change_file(root, items, args.workspace is None))
        return _finish(None, args, tmp)

    seq_s, parsed = parse_in_process(root, items)
    print(f"in-process floor (tree-sitter, sequential, this process): {seq_s:.2f} s for {parsed} files")
    parse_s, parsed = parse_only(root, args.workers, items)
    print(f"parse-only (tree-sitter, {args.workers} processes): {parse_s:.2f} s for {parsed} files")

    svc = IndexService(root, conv, cache, workers=args.workers)
    cold_s, info = timed(svc.refresh)
    print(f"cold index: {cold_s:.2f} s ({info.files} files, {info.parse_errors} parse errors) "
          f"= {cold_s / parse_s:.2f}x parse-only, {cold_s / seq_s:.2f}x in-process floor")

    fresh = IndexService(root, conv, cache, workers=args.workers)
    cpu = time.process_time()
    warm_new_s, info2 = timed(fresh.refresh)
    warm_new_cpu = time.process_time() - cpu
    assert info2.reparsed == 0, info2.reparsed
    fresh.close()
    cpu = time.process_time()
    warm_in_s, info3 = timed(svc.refresh)
    warm_in_cpu = time.process_time() - cpu
    assert info3.reparsed == 0
    print(f"warm index, new process: {warm_new_s:.3f} s, CPU {warm_new_cpu:.3f} s ({100 * warm_new_s / cold_s:.1f}% "
          f"of cold, {warm_new_s / seq_s:.2f}x in-process floor; it checks the manifest, loads nothing); "
          f"in-process: {warm_in_s:.3f} s, CPU {warm_in_cpu:.3f} s ({100 * warm_in_s / cold_s:.1f}% of cold; "
          f"a service that built the index walks)")
    first = IndexService(root, conv, cache, workers=args.workers)
    entries = svc.catalogue(with_checks=False).entries
    some_target = entries[0].value if entries else "x"
    cpu = time.process_time()
    first_s, _r = timed(lambda: first.analyze_impact(some_target))
    first_cpu = time.process_time() - cpu
    first.close()
    print(f"first analyze_impact in a new service on the built index (manifest check and snapshot load included): "
          f"{first_s * 1000:.0f} ms, CPU {first_cpu * 1000:.0f} ms")
    if whole:
        serve_process(root, tmp / "proc-state", some_target, args.runs,
                      change=change_file(root, items, args.workspace is None))
    if args.workspace is not None:
        cat_s, cat = timed(svc.catalogue)
        print(f"list_catalogue with failing checks, first call: {cat_s * 1000:.0f} ms ({len(cat.entries)} entries)")
        return _finish(svc, args, tmp)

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
    print(f"incremental (1 file changed), in-process, walking: median {statistics.median(incr):.3f} s "
          f"(runs: {', '.join(f'{x:.3f}' for x in incr)}); new process: {incr_new_s:.3f} s")
    svc.close()  # one index service in memory at a time: the bench's own peak RSS is then one service's
    del svc
    gc.collect()
    watched_incremental(root, conv, cache, args.workers, target_file, original)
    svc = IndexService(root, conv, cache, workers=args.workers)
    svc.refresh()

    first_cat_s, catalogue = timed(svc.catalogue)
    print(f"list_catalogue with failing checks, first call: {first_cat_s * 1000:.0f} ms")
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
    return _finish(svc, args, tmp)


def watched_incremental(root: Path, conv: Conventions, cache: Path, workers: int, target: Path, original: str,
                        runs: int = 7) -> None:
    """One file changed under the server's shared service (folder watches: the events name the file, no walk).

    Wall and CPU seconds of this process (``time.process_time``: what a quiet machine's wall time would
    be, since the refresh runs on one core), min / median / max of ``runs``; then a file added and
    removed. The service first loads the snapshot, as a restarted server does; its first change loads
    every file's facts (printed apart)."""
    svc = IndexService(root, conv, cache, workers=workers, watch=True)
    svc.refresh()
    target.write_text(original.replace("JOB_2,", "JOB_4,", 1))
    first_s, inf = timed(svc.refresh)
    assert inf.reparsed == 1, inf.reparsed
    walls, cpus = [], []
    for n in range(runs):
        target.write_text(original.replace("JOB_0,", "JOB_4,", 1) if n % 2 == 0 else original)
        cpu = time.process_time()
        t, inf = timed(svc.refresh)
        cpus.append(time.process_time() - cpu)
        assert inf.reparsed == 1, inf.reparsed
        walls.append(t)
    added = target.with_name("bench-added.service.ts")
    added.write_text(original.replace("JOB_0,", "JOB_3,", 1))
    add_s, inf = timed(svc.refresh)
    assert inf.reparsed == 1 and inf.files == len(svc._files)
    added.unlink()
    del_s, _inf = timed(svc.refresh)
    target.write_text(original)
    svc.refresh()
    svc.close()

    def spread(xs: list[float]) -> str:
        return f"{min(xs):.3f} / {statistics.median(xs):.3f} / {max(xs):.3f}"

    print(f"incremental (1 file changed), watched service (the server's), {runs} runs, min / median / max: "
          f"wall {spread(walls)} s, CPU {spread(cpus)} s; first change after a restart (loads the facts): "
          f"{first_s:.3f} s; a file added: {add_s:.3f} s, removed: {del_s:.3f} s")


def bytecode_note() -> str:
    """Whether this checkout's modules run from bytecode (an installed package has it; with
    PYTHONDONTWRITEBYTECODE set and no ``__pycache__``, every process compiles them from source)."""
    root = Path(__file__).resolve().parent.parent
    compiled = any((root / "server" / "__pycache__").glob("config.*.pyc"))
    flag = "set" if os.environ.get("PYTHONDONTWRITEBYTECODE") else "unset"
    state = "compiled" if compiled else "not compiled: each process compiles them from source"
    return f"project bytecode {state} (PYTHONDONTWRITEBYTECODE {flag})"


def change_file(root: Path, items: list[tuple[str, str]], generated: bool) -> Path | None:
    """The file the serve figures edit (and put back): a producer of the generated workspace, else the first
    TypeScript file of the workspace."""
    if generated:
        return next(iter(sorted(root.glob("ms-*/src/*.producer.service.ts"))), None)
    return next((root / rel for rel, kind in items if kind == "ts"), None)


def _finish(svc: IndexService | None, args: argparse.Namespace, tmp: Path) -> int:
    self_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    child_rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"peak RSS of the bench's own processes: this process {self_rss:.0f} MB (the bench, not a process a user "
          f"runs: one index service at a time, beside the in-process parse and what the allocator keeps), "
          f"largest process it waited for {child_rss:.0f} MB (the largest of the whole-process runs, "
          f"`mesh-mcp serve` included, and of the parse workers). The processes a user runs: the `mesh-mcp index` "
          f"and `mesh-mcp serve` peak RSS lines above.")
    print(f"load average at the end: {os.getloadavg()[0]:.1f} (1 min), {os.getloadavg()[1]:.1f} (5 min); "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    if svc is not None:
        svc.close()
    if not args.keep:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
