"""Every row of "start and answer faster than the Rust server", each against its reference, in one run.

    python -m bench.agent_speed [--files 1500 | --workspace DIR] [--runs 5] [--copies 1,2,8]

Whole processes only, as an agent's client pays them; each figure next to the reference it is
measured against in the same minutes (runs interleaved, medians):

1. ``mesh-mcp serve`` start to ``tools/list`` answered, index cached: in-process
   (``--standalone``), through the shared server when it is already running (a second editor
   window), and the first client that has to start it; reference: a process that only imports
   the MCP SDK. Goal: <= 0.5x.
2. the first ``analyze_impact`` after such a start. Goal: <= 20 ms.
3. a repeated ``analyze_impact`` over stdio, median of 50 in one session; reference: the round
   trip of an unknown tool's call in the same session (the client's floor). Goal: <= 2 ms above.
4. cold and warm ``mesh-mcp index`` against one process of tree-sitter's own parse of the same
   files. Goals: cold <= 1.5x, warm <= 0.3x.
5. ``mesh-mcp lint`` on the workspace and on 2 and 8 copies of it side by side, against the cold
   index of the same files. Goals: <= the cold index; time per file flat (linear).
6. two editor windows on one workspace: how many processes hold an index. Goal: one.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.gen_workspace import generate
from bench.static_processes import SDK_IMPORT, _Stdio, console_script, index_processes, run_process
from server.config import Conventions
from tools.mesh_index.service import IndexService
from tools.mesh_index.workspace import discover


def _med(values: list[float]) -> float:
    return statistics.median(values)


def _sdk_import() -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", SDK_IMPORT], check=True)
    return time.perf_counter() - start


def _a_target(root: Path, state: Path) -> str:
    service = IndexService(root, Conventions(), cache_dir=state / "bench-target")
    try:
        entries = [e for e in service.catalogue(with_checks=False).entries if e.kind == "job"]
        return entries[0].value if entries else "no.such.target"
    finally:
        service.close()


def _session(root: Path, env: dict[str, str], *extra: str) -> tuple[_Stdio, float]:
    start = time.perf_counter()
    session = _Stdio([*console_script(), "serve", "--workspace", str(root), *extra], env)
    session.list_tools("agent-speed")
    return session, time.perf_counter() - start


def _call(session: _Stdio, name: str, arguments: dict) -> float:
    start = time.perf_counter()
    with contextlib.suppress(RuntimeError):  # the unknown tool's error is the floor's answer
        session.send("tools/call", {"name": name, "arguments": arguments})
    return time.perf_counter() - start


def _kill_shared(runtime: Path) -> None:
    for pid_file in runtime.glob("*.pid"):
        with contextlib.suppress(OSError, ValueError, psutil.Error):
            psutil.Process(int(pid_file.read_text())).kill()
    time.sleep(0.2)


def serve_rows(root: Path, state: Path, target: str, runs: int) -> None:
    runtime = Path(tempfile.mkdtemp(prefix="mesh-agent-speed-run-"))
    env = {k: v for k, v in os.environ.items() if k != "MESH_STANDALONE"}
    env["MESH_STATE_DIR"] = str(state)
    shared = ("--runtime-dir", str(runtime))
    rows: dict[str, list[float]] = {k: [] for k in (
        "sdk", "standalone", "shared_first", "shared_next", "first_standalone", "first_shared", "floor", "repeat")}
    try:
        for _ in range(runs):
            rows["sdk"].append(_sdk_import())
            session, ready = _session(root, env, "--standalone")
            rows["standalone"].append(ready)
            rows["first_standalone"].append(_call(session, "analyze_impact", {"target": target}))
            session.close()
            _kill_shared(runtime)
            session, ready = _session(root, env, *shared)
            rows["shared_first"].append(ready)
            session.close()
            session, ready = _session(root, env, *shared)
            rows["shared_next"].append(ready)
            rows["first_shared"].append(_call(session, "analyze_impact", {"target": target}))
            floor = [_call(session, "no_such_tool", {}) for _ in range(50)]
            repeat = [_call(session, "analyze_impact", {"target": target}) for _ in range(50)]
            rows["floor"].append(_med(floor))
            rows["repeat"].append(_med(repeat))
            session.close()
    finally:
        _kill_shared(runtime)
        shutil.rmtree(runtime, ignore_errors=True)
    sdk = _med(rows["sdk"])
    ms = lambda v: f"{v * 1000:.1f} ms"  # noqa: E731
    print(f"1. serve start to tools/list (index cached), reference: SDK import alone {sdk:.3f} s")
    for key, label in (("standalone", "in-process (--standalone)"), ("shared_next", "shared server running"),
                       ("shared_first", "first client, starts the shared server")):
        print(f"   {label}: {_med(rows[key]):.3f} s = {_med(rows[key]) / sdk:.2f}x (goal <= 0.5x)"
              f"  runs: {', '.join(f'{v:.3f}' for v in rows[key])}")
    print(f"2. first analyze_impact({target!r}) after the start: in-process {ms(_med(rows['first_standalone']))}, "
          f"shared {ms(_med(rows['first_shared']))} (goal <= 20 ms)")
    floor, repeat = _med(rows["floor"]), _med(rows["repeat"])
    print(f"3. repeated analyze_impact over stdio (shared): {ms(repeat)}; unknown tool's round trip {ms(floor)}: "
          f"{ms(repeat - floor)} above the floor (goal <= 2 ms)")


def _copies(root: Path, n: int, into: Path) -> Path:
    if n == 1:
        return root
    out = into / f"copies-{n}"
    if not out.exists():
        for i in range(n):
            shutil.copytree(root, out / f"copy-{i}", symlinks=True)
    return out


def lint_rows(root: Path, copies: list[int], runs: int, scratch: Path) -> None:
    print("5. mesh-mcp lint against the cold index of the same files (whole processes)")
    per_file = []
    for n in copies:
        ws = _copies(root, n, scratch)
        files = len(discover(ws, Conventions().static.skip_dirs).files)
        lint, cold = [], []
        for _ in range(runs):
            state = scratch / f"state-{n}"
            shutil.rmtree(state, ignore_errors=True)
            env = {**os.environ, "MESH_STATE_DIR": str(state)}
            cold.append(run_process([*console_script(), "index", "--workspace", str(ws)], env)[0])
            lint.append(_lint(ws, env))
        per_file.append(_med(lint) / files)
        print(f"   {n} cop{'y' if n == 1 else 'ies'} ({files} files): lint {_med(lint):.2f} s, cold index "
              f"{_med(cold):.2f} s = {_med(lint) / _med(cold):.2f}x (goal <= 1x); {per_file[-1] * 1000:.2f} ms a file")
    if len(per_file) > 1:
        print(f"   time per file, largest / smallest set: {per_file[-1] / per_file[0]:.2f} (linear: about 1)")


def _lint(ws: Path, env: dict[str, str]) -> float:
    """A lint run's wall time; lint exits 1 when it finds errors, which is not a failure here."""
    start = time.perf_counter()
    subprocess.run([*console_script(), "lint", "--workspace", str(ws)], env=env, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - start


def windows_row(root: Path, state: Path) -> None:
    runtime = Path(tempfile.mkdtemp(prefix="mesh-agent-speed-win-"))
    env = {k: v for k, v in os.environ.items() if k != "MESH_STANDALONE"}
    env["MESH_STATE_DIR"] = str(state)
    try:
        a, _ = _session(root, env, "--runtime-dir", str(runtime))
        b, _ = _session(root, env, "--runtime-dir", str(runtime))
        holders = [p for p in psutil.process_iter(["cmdline"])
                   if "--shared-daemon" in (p.info["cmdline"] or []) and str(runtime) in " ".join(p.info["cmdline"])]
        rss = sum(p.memory_info().rss for p in holders) / 2**20
        print(f"6. two editor windows on one workspace: {len(holders)} process(es) hold an index "
              f"({rss:.0f} MB resident) (goal: one)")
        a.close()
        b.close()
    finally:
        _kill_shared(runtime)
        shutil.rmtree(runtime, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=1500, help="size of the generated workspace (default 1500)")
    ap.add_argument("--workspace", type=Path, help="measure an existing workspace instead")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--copies", default="1,2,8", help="lint on these numbers of copies side by side")
    args = ap.parse_args(argv)
    scratch = Path(tempfile.mkdtemp(prefix="mesh-agent-speed-"))
    try:
        root = args.workspace.resolve() if args.workspace else scratch / "ws"
        if args.workspace is None:
            generate(root, args.files)
        state = scratch / "state"
        load, version = os.getloadavg()[0], sys.version.split()[0]
        print(f"workspace {root}; {os.cpu_count()} cores; load {load:.1f}; Python {version}")
        print("4. index against tree-sitter's own parse of the same files (goals: cold <= 1.5x, warm <= 0.3x)")
        items = [(f.rel, f.kind) for f in discover(root, Conventions().static.skip_dirs).files]
        index_processes(root, items, args.runs, state)
        target = _a_target(root, scratch)
        serve_rows(root, state, target, args.runs)
        lint_rows(root, [int(n) for n in args.copies.split(",")], max(1, args.runs // 2), scratch)
        windows_row(root, state)
        print(f"load at the end {os.getloadavg()[0]:.1f}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
