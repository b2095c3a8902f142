"""Whole-process figures of the static index, for ``bench/static_bench.py``.

Every figure here is the wall time of a new process, interpreter start included, as a user
pays it:

- floor: one Python process that imports tree-sitter and parses every TypeScript file of the
  workspace (the files the index parses, listed beforehand), nothing else;
- cold: ``mesh-mcp index --workspace DIR`` with an empty state folder (``MESH_STATE_DIR``);
- warm: the same command again on the filled state folder, nothing changed;
- serve: ``mesh-mcp serve --workspace DIR`` over stdio until the answer to ``tools/list``
  (initialize, initialized, tools/list), then the first ``analyze_impact`` call on the index
  built by the runs above.

The runs are interleaved (floor, cold, warm, floor, ...) so that the machine's load hits
them alike; medians and the ratios of medians are printed, with every run.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FLOOR_SCRIPT = """
import sys
import tree_sitter_typescript as tst
from tree_sitter import Language, Parser
parsers = {"ts": Parser(Language(tst.language_typescript())), "tsx": Parser(Language(tst.language_tsx()))}
with open(sys.argv[1], encoding="utf-8") as listing:
    for line in listing:
        kind, path = line.rstrip("\\n").split("\\t", 1)
        with open(path, "rb") as fh:
            parsers[kind].parse(fh.read())
"""


def console_script() -> list[str]:
    """The ``mesh-mcp`` console script next to this interpreter (else ``python -m server.cli``)."""
    script = Path(sys.executable).with_name("mesh-mcp")
    return [str(script)] if script.exists() else [sys.executable, "-m", "server.cli"]


def run_process(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """(wall seconds, peak RSS MB of the process and its waited-for children); raises on failure.

    The CPU seconds (user + system, the process and its children) are kept in :data:`LAST_CPU`."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _pid, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode("utf-8", "replace") if proc.stderr else ""
    if proc.stderr:
        proc.stderr.close()
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited with {proc.returncode}: {err[-2000:]}")
    LAST_CPU[0] = usage.ru_utime + usage.ru_stime
    return elapsed, usage.ru_maxrss / 1024


LAST_CPU = [0.0]


def write_listing(root: Path, items: list[tuple[str, str]], out: Path) -> int:
    """The TypeScript files among ``items`` (rel, kind), one ``kind<TAB>absolute path`` a line."""
    n = 0
    with out.open("w", encoding="utf-8") as fh:
        for rel, kind in items:
            if kind in ("ts", "tsx"):
                fh.write(f"{kind}\t{root / rel}\n")
                n += 1
    return n


def _med(values: list[float]) -> float:
    return statistics.median(values)


def _runs(values: list[float]) -> str:
    return ", ".join(f"{v:.2f}" for v in values)


