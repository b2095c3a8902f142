"""Mutation testing of the modules that carry the safety and verdict logic, with ``mutmut``.

Not part of CI (it takes long): a bench, re-runnable with one command after merges::

    .venv/bin/pip install -e '.[dev,demo,mutation]'
    MESH_TEST_REDIS_URL=redis://127.0.0.1:6379/0 python bench/mutation.py            # every module
    python bench/mutation.py redaction connections --max-children 2                  # some modules
    python bench/mutation.py audit --survivors        # the last run's survivors and unreached mutants only
    python bench/mutation.py remediation-reads --survivors --timeouts    # ... and its timeouts
    python bench/mutation.py --list                                                   # what would run

Each module runs on its own, smallest first, in a fresh copy of the repository under
``bench/out/mutation/<module>/`` (git's tracked and untracked-not-ignored files) with a
``setup.cfg`` that tells mutmut to mutate only that module and to run only the fast test
subset that exercises it (listed in :data:`MODULES`; tests over stdio are left out: a
subprocess cannot inherit mutmut's captured output). mutmut maps each mutated function to
the tests that call it and runs only those per mutant, so a survivor costs its whole mapped
subset: keep each subset to the tests of that module (``deselect`` drops slow subprocess tests
another test of the subset also defends, ``keyword`` is the ``-k`` expression). A mutant that
hangs is a timeout after 3x the subset's usual time (mutmut's default 15x is half an hour on a
loaded machine; mutmut turns it into a CPU-time limit, ``(tests' time + timeout_constant) * 3 * 2``
seconds, so a subset whose start-up takes more CPU than that sets ``timeout_constant``); under heavy
load a timeout may be a slow survivor (``--timeouts`` re-runs them): check it by hand with
``MUTANT_UNDER_TEST=<name> pytest <tests>`` in ``<module>/mutants``. The tests need the same PostgreSQL
and Redis as the suite (``MESH_TEST_POSTGRES_URL`` / ``MESH_TEST_REDIS_URL``).

Printed per module and in total: mutants, killed, timeout, survived, no tests, skipped and
the score ``(killed + timeout) / (mutants - skipped - not checked)``; ``summary.json`` and
``<module>/survivors.txt`` (the diff of every survivor, from ``mutmut show``) are written
next to the copies. mutmut 3 mutates the bodies of functions and methods only: module-level
constants and functions under a decorator other than ``staticmethod`` / ``classmethod``
(e.g. ``@asynccontextmanager``) are not mutated; the report says so per module.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script: the bench package is importable
OUT = ROOT / "bench" / "out" / "mutation"

from bench.mutation_modules import MODULES, Module  # noqa: E402  (after the path is set)

STATUS_RE = re.compile(r"^\s+(\S+): (.+)$")


def _tracked_files() -> list[str]:
    out = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True, capture_output=True
    ).stdout.decode()
    return [p for p in out.split("\0") if p and (ROOT / p).is_file()]


def _copy_repo(dest: Path) -> None:
    if dest.exists():
        shutil.rmtree(dest)
    for rel in _tracked_files():
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, target)


def _setup_cfg(module: Module) -> str:
    def lines(values: tuple[str, ...] | list[str]) -> str:
        return "".join(f"\n    {v}" for v in values)

    deselect = [arg for test in module.deselect for arg in ("--deselect", test)]
    return (
        "[mutmut]\n"
        f"source_paths ={lines(['server', 'tools'])}\n"
        f"only_mutate ={lines(module.globs)}\n"
        f"also_copy ={lines(['resources', 'skills', 'bench', 'tests', 'docs', 'README.md', '.ci'])}\n"
        # a mutant that makes a read hang (no deadline) is a timeout after 3x the tests' usual time,
        # not mutmut's default 15x (half an hour for the SQL subset on a loaded machine)
        f"timeout_multiplier = {module.timeout_multiplier}\n"
        + (f"timeout_constant = {module.timeout_constant}\n" if module.timeout_constant is not None else "")
        + f"pytest_add_cli_args_test_selection ={lines(module.tests)}\n"
        f"pytest_add_cli_args ={lines(['-p', 'no:cacheprovider', '-q', '-k', module.keyword, *deselect])}\n"
    )


def _results(workdir: Path) -> dict[str, str]:
    out = subprocess.run(
        [sys.executable, "-m", "mutmut", "results", "--all", "true"], cwd=workdir, capture_output=True, text=True
    ).stdout
    found = {}
    for line in out.splitlines():
        m = STATUS_RE.match(line)
        if m:
            found[m.group(1)] = m.group(2).strip()
    return found


def _score(statuses: dict[str, str]) -> dict[str, object]:
    counts: dict[str, int] = {}
    for status in statuses.values():
        counts[status] = counts.get(status, 0) + 1
    skipped = counts.get("skipped", 0) + counts.get("not checked", 0)
    killed = counts.get("killed", 0) + counts.get("timeout", 0) + counts.get("caught by type check", 0)
    considered = len(statuses) - skipped
    return {
        "mutants": len(statuses),
        "counts": counts,
        "score": round(100 * killed / considered, 1) if considered else None,
    }


def _refresh_tests(workdir: Path) -> None:
    """Copy the current tests over the working copy (and mutmut's ``mutants/`` tree): tests were added."""
    for rel in _tracked_files():
        if rel.startswith("tests/"):
            for base in (workdir, workdir / "mutants"):
                target = base / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(ROOT / rel, target)


def run_module(
    module: Module, max_children: int, keep: bool, survivors_only: bool = False, timeouts: bool = False
) -> dict[str, object]:
    workdir = OUT / module.name
    names: list[str] = []
    if survivors_only and (workdir / "mutants").exists():
        # the previous run's survivors (and the mutants it did not reach) only, against the current
        # tests (killed mutants stay killed: tests are only ever added between the two runs); with
        # ``timeouts`` its timeouts too (under load a timeout may be a slow survivor)
        again = ("survived", "no tests", "not checked", *(("timeout",) if timeouts else ()))
        names = [k for k, v in _results(workdir).items() if v in again]
        _refresh_tests(workdir)
        # mutmut maps a test to the functions it calls only when the test is new to it: a test that gained
        # a call since the last run would not be run for that function's mutants. Rebuild the whole map.
        (workdir / "mutants" / "mutmut-stats.json").unlink(missing_ok=True)
    elif not keep or not workdir.exists():
        _copy_repo(workdir)
    (workdir / "setup.cfg").write_text(_setup_cfg(module), encoding="utf-8")
    log = OUT / f"{module.name}{'.rerun' if names else ''}.log"
    started = time.monotonic()
    with log.open("w", encoding="utf-8") as fh:
        proc = subprocess.run(
            [sys.executable, "-m", "mutmut", "run", "--max-children", str(max_children), *names],
            cwd=workdir,
            stdout=fh,
            stderr=subprocess.STDOUT,
            env={**os.environ},
        )
    return collect(module, proc.returncode, time.monotonic() - started)


def collect(module: Module, exit_status: int | None, elapsed: float | None) -> dict[str, object]:
    """The results of the last mutmut run of ``module`` (from its working copy), survivors' diffs written."""
    workdir = OUT / module.name
    log = OUT / f"{module.name}.log"
    statuses = _results(workdir)
    # "not checked": mutmut stopped before testing them (a failing clean run, see the log): no diffs to show
    survivors = sorted(
        k
        for k, v in statuses.items()
        if v not in ("killed", "timeout", "caught by type check", "skipped", "not checked")
    )
    with (workdir / "survivors.txt").open("w", encoding="utf-8") as fh:
        for name in survivors:
            shown = subprocess.run(
                [sys.executable, "-m", "mutmut", "show", name], cwd=workdir, capture_output=True, text=True
            ).stdout
            fh.write(shown.rstrip() + "\n\n")
    result = {
        "module": module.name,
        "globs": list(module.globs),
        "tests": list(module.tests),
        "exit_status": exit_status,
        "seconds": round(elapsed, 1) if elapsed is not None else None,
        **_score(statuses),
        "survivors": {name: statuses[name] for name in survivors},
        "log": str(log),
    }
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("modules", nargs="*", help="module names (default: all, smallest first)")
    parser.add_argument("--max-children", type=int, default=2, help="parallel mutants (default 2)")
    parser.add_argument("--keep", action="store_true", help="reuse the previous copy and mutmut cache")
    parser.add_argument(
        "--survivors",
        action="store_true",
        help="re-run only the last run's survivors and unreached mutants, against the current tests",
    )
    parser.add_argument(
        "--timeouts", action="store_true", help="with --survivors: re-run the last run's timeouts as well"
    )
    parser.add_argument("--list", action="store_true", help="print the modules and their tests, run nothing")
    parser.add_argument(
        "--report", action="store_true", help="rebuild summary.json and survivors.txt from the last runs, run nothing"
    )
    args = parser.parse_args(argv)
    known = {m.name: m for m in MODULES}
    unknown = [n for n in args.modules if n not in known]
    if unknown:
        parser.error(f"unknown module(s) {', '.join(unknown)}: use {', '.join(known)}")
    chosen = [known[n] for n in args.modules] if args.modules else list(MODULES)
    if args.list:
        for m in chosen:
            print(f"{m.name}: {' '.join(m.globs)}\n    tests: {' '.join(m.tests)}")
        return 0
    try:
        import mutmut  # noqa: F401
    except ImportError:
        print("mutmut is not installed: pip install -e '.[mutation]'", file=sys.stderr)
        return 2
    OUT.mkdir(parents=True, exist_ok=True)
    summary_path = OUT / "summary.json"
    summary = json.loads(summary_path.read_text(encoding="utf-8")) if summary_path.exists() else {}
    for module in chosen:
        print(f"== {module.name}: {' '.join(module.globs)} ({len(module.tests)} test file(s))", flush=True)
        if args.report:
            if not (OUT / module.name / "mutants").exists():
                continue
            previous = summary.get(module.name, {})
            result = collect(module, previous.get("exit_status"), previous.get("seconds"))
        else:
            result = run_module(module, args.max_children, args.keep, args.survivors, args.timeouts)
        # re-read: another run of this bench (other modules) may have written meanwhile
        summary = json.loads(summary_path.read_text(encoding="utf-8")) if summary_path.exists() else {}
        summary[module.name] = result
        summary_path.write_text(json.dumps(summary, indent=2), encoding="utf-8")
        print(
            f"   {result['mutants']} mutants {result['counts']} score {result['score']}% "
            f"in {result['seconds']} s (survivors: {OUT / module.name / 'survivors.txt'})",
            flush=True,
        )
    total = {"killed": 0, "considered": 0}
    for result in summary.values():
        counts = result["counts"]
        total["killed"] += counts.get("killed", 0) + counts.get("timeout", 0) + counts.get("caught by type check", 0)
        total["considered"] += result["mutants"] - counts.get("skipped", 0) - counts.get("not checked", 0)
    if total["considered"]:
        print(
            f"total (every module in {summary_path.name}): {total['killed']}/{total['considered']} = "
            f"{100 * total['killed'] / total['considered']:.1f}%"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
