"""Run the benchmarks: ``python -m bench [--quick] [NAME ...]``.

With no name, every benchmark runs one after the other at the sizes the goals are
stated for (several minutes and a few GB of PostgreSQL on the full sizes); ``--quick``
uses small sizes to check that every bench still runs. Each bench prints its own
figures; this runner adds nothing but the sequencing and a failure status.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

BENCHES: dict[str, tuple[list[str], list[str]]] = {
    # name: (full-size arguments, quick arguments)
    "static": ([], ["--files", "2000", "--queries", "200"]),
    "outbox": ([], ["--rows", "20000", "--runs", "20"]),
    "streams": ([], ["--entries", "20000", "--pending", "2000", "--dlq", "500", "--keys", "5000", "--runs", "10"]),
    "verify": ([], ["--domains", "5", "--jobs-per-domain", "10", "--events-per-domain", "4"]),
    "remediation": ([], ["--entries", "5000", "--dlq", "500", "--plan", "20"]),
    "demo": ([], ["--runs", "1"]),
    "flow_map": ([], ["--files", "1000", "--targets", "50"]),
    "trace_request": ([], ["--rows", "2000", "--lookups", "20"]),
    "topology": ([], ["--streams", "200", "--queues", "50", "--runs", "5"]),
    "skills": ([], ["--files", "2000", "--runs", "3"]),
    "code_nav": ([], ["--files", "1000", "--runs", "5"]),
    "plan_flow": ([], ["--domains", "5", "--jobs-per-domain", "10", "--events-per-domain", "4", "--samples", "10"]),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", metavar="NAME",
                        help=f"benchmarks to run (default: all): {', '.join(BENCHES)}")
    parser.add_argument("--quick", action="store_true", help="small sizes: check that every bench runs")
    parser.add_argument("--all", action="store_true", help="every benchmark (the default)")
    args = parser.parse_args(argv)
    unknown = [name for name in args.names if name not in BENCHES]
    if unknown:
        parser.error(f"unknown benchmark {', '.join(unknown)}: choose from {', '.join(BENCHES)}")
    names = args.names or list(BENCHES)
    failed = []
    for name in names:
        full, quick = BENCHES[name]
        command = [sys.executable, str(HERE / f"{name}_bench.py"), *(quick if args.quick else full)]
        print(f"\n=== {name}: {' '.join(command[1:])}", flush=True)
        if subprocess.run(command, check=False).returncode != 0:
            failed.append(name)
    if failed:
        print(f"\nfailed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
