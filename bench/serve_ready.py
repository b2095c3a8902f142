"""One ``mesh-mcp serve`` start, timed by an outside harness as a whole process.

    python -m bench.serve_ready --workspace DIR [--impact TARGET] [--dump FILE] [-- CMD ...]

Starts ``mesh-mcp serve --workspace DIR`` over stdio (or ``CMD`` after ``--``, to time another
checkout's server), sends initialize, initialized and ``tools/list``, then optionally one
``analyze_impact`` call, prints the milliseconds each took (and the server's CPU seconds when
``tools/list`` answered), kills the server and exits (``--wait`` closes the server's stdin and
waits for its exit instead). Wrapped in a harness that times whole processes (``/usr/bin/time
-v``, or hyperfine), against ``python -c 'import mcp.server.mcpserver'``, it gives serve's start-up
as a ratio of the SDK's import measured in the same minutes. ``--dump`` writes the ``tools/list``
result as JSON (to compare two servers' listings byte for byte).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from bench.static_processes import _Stdio, console_script, process_cpu_s


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    cmd: list[str] | None = None
    if "--" in argv:
        cmd, argv = argv[argv.index("--") + 1:], argv[:argv.index("--")]
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workspace", required=True, type=Path)
    parser.add_argument("--impact", default=None, help="analyze_impact this target after tools/list")
    parser.add_argument("--wait", action="store_true", help="close stdin and wait for the server to exit "
                        "(default: kill it once answered, so its shutdown is not timed)")
    parser.add_argument("--dump", type=Path, default=None, help="write the tools/list result here")
    args = parser.parse_args(argv)
    command = cmd or [*console_script(), "serve"]
    start = time.perf_counter()
    session = _Stdio([*command, "--workspace", str(args.workspace)], dict(os.environ))
    try:
        listed = session.list_tools("serve-ready")
        ready = time.perf_counter() - start
        cpu = process_cpu_s(session.proc.pid)
        line = f"tools/list after {ready * 1000:.0f} ms, server CPU {cpu:.2f} s ({len(listed['tools'])} tools)"
        if args.dump is not None:
            args.dump.write_text(json.dumps(listed, indent=1, sort_keys=False))
        if args.impact is not None:
            t0 = time.perf_counter()
            result = session.send("tools/call", {"name": "analyze_impact", "arguments": {"target": args.impact}})
            assert result is not None and not result.get("isError"), result
            line += f"; first analyze_impact {(time.perf_counter() - t0) * 1000:.0f} ms"
        print(line)
    finally:
        if args.wait:
            session.close()
        else:  # the figure is the start-up: do not wait for the server's shutdown
            session.proc.kill()
            session.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
