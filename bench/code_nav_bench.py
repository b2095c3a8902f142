"""Latency of the code-navigation tools on a generated workspace, with ``rg`` on the same question.

    python bench/code_nav_bench.py [--files 5000] [--runs 30]

The workspace is :mod:`bench.gen_workspace` (``--files`` files) plus the test overlay
``tests/fixtures/nav_overlay`` (a proto contract package, a gateway with gRPC clients, @GrpcMethod
handlers, docs), so that every tool has something to find. The index is built once (cold, then
warm); each tool is then timed server-side (the library call the MCP handler runs, apart from the
index refresh every static tool does first, timed on its own line), p50 and p95
over ``--runs`` calls. The reference is ``rg`` answering the same question as closely as a text
search can (declarations by a regex, importers by the module specifier, handlers by the decorator,
Markdown lines by the words), timed the same way; the bench says so when ``rg`` is missing.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.gen_workspace import generate
from server.config import Conventions
from tools.code_nav.dependents import find_dependents
from tools.code_nav.doc_search import search_docs
from tools.code_nav.grpc import analyze_grpc
from tools.code_nav.request_map import request_map
from tools.code_nav.symbol_search import smart_search
from tools.mesh_index.service import IndexService

OVERLAY = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "nav_overlay"


def timed(fn: Callable[[], object], runs: int) -> tuple[float, float]:
    fn()  # the first call pays one-time imports
    samples = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t) * 1000)
    samples.sort()
    return statistics.median(samples), samples[min(len(samples) - 1, int(len(samples) * 0.95))]


def rg(root: Path, *args: str) -> Callable[[], object]:
    return lambda: subprocess.run(["rg", "--no-config", *args], cwd=root, capture_output=True, check=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="mesh-nav-bench-"))
    try:
        root = tmp / "ws"
        written = generate(root, args.files)
        shutil.copytree(OVERLAY, root, dirs_exist_ok=True)
        print(f"workspace: {written} generated files + the nav overlay; {os.cpu_count()} CPUs, "
              f"load {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")
        t = time.perf_counter()
        service = IndexService(root, Conventions(), cache_dir=tmp / "state")
        service.refresh()
        print(f"cold index: {time.perf_counter() - t:.2f} s")
        service.close()
        t = time.perf_counter()
        service = IndexService(root, Conventions(), cache_dir=tmp / "state")
        service.refresh()
        service.all_facts()
        print(f"warm index (new process's first refresh + facts loaded): {time.perf_counter() - t:.2f} s")
        markers = tuple(service.conventions.test_path_markers)
        skip = tuple(service.conventions.skip_dirs)

        def with_refresh(fn: Callable[[], object]) -> Callable[[], object]:
            return fn  # the refresh every static tool runs first is timed on its own line

        cases: list[tuple[str, Callable[[], object], Callable[[], object] | None]] = [
            ("smart_search exact (D3Entity1)",
             with_refresh(lambda: smart_search(service, "D3Entity1", test_markers=markers)),
             rg(root, "-n", "-t", "ts", r"(class|interface|enum|function|const|type)\s+D3Entity1\b")),
            ("smart_search substring (Producer)", with_refresh(lambda: smart_search(service, "Producer", limit=50)),
             rg(root, "-n", "-t", "ts", r"(class|interface|enum|function|const|type)\s+\w*Producer\w*")),
            ("smart_search fuzzy (sendNothing)", with_refresh(lambda: smart_search(service, "sendNothing", fuzzy=True)),
             rg(root, "-n", "-i", "-t", "ts", "sendNothing")),
            ("find_dependents package (@bench/messaging)",
             with_refresh(lambda: find_dependents(service, "@bench/messaging", limit=500)),
             rg(root, "-l", "-t", "ts", "-t", "json", "['\"]@bench/messaging['\"/]")),
            ("find_dependents symbol (EventServiceClient)",
             with_refresh(lambda: find_dependents(service, "EventServiceClient")),
             rg(root, "-l", "-t", "ts", r"\bEventServiceClient\b")),
            ("analyze_grpc EventService", with_refresh(lambda: analyze_grpc(service, "EventService")),
             rg(root, "-n", "-t", "ts", "-g", "*.proto", r"GrpcMethod\('EventService'|getService<\w+>\('EventService'"
                r"|service EventService")),
            ("search_docs 'replay fallback job'", lambda: search_docs(root, skip, "replay fallback job"),
             rg(root, "-n", "-i", "-g", "*.md", "replay|fallback|job")),
            ("request map POST /api/v1/events",
             with_refresh(lambda: request_map(service, "POST /api/v1/events")), None),
            ("(refresh of the unchanged index, before each)", service.refresh, None),
        ]
        have_rg = shutil.which("rg") is not None
        if not have_rg:
            print("rg (ripgrep) is not installed: the reference column is empty (apt-get install ripgrep)")
        print(f"\n{'question':48} {'p50 ms':>8} {'p95 ms':>8} {'rg p50':>8} {'rg p95':>8}   ({args.runs} runs)")
        for name, fn, ref in cases:
            p50, p95 = timed(fn, args.runs)
            if ref is not None and have_rg:
                r50, r95 = timed(ref, args.runs)
                ref_text = f"{r50:8.1f} {r95:8.1f}"
            else:
                ref_text = f"{'-':>8} {'-':>8}"
            print(f"{name:48} {p50:8.1f} {p95:8.1f} {ref_text}")
        service.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