def index_processes(root: Path, items: list[tuple[str, str]], runs: int, state: Path) -> dict[str, float]:
    """Floor, cold and warm as whole processes, interleaved ``runs`` times; prints and returns medians.

    The filled state folder of the last cold run is left in ``state`` for :func:`serve_process`."""
    tmp = Path(tempfile.mkdtemp(prefix="mesh-static-proc-"))
    listing = tmp / "files.txt"
    parsed = write_listing(root, items, listing)
    mesh = console_script()
    floor, cold, warm, cold_rss, warm_rss, cold_cpu, warm_cpu, floor_cpu = [], [], [], [], [], [], [], []
    try:
        for _ in range(runs):
            floor.append(run_process([sys.executable, "-c", FLOOR_SCRIPT, str(listing)])[0])
            floor_cpu.append(LAST_CPU[0])
            shutil.rmtree(state, ignore_errors=True)
            env = {**os.environ, "MESH_STATE_DIR": str(state)}
            t, rss = run_process([*mesh, "index", "--workspace", str(root)], env)
            cold.append(t)
            cold_rss.append(rss)
            cold_cpu.append(LAST_CPU[0])
            t, rss = run_process([*mesh, "index", "--workspace", str(root)], env)
            warm.append(t)
            warm_rss.append(rss)
            warm_cpu.append(LAST_CPU[0])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    f, c, w = _med(floor), _med(cold), _med(warm)
    print(f"whole processes, median of {runs} interleaved runs ({parsed} TypeScript files):")
    cr = sorted(c_ / f_ for c_, f_ in zip(cold, floor, strict=True))
    wr = sorted(w_ / f_ for w_, f_ in zip(warm, floor, strict=True))
    print(f"  floor (python + tree-sitter parse, one process): {f:.2f} s, CPU {_med(floor_cpu):.2f} s "
          f"(runs: {_runs(floor)})")
    print(f"  cold `mesh-mcp index`: {c:.2f} s = {c / f:.2f}x floor, CPU {_med(cold_cpu):.2f} s with its workers "
          f"(runs: {_runs(cold)}; peak RSS {max(cold_rss):.0f} MB, the process or its largest worker); "
          f"run by run: min {cr[0]:.2f}x, median {_med(cr):.2f}x, max {cr[-1]:.2f}x")
    wc = _med(warm_cpu)
    ms3 = lambda values: ", ".join(f"{x:.3f}" for x in values)  # noqa: E731
    print(f"  warm `mesh-mcp index`: {w:.3f} s = {w / f:.2f}x floor, {100 * w / c:.1f}% of cold; CPU {wc:.3f} s "
          f"(one thread: about a quiet machine's wall; {100 * wc / c:.1f}% of cold's wall) (runs: {ms3(warm)}; "
          f"CPU runs: {ms3(warm_cpu)}; peak RSS {max(warm_rss):.0f} MB); run by run: min {wr[0]:.2f}x, "
          f"median {_med(wr):.2f}x, max {wr[-1]:.2f}x")
    return {"floor": f, "cold": c, "warm": w}


class _Stdio:
    """A JSON-RPC session with a ``mesh-mcp serve`` child over its stdin/stdout."""

    def __init__(self, cmd: list[str], env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, env=env)
        self.next_id = 0

    def send(self, method: str, params: dict | None = None, notify: bool = False) -> dict | None:
        msg: dict = {"jsonrpc": "2.0", "method": method, "params": params or {}}
        if not notify:
            self.next_id += 1
            msg["id"] = self.next_id
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write((json.dumps(msg) + "\n").encode())
        self.proc.stdin.flush()
        if notify:
            return None
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"the server closed stdout before answering {method}")
            reply = json.loads(line)
            if reply.get("id") == msg["id"]:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]

    def list_tools(self, client: str) -> dict:
        """initialize, initialized, then ``tools/list``: what a client sends before it can call a tool."""
        self.send("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                 "clientInfo": {"name": client, "version": "1"}})
        self.send("notifications/initialized", notify=True)
        listed = self.send("tools/list")
        assert listed is not None and listed["tools"], listed
        return listed

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def process_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) a live process has used so far (Linux /proc), else NaN."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


SDK_IMPORT = "import mcp.server.mcpserver"


