"""The suite's fast subset on the lowest versions pyproject.toml's ranges allow.

``python -m bench.lowest_versions [--venv DIR] [--reuse] [PYTEST ARGS...]``

Creates a separate virtual environment (default ``.venv-lowest``), installs the project with
``constraints-lowest.txt`` (every dependency at its lower bound), prints what was resolved for the
direct dependencies, then runs the fast subset of the suite there (the tests of the redis and
PostgreSQL clients, config, tools listing, CLI, outbox, streams and trace). A failure means a lower
bound in pyproject.toml is wrong: raise it, or fix the code so it works there too.

Needs PostgreSQL and Redis as the suite does (``MESH_TEST_REDIS_URL``, ``MESH_TEST_PG_DSN``).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONSTRAINTS = ROOT / "constraints-lowest.txt"
FAST_SUBSET = [
    "tests/foundation",
    "tests/outbox",
    "tests/streams",
    "tests/queues",
    "tests/trace_request",
    "tests/topologies/test_replica_reads.py",
    "tests/runtime_cli",
]
DIRECT = ("mcp", "pydantic", "psycopg", "redis", "tree-sitter", "tree_sitter_typescript", "cryptography", "anyio",
          "PyYAML", "uvicorn", "filelock", "pytest")


def _run(cmd: list[str], **kwargs: object) -> int:
    print("$", " ".join(cmd), flush=True)
    return subprocess.call(cmd, **kwargs)  # type: ignore[arg-type]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.lowest_versions", description=__doc__.splitlines()[0])
    parser.add_argument("--venv", type=Path, default=ROOT / ".venv-lowest", help="where to create the venv")
    parser.add_argument("--reuse", action="store_true", help="skip creating and installing (venv already made)")
    parser.add_argument("pytest_args", nargs=argparse.REMAINDER, help="pytest arguments (default: the fast subset)")
    args = parser.parse_args(argv)
    python = args.venv / "bin" / "python"
    started = time.monotonic()
    if not args.reuse:
        if _run([sys.executable, "-m", "venv", "--clear", str(args.venv)]):
            return 2
        install = [str(python), "-m", "pip", "install", "-q", "-c", str(CONSTRAINTS), "-e", f"{ROOT}[dev,demo]"]
        if _run(install):
            print("lowest versions: the install failed (see above): a lower bound cannot be installed", file=sys.stderr)
            return 2
    print(f"install: {time.monotonic() - started:.0f} s")
    freeze = subprocess.run([str(python), "-m", "pip", "freeze"], capture_output=True, text=True, check=False).stdout
    wanted = {d.lower().replace("_", "-") for d in DIRECT}
    for line in freeze.splitlines():
        if line.split("==")[0].lower().replace("_", "-") in wanted:
            print("  resolved", line)
    tests = args.pytest_args or [p for p in FAST_SUBSET if (ROOT / p).exists()]
    began = time.monotonic()
    code = _run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not inspector", *tests],
                cwd=ROOT, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    print(f"lowest versions: pytest exit {code} in {time.monotonic() - began:.0f} s")
    return code


if __name__ == "__main__":
    sys.exit(main())
