"""``mesh-mcp serve`` ready for ``tools/list``, checkouts against each other and the SDK import, interleaved.

    python -m bench.serve_ab --workspace DIR [--runs 8] [--checkout NAME=PATH ...]

Each round starts, in this order: a process that only imports the MCP SDK (``import
mcp.server.mcpserver``), then ``python -m server.cli serve --workspace DIR`` once per checkout
(``PYTHONPATH=PATH``, run from a neutral folder so that the current folder does not shadow it;
without ``--checkout``: this interpreter's install). Prints per process the wall seconds until
``tools/list`` answered and the server's CPU seconds at that moment (``/proc``), median and
minimum, and their ratio to the SDK import's. Run it with ``MESH_STATE_DIR`` pointing at a
state folder whose index is built and whose schema cache each checkout has written once
(one start each beforehand), so that every timed start reads it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.static_processes import SDK_IMPORT, _Stdio, process_cpu_s


def sdk_import(env: dict[str, str]) -> tuple[float, float]:
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", SDK_IMPORT], env=env)
    _pid, _status, usage = os.wait4(proc.pid, 0)
    return time.perf_counter() - start, usage.ru_utime + usage.ru_stime


def serve_ready(workspace: Path, env: dict[str, str]) -> tuple[float, float]:
    start = time.perf_counter()
    session = _Stdio([sys.executable, "-m", "server.cli", "serve", "--workspace", str(workspace)], env)
    try:
        session.list_tools("serve-ab")
        ready = time.perf_counter() - start
        cpu = process_cpu_s(session.proc.pid)
    finally:
        session.proc.kill()
        session.close()
    return ready, cpu


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workspace", required=True, type=Path)
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--checkout", action="append", default=[], metavar="NAME=PATH")
    args = parser.parse_args(argv)
    checkouts = [tuple(c.split("=", 1)) for c in args.checkout] or [("installed", "")]
    names = ["sdk import", *(name for name, _ in checkouts)]
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in names}
    workspace = args.workspace.resolve()
    paths = {name: str(Path(path).resolve()) for name, path in checkouts if path}
    here = os.getcwd()
    with tempfile.TemporaryDirectory() as neutral:
        os.chdir(neutral)  # `python -m` puts the current folder first on sys.path: not a checkout's
        try:
            for _ in range(args.runs):
                results["sdk import"].append(sdk_import(dict(os.environ)))
                for name, _path in checkouts:
                    env = {**os.environ, **({"PYTHONPATH": paths[name]} if name in paths else {})}
                    results[name].append(serve_ready(workspace, env))
        finally:
            os.chdir(here)
    sdk_wall = statistics.median(w for w, _ in results["sdk import"])
    sdk_cpu = statistics.median(c for _, c in results["sdk import"])
    load = os.getloadavg()
    print(f"{args.runs} rounds, load average {load[0]:.1f} / {load[1]:.1f} at the end, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    for name in names:
        walls = [w for w, _ in results[name]]
        cpus = [c for _, c in results[name]]
        wall, cpu = statistics.median(walls), statistics.median(cpus)
        print(f"  {name}: wall median {wall:.2f} s (min {min(walls):.2f}), CPU median {cpu:.2f} s "
              f"(min {min(cpus):.2f}); = {wall / sdk_wall:.2f}x / {cpu / sdk_cpu:.2f}x the SDK import")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