def peak_rss_mb(pid: int) -> float:
    """Peak resident set (``VmHWM``) of a live process so far, MB (Linux /proc), else NaN."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    return float("nan")


def serve_process(root: Path, state: Path, target: str, runs: int, change: Path | None = None) -> dict[str, float]:
    """``mesh-mcp serve`` ready for tools/list, then the first analyze_impact (medians of ``runs``).

    Then its peak RSS (``VmHWM``) after that call, and, with ``change`` (a file of the workspace:
    a line is appended, then the file is put back as it was), after the call that follows the edit
    (one file parsed again, its facts changed, the index linked again; the first change after a
    start also loads every file's facts): what a user's server holds.

    Interleaved with each run: a process that only imports the MCP SDK (wall and CPU), the
    part of the start-up this project does not control. The serve process's own CPU seconds
    at the moment tools/list answered are read from /proc (they hold under load, wall does not)."""
    env = {**os.environ, "MESH_STATE_DIR": str(state)}
    ready, first, second, ready_cpu, sdk, sdk_cpu = [], [], [], [], [], []
    first_cpu, rss_first, rss_change, after_change = [], [], [], []
    for _ in range(runs):
        t0 = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-c", SDK_IMPORT])
        _pid, _status, usage = os.wait4(proc.pid, 0)
        sdk.append(time.perf_counter() - t0)
        sdk_cpu.append(usage.ru_utime + usage.ru_stime)
        start = time.perf_counter()
        session = _Stdio([*console_script(), "serve", "--workspace", str(root)], env)
        try:
            tools = session.list_tools("static-bench")
            ready.append(time.perf_counter() - start)
            ready_cpu.append(process_cpu_s(session.proc.pid))
            assert any(t["name"] == "analyze_impact" for t in tools["tools"])
            t0 = time.perf_counter()
            cpu0 = process_cpu_s(session.proc.pid)
            result = session.send("tools/call", {"name": "analyze_impact", "arguments": {"target": target}})
            first.append(time.perf_counter() - t0)
            first_cpu.append(process_cpu_s(session.proc.pid) - cpu0)
            assert result is not None and not result.get("isError"), result
            rss_first.append(peak_rss_mb(session.proc.pid))
            t0 = time.perf_counter()
            result = session.send("tools/call", {"name": "analyze_impact", "arguments": {"target": target}})
            second.append(time.perf_counter() - t0)
            assert result is not None and not result.get("isError"), result
            if change is not None:  # a new exported string constant: the file's facts change, the index relinks
                original, st = change.read_bytes(), change.stat()
                edit = f"\nexport const STATIC_BENCH_EDIT_{len(after_change)} = 'static.bench.edit';\n".encode()
                try:
                    change.write_bytes(original + edit)
                    t0 = time.perf_counter()
                    result = session.send("tools/call", {"name": "analyze_impact", "arguments": {"target": target}})
                    after_change.append(time.perf_counter() - t0)
                    assert result is not None and not result.get("isError"), result
                    rss_change.append(peak_rss_mb(session.proc.pid))
                finally:
                    change.write_bytes(original)
                    os.utime(change, ns=(st.st_atime_ns, st.st_mtime_ns))
                # the server indexes the file as it is again, so that the next run starts from the same cache
                session.send("tools/call", {"name": "analyze_impact", "arguments": {"target": target}})
        finally:
            session.close()
    r, a, b = _med(ready), _med(first), _med(second)
    ms = lambda values: ", ".join(f"{x * 1000:.0f}" for x in values)  # noqa: E731
    print(f"  `mesh-mcp serve` (stdio) ready for tools/list: {r:.2f} s, min {min(ready):.2f} s (runs: {_runs(ready)}); "
          f"its CPU until then: median {_med(ready_cpu):.2f} s (runs: {_runs(ready_cpu)})")
    print(f"  a process that only imports the MCP SDK (`{SDK_IMPORT}`), interleaved: {_med(sdk):.2f} s, "
          f"CPU {_med(sdk_cpu):.2f} s (runs: {_runs(sdk)}); serve ready = {r / _med(sdk):.2f}x that, "
          f"serve CPU = {_med(ready_cpu) / _med(sdk_cpu):.2f}x its CPU")
    print(f"  first analyze_impact({target!r}) on the built index, sent as soon as tools/list answered: "
          f"{a * 1000:.0f} ms, min {min(first) * 1000:.0f} ms (runs: {ms(first)}); its CPU in the server: median "
          f"{_med(first_cpu) * 1000:.0f} ms (runs: {ms(first_cpu)}); the second: {b * 1000:.0f} ms "
          f"(runs: {ms(second)})")
    line = f"  `mesh-mcp serve` peak RSS after the first analyze_impact: {max(rss_first):.0f} MB"
    if rss_change:
        line += (f"; after a file changed and the next analyze_impact ({_med(after_change) * 1000:.0f} ms, "
                 f"runs: {ms(after_change)}): {max(rss_change):.0f} MB")
    print(line + " (max of the runs; VmHWM of the server process)")
    return {"serve_ready": r, "first_impact": a, "second_impact": b}
