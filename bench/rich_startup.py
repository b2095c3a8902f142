"""Would `rich` keep the CLI within its start-up goals? Fresh-interpreter timings, median of N runs.

    python -m bench.rich_startup [--runs 15]

Times, each in a new interpreter: bare Python; ``mesh-mcp --help``; a 20-row table printed by
mesh-mcp's own table code (``server.cli_support.print_table``: fits the terminal, ellipsis,
colour only on a TTY and never with NO_COLOR); importing rich; the same table printed by rich.
rich is not a dependency: install it somewhere first (``pip install --target DIR rich``) and put
DIR on PYTHONPATH, or the rich rows say it is missing. The serve start-up goal (ready < 1.0 s,
bench/static_bench.py) does not import table code at all.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import time

ROWS = "[[i, 'x' * 40, 'y' * 30] for i in range(20)]"
CASES = {
    "bare python": "pass",
    "mesh-mcp --help": (
        "import sys\nsys.argv = ['mesh-mcp', '--help']\ntry:\n    import server.cli as c\n    c.main()\n"
        "except SystemExit:\n    pass"
    ),
    "mesh-mcp table (server.cli_support)": f"from server.cli_support import print_table\n"
                                             f"print_table(['a', 'b', 'c'], {ROWS})",
    "import rich.console, rich.table": "import rich.console, rich.table",
    "rich table (Console().print)": (
        "from rich.console import Console\nfrom rich.table import Table\nt = Table('a', 'b', 'c')\n"
        f"for r in {ROWS}:\n    t.add_row(*map(str, r))\nConsole().print(t)"
    ),
}


def run_s(code: str) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, env={**os.environ})
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    runs = parser.parse_args().runs
    has_rich = importlib.util.find_spec("rich") is not None
    cases = {name: code for name, code in CASES.items() if has_rich or "rich" not in name}
    for code in cases.values():  # warm the file cache
        run_s(code)
    samples: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(runs):  # interleaved rounds: a load spike hits every case alike
        for name, code in cases.items():
            samples[name].append(run_s(code))
    print(f"{'case':<40} {'median':>9} {'min':>9}   (runs: {runs}, interleaved)")
    for name in CASES:
        if name not in samples:
            print(f"{name:<40} {'missing':>9}   (pip install --target DIR rich; PYTHONPATH=DIR)")
            continue
        values = samples[name]
        print(f"{name:<40} {statistics.median(values) * 1000:>7.1f} ms {min(values) * 1000:>6.1f} ms")


if __name__ == "__main__":
    main()
