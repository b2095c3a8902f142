"""Every row of "start and answer faster than the Rust server", each against its reference, in one run.

    python -m bench.agent_speed                      # the three workspaces of the issue (below)
    python -m bench.agent_speed --workspace DIR      # one existing workspace (a copy of yours)
    python -m bench.agent_speed --files 5000         # one generated workspace of that size

Options: ``--runs N`` (default 5), ``--copies 1,2,8`` (lint on the first workspace's copies),
``--tarballs DIR`` (the npm tarballs of the real-shaped workspace, else ``npm pack`` fetches them).

By default three workspaces, one after the other: the real-shaped 1,500-file one
(:mod:`bench.mixed_workspace`: TypeScript of npm packages, this repository's fixture workspaces
of the target system, generated files up to 1,500) and generated ones of 5,000 and 20,000 files
(:mod:`bench.gen_workspace`). Whole processes only, as an agent's client pays them; each figure
next to the reference it is measured against in the same minutes (runs interleaved, medians):

1. ``mesh-mcp serve`` start to ``tools/list`` answered, index cached: in-process
   (``--standalone``), through the shared server when it is already running (a second editor
   window), the first client after the shared server's idle exit (answered from the last
   session's handshake record while a new one starts) and the first client ever (no record);
   reference: a process that only imports the MCP SDK. Goal: <= 0.5x.
2. the first ``analyze_impact`` after such a start. Goal: <= 20 ms.
3. a repeated ``analyze_impact`` over stdio, median of 50 in one session; reference: the round
   trip of an unknown tool's call in the same session (the client's floor). Goal: <= 2 ms above.
4. cold and warm ``mesh-mcp index`` against one process of tree-sitter's own parse of the same
   files. Goals: cold <= 1.5x, warm <= 0.3x.
5. ``mesh-mcp lint`` on the workspace (and, on the first one, on 2 and 8 copies of it side by
   side), against the cold index of the same files. Goals: <= the cold index; time per file flat.
6. two editor windows on one workspace: how many processes hold an index. Goal: one.

It ends with one line per goal and workspace: the figure, the goal, and whether it holds.
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


def serve_rows(root: Path, state: Path, target: str, runs: int) -> dict[str, float]:
    runtime = Path(tempfile.mkdtemp(prefix="mesh-agent-speed-run-"))
    env = {k: v for k, v in os.environ.items() if k != "MESH_STANDALONE"}
    env["MESH_STATE_DIR"] = str(state)
    shared = ("--runtime-dir", str(runtime))
    rows: dict[str, list[float]] = {k: [] for k in (
        "sdk", "standalone", "shared_new", "shared_first", "first_after_idle", "shared_next", "first_standalone",
        "first_shared", "floor", "repeat")}
    try:
        for _ in range(runs):
            rows["sdk"].append(_sdk_import())
            session, ready = _session(root, env, "--standalone")
            rows["standalone"].append(ready)
            rows["first_standalone"].append(_call(session, "analyze_impact", {"target": target}))
            session.close()
            _kill_shared(runtime)
            for record in runtime.glob("*.hello.json"):  # a workspace never served before: no handshake record
                record.unlink()
            session, ready = _session(root, env, *shared)
            rows["shared_new"].append(ready)
            session.close()
            _kill_shared(runtime)  # an idle exit: the record of the last session is kept
            session, ready = _session(root, env, *shared)
            rows["shared_first"].append(ready)  # answered from the record: its first call waits for the server
            rows["first_after_idle"].append(_call(session, "analyze_impact", {"target": target}))
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
                       ("shared_first", "first client after an idle exit (answered from the record)"),
                       ("shared_new", "first client ever (no record: waits for the shared server)")):
        print(f"   {label}: {_med(rows[key]):.3f} s = {_med(rows[key]) / sdk:.2f}x (goal <= 0.5x)"
              f"  runs: {', '.join(f'{v:.3f}' for v in rows[key])}")
    print(f"2. first analyze_impact({target!r}) after the start: in-process {ms(_med(rows['first_standalone']))}, "
          f"shared {ms(_med(rows['first_shared']))} (goal <= 20 ms); the first client after an idle exit, whose "
          f"tools/list the record answered, waits for the new shared server: {ms(_med(rows['first_after_idle']))}")
    floor, repeat = _med(rows["floor"]), _med(rows["repeat"])
    print(f"3. repeated analyze_impact over stdio (shared): {ms(repeat)}; unknown tool's round trip {ms(floor)}: "
          f"{ms(repeat - floor)} above the floor (goal <= 2 ms)")
    return {key: _med(values) for key, values in rows.items()}


def _copies(root: Path, n: int, into: Path) -> Path:
    if n == 1:
        return root
    out = into / f"copies-{n}"
    if not out.exists():
        for i in range(n):
            shutil.copytree(root, out / f"copy-{i}", symlinks=True)
    return out


def lint_rows(root: Path, copies: list[int], runs: int, scratch: Path) -> list[tuple[int, int, float, float]]:
    """(copies, files, lint s, cold index s) for each number of copies."""
    print("5. mesh-mcp lint against the cold index of the same files (whole processes)")
    per_file, out = [], []
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
        out.append((n, files, _med(lint), _med(cold)))
        print(f"   {n} cop{'y' if n == 1 else 'ies'} ({files} files): lint {_med(lint):.2f} s, cold index "
              f"{_med(cold):.2f} s = {_med(lint) / _med(cold):.2f}x (goal <= 1x); {per_file[-1] * 1000:.2f} ms a file")
    if len(per_file) > 1:
        print(f"   time per file, largest / smallest set: {per_file[-1] / per_file[0]:.2f} (linear: about 1)")
    return out


def _lint(ws: Path, env: dict[str, str]) -> float:
    """A lint run's wall time; lint exits 1 when it finds errors, which is not a failure here."""
    start = time.perf_counter()
    subprocess.run([*console_script(), "lint", "--workspace", str(ws)], env=env, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - start


def windows_row(root: Path, state: Path) -> int:
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
        return len(holders)
    finally:
        _kill_shared(runtime)
        shutil.rmtree(runtime, ignore_errors=True)


def measure(name: str, root: Path, runs: int, copies: list[int], scratch: Path) -> list[tuple[str, str, str, bool]]:
    """Every row on one workspace; the verdicts (row, figure, goal, holds)."""
    state = scratch / f"state-{name}"
    items = [(f.rel, f.kind) for f in discover(root, Conventions().static.skip_dirs).files]
    print(f"\n== {name}: {root} ({len(items)} files); load {os.getloadavg()[0]:.1f}")
    print("4. index against tree-sitter's own parse of the same files (goals: cold <= 1.5x, warm <= 0.3x)")
    index = index_processes(root, items, runs, state)
    target = _a_target(root, scratch / f"target-{name}")
    serve = serve_rows(root, state, target, runs)
    lint = lint_rows(root, copies, max(1, runs // 2), scratch / f"lint-{name}")
    holders = windows_row(root, state)
    cold, warm = index["cold"] / index["floor"], index["warm"] / index["floor"]
    start = serve["shared_next"] / serve["sdk"]
    after_idle = serve["shared_first"] / serve["sdk"]
    above = (serve["repeat"] - serve["floor"]) * 1000
    rows = [
        ("serve start, shared server running / SDK import", f"{start:.2f}x", "<= 0.5x", start <= 0.5),
        ("serve start, first client after an idle exit / SDK import", f"{after_idle:.2f}x", "<= 0.5x",
         after_idle <= 0.5),
        ("first analyze_impact (shared)", f"{serve['first_shared'] * 1000:.1f} ms", "<= 20 ms",
         serve["first_shared"] <= 0.020),
        ("repeated analyze_impact above the round-trip floor", f"{above:.1f} ms", "<= 2 ms", above <= 2.0),
        ("cold index / parse", f"{cold:.2f}x", "<= 1.5x", cold <= 1.5),
        ("warm index / parse", f"{warm:.2f}x", "<= 0.3x", warm <= 0.3),
    ]
    for n, files, lint_s, cold_s in lint:
        rows.append((f"lint / cold index, {n} cop{'y' if n == 1 else 'ies'} ({files} files)",
                     f"{lint_s / cold_s:.2f}x", "<= 1x", lint_s <= cold_s))
    if len(lint) > 1:
        growth = (lint[-1][2] / lint[-1][1]) / (lint[0][2] / lint[0][1])
        rows.append(("lint time per file, most / fewest copies", f"{growth:.2f}", "about 1 (linear)", growth <= 1.3))
    rows.append(("processes holding an index, two windows", str(holders), "1", holders == 1))
    return [(f"{name}: {row}", figure, goal, ok) for row, figure, goal, ok in rows]


def _workspaces(args: argparse.Namespace, scratch: Path) -> list[tuple[str, Path]]:
    if args.workspace is not None:
        return [(args.workspace.name, args.workspace.resolve())]
    if args.files is not None:
        generate(scratch / "ws", args.files)
        return [(f"generated {args.files}", scratch / "ws")]
    from bench.mixed_workspace import build, fetch

    real = scratch / "real-shaped"
    with tempfile.TemporaryDirectory() as tmp:
        tarballs = sorted(args.tarballs.glob("*.tgz")) if args.tarballs else fetch(Path(tmp))
        build(real, 1500, tarballs)
    out = [("real-shaped 1500", real)]
    for n in (5000, 20000):
        generate(scratch / f"gen-{n}", n)
        out.append((f"generated {n}", scratch / f"gen-{n}"))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, help="one generated workspace of this size")
    ap.add_argument("--workspace", type=Path, help="measure an existing workspace instead")
    ap.add_argument("--tarballs", type=Path, help="npm *.tgz for the real-shaped workspace (default: npm pack)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--copies", default="1,2,8", help="lint on these numbers of copies of the first workspace")
    args = ap.parse_args(argv)
    scratch = Path(tempfile.mkdtemp(prefix="mesh-agent-speed-"))
    try:
        print(f"{os.cpu_count()} cores; Python {sys.version.split()[0]}; load {os.getloadavg()[0]:.1f}")
        verdicts = []
        for i, (name, root) in enumerate(_workspaces(args, scratch)):
            copies = [int(n) for n in args.copies.split(",")] if i == 0 else [1]
            verdicts += measure(name, root, args.runs, copies, scratch)
        print(f"\nload at the end {os.getloadavg()[0]:.1f}\ngoals:")
        width = max(len(v[0]) for v in verdicts)
        for row, figure, goal, ok in verdicts:
            print(f"  {row:<{width}}  {figure:>9}  goal {goal:<16} {'holds' if ok else 'DOES NOT HOLD'}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
