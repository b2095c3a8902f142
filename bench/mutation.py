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
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out" / "mutation"


@dataclass(frozen=True)
class Module:
    name: str
    globs: tuple[str, ...]
    tests: tuple[str, ...]
    deselect: tuple[str, ...] = ()
    """slow tests (subprocesses) whose promises faster tests of the subset also defend"""
    keyword: str = "not stdio"
    """``pytest -k``: stdio tests cannot run under mutmut's capture; the Redis Cluster variants of the
    trace tests run the same verdict code on another backend at twice the cost"""
    timeout_multiplier: float = 3.0
    """mutmut's wall-clock limit per mutant is (the mapped tests' time + 1 s) x this (x2 in CPU seconds): a
    subset of tests that take milliseconds gets about 6 s, which a niced run on a loaded machine can miss"""
    timeout_constant: float | None = None
    """mutmut's ``timeout_constant`` (default 1 s): each mutant's CPU-time limit is
    ``(tests' time + constant) * multiplier * 2``; a subset whose start-up (collection, session
    fixtures) takes more CPU than that limit reports every mutant of a fast test as a timeout"""


def _rem(*names: str) -> tuple[str, ...]:
    return tuple(f"tests/remediation/test_{n}.py" for n in names)


# Each module runs on the tests that exercise it, no more: mutmut maps every mutated function
# to the tests (of this subset) that call it and runs those per mutant, so a survivor costs the
# whole mapped subset. The remediation package is split by concern for the same reason.
MODULES: tuple[Module, ...] = (
    Module(
        "redaction",
        ("server/redaction.py",),
        ("tests/safety/test_promise_redaction.py", "tests/foundation/test_redaction.py"),
    ),
    Module(
        "verdicts",
        ("tools/outbox/verdicts.py",),
        ("tests/outbox/test_promise_verdicts.py", "tests/outbox/test_docs.py"),
    ),
    Module(
        "audit",
        ("server/approval/audit.py",),
        (
            "tests/safety/test_promise_audit.py",
            "tests/safety/test_promise_audit_verify.py",
            "tests/remediation/test_audit_anchor.py",
            "tests/remediation/test_approval.py::test_audit_log_is_chained_and_refuses_secrets",
            "tests/safety/test_promise_audit_writers.py",
        ),
        deselect=("tests/remediation/test_audit_anchor.py::test_audit_verify_command",),
    ),
    Module(
        "connections",
        ("server/connections.py",),
        (
            "tests/safety/test_promise_sql_reads.py",
            "tests/safety/test_promise_connections.py",
            "tests/outbox/test_deadlines.py",
            "tests/outbox/test_health_and_doctor.py::test_down_service_is_named_and_others_answer",
            "tests/safety/test_promise_redis_errors.py",
            "tests/streams/test_unavailable_and_stdio.py::test_password_needed_but_not_configured",
        ),
    ),
    Module(
        "anomalies",
        ("tools/streams/anomalies.py",),
        ("tests/streams/test_promise_anomaly_rules.py", "tests/streams/test_promise_trimmed_pending.py"),
    ),
    # the trace: one entry per file, each on its lean subset (seconds, not the minute of the scenario tests
    # test_trace_event/job.py): the job verdicts on plain data, the stream search on a real Redis, the tracer
    # on plain data plus a few traces over one shared PostgreSQL database
    Module("trace-job-logic", ("tools/outbox/trace_job_logic.py",), ("tests/outbox/test_promise_trace_job_logic.py",),
           timeout_multiplier=10.0),
    Module("trace-streams", ("tools/outbox/trace_streams.py",), ("tests/outbox/test_promise_trace_streams.py",),
           timeout_multiplier=10.0),
    Module("trace", ("tools/outbox/trace.py",),
           ("tests/outbox/test_promise_trace_tracer.py", "tests/outbox/test_promise_trace_faults.py",
            "tests/outbox/test_promise_trace_job_edges.py"),
           timeout_multiplier=10.0),
    # the three service databases are made once per run of the subset (module-scoped, emptied per test)
    Module(
        "trace-request",
        ("tools/trace_request/collect.py", "tools/trace_request/tree.py", "tools/trace_request/lookups.py"),
        ("tests/trace_request/test_trace_request.py", "tests/trace_request/test_ways_in_edges.py"),
        timeout_constant=15.0,
    ),
    Module(
        "approval",
        ("server/approval/tokens.py",),
        ("tests/safety/test_promise_tokens.py", "tests/remediation/test_promise_expiry.py",
         "tests/remediation/test_approval.py"),
        # the four hypothesis properties (300 examples each, and a shrink per killed mutant): their promise,
        # any change to a token is refused, is tried at every position by test_any_change_at_any_position_is_refused
        deselect=tuple(f"tests/remediation/test_approval.py::test_{name}" for name in (
            "any_single_character_change_is_refused", "any_byte_flip_in_the_decoded_parts_is_refused",
            "truncation_or_insertion_is_refused", "arbitrary_input_is_refused_cleanly")),
    ),
    Module(
        "approval-keys",
        ("server/approval/keys.py",),
        ("tests/safety/test_promise_keys.py",),
    ),
    Module(
        "approval-trust",
        ("server/approval/trust.py",),
        ("tests/safety/test_promise_trust.py", "tests/safety/test_promise_trust_encoding.py",
         "tests/safety/test_promise_trust_acl.py",
         "tests/remediation/test_trust.py"),
        # two `mesh-mcp serve` subprocesses (15 s) and a whole MCP session (5 s): the refusals and the
        # start-time log they show are checked in-process by test_promise_trust.py
        deselect=tuple(f"tests/remediation/test_trust.py::test_{name}" for name in (
            "the_server_refuses_to_start_with_an_approver_in_its_environment", "the_server_checks_the_gate_at_start",
            "allow_unprotected_is_shown_by_server_info_and_plans")),
        # its tests take milliseconds: with mutmut's 1 s constant the limit is about 3 s, less than a loaded
        # machine needs to collect the subset (118 "timeouts" at load 17-22); no loop here can spin forever
        timeout_constant=10.0,
    ),
    Module("remediation-backups", ("tools/remediation/backups.py",),
           _rem("promise_backups", "promise_backup_records", "races")),
    Module(
        "remediation-preconditions",
        ("tools/remediation/preconditions.py",),
        _rem("promise_check_kinds", "promise_prechecks", "negative", "races"),
    ),
    Module(
        "remediation-store",
        ("tools/remediation/store.py",),
        # the store's own promises (files, modes, the claim and its records, integrity); the double-replay
        # tests defend the replay guard (remediation-apply), not the store, and cost a Redis Cluster per run
        _rem("promise_store", "promise_ids", "promise_expiry"),
    ),
    # the apply side, one module per file, each on its fast promise tests (a survivor costs its whole
    # mapped subset): the runners on one step at a time against a real Redis / PostgreSQL, the executor
    # on hand-made plans applied end to end; the whole-plan stories (test_story, test_negative,
    # test_promise_backups' apply) defend the same code in the suite but cost seconds each, with a
    # consumer thread; the cluster variants run the same code on another backend at twice the cost
    Module(
        "remediation-runners",
        ("tools/remediation/runners.py",),
        (
            *_rem("promise_runner_records", "promise_runner_transactions", "promise_replay_runners", "races"),
            "tests/remediation/test_promise_backups.py::test_a_backup_that_does_not_read_back_stops_the_step_before_any_change",
        ),
        keyword="not stdio and not cluster",
        timeout_constant=15.0,  # a scratch PostgreSQL database and Redis db per test
    ),
    Module(
        "remediation-executor",
        ("tools/remediation/executor.py",),
        _rem("promise_executor", "promise_executor_stops", "promise_prechecks"),
        keyword="not stdio and not cluster",
        timeout_constant=15.0,  # a scratch PostgreSQL database and Redis db per test
    ),
    Module(
        "remediation-ops",
        ("tools/remediation/operations.py", "tools/remediation/replays.py"),
        _rem("promise_rendering", "promise_replay_guard", "replay_state", "promise_replay_runners"),
        keyword="not stdio and not cluster",
        timeout_constant=15.0,  # a scratch PostgreSQL database and Redis db per test
    ),
    # the cluster variants of test_planners run the same planning code on another backend at twice the
    # cost; the slot logic is tested without a server (promise_plan_slots), and one cluster test checks
    # that a plan on a cluster is reviewed at all
    Module(
        "remediation-plan",
        ("tools/remediation/planner.py", "tools/remediation/plan_*.py", "tools/remediation/slots.py"),
        (
            *_rem("promise_plan_inputs", "promise_plan_slots", "promise_plan_reads", "promise_plans",
                  "promise_plan_dlq", "promise_ids", "planners", "story"),
            "tests/topologies/test_cluster_remediation.py::test_bullmq_retry_needs_a_hash_tagged_prefix",
        ),
        keyword="not stdio and not (cluster and planners)",
        timeout_constant=10.0,
    ),
    # planner.py alone (validation, sealing, saving) on its lean subset: the validation tests (no server),
    # the propose tests on BullMQ retries (one Redis, no consumer thread), the one DLQ plan whose saved file
    # and audit record are read back, the instance a plan is bound to, and one cluster plan (slots reviewed);
    # every builder's own tests (claims, DLQ, outbox) run under its own entry
    Module(
        "remediation-planner",
        ("tools/remediation/planner.py",),
        (
            *_rem("promise_plan_inputs", "promise_propose"),
            *(f"tests/remediation/test_promise_plans.py::test_{n}" for n in (
                "retry_plan_per_push_order_with_each_job_s_digest", "retry_plan_reads_marker_events_length_and_ids",
                "retry_plan_cap", "plan_expiry_and_saved_file")),
            *(f"tests/remediation/test_promise_ids.py::test_{n}" for n in (
                "the_planner_refuses_ids_with_control_characters", "the_planner_accepts_a_printable_job_id")),
            "tests/remediation/test_promise_plan_reads.py::test_a_plan_reads_the_instance_its_stream_lives_on",
            "tests/topologies/test_cluster_remediation.py::test_bullmq_retry_needs_a_hash_tagged_prefix",
        ),
        timeout_constant=10.0,
    ),
    # the BullMQ retry builder and what every builder shares (the step it appends, its checks), on the retry
    # tests: plan_base's step numbering and fields are what every retry plan's steps show
    Module(
        "remediation-plan-queues",
        ("tools/remediation/plan_queues.py", "tools/remediation/plan_base.py"),
        (
            *_rem("promise_plan_queues"),
            *(f"tests/remediation/test_promise_plans.py::test_{n}" for n in (
                "retry_plan_per_push_order_with_each_job_s_digest", "retry_plan_reads_marker_events_length_and_ids",
                "retry_plan_cap")),
            "tests/remediation/test_planners.py::test_retry_failed_bullmq_job",
        ),
        timeout_constant=10.0,
    ),
    # the planner's reads and the plan model (hash, summary): split from remediation-rest so each
    # runs on its own, lean subset
    Module(
        "remediation-reads",
        ("tools/remediation/model.py", "tools/remediation/redis_reads.py"),
        _rem("promise_plan_model", "promise_plan_reads", "promise_plan_slots", "promise_plans", "planners", "story"),
        keyword="not stdio and not cluster",
        timeout_constant=10.0,
    ),
    # three planners measured one by one, each on the fast tests that build its plans from a real Redis /
    # PostgreSQL (no apply, no consumer thread but the claim tests' live consumer): the planner's own
    # promises (remediation-plan) stay in that entry
    Module(
        "remediation-plan-outbox",
        ("tools/remediation/plan_outbox.py",),
        (
            *_rem("promise_plan_outbox", "promise_plans"),
            "tests/remediation/test_promise_plan_dlq.py::test_event_rows_in_another_state_are_named_not_reconciled",
            "tests/remediation/test_promise_plan_reads.py::test_an_unreachable_database_refuses_the_plan",
            "tests/remediation/test_promise_plan_reads.py::test_requeue_with_redis_unreachable_refuses_rather_than_guess_unpushed",
            "tests/remediation/test_promise_plan_reads.py::test_a_replay_whose_database_is_down_plans_no_sql_and_says_why",
        ),
        keyword="not stdio and not cluster",
        timeout_constant=10.0,
    ),
    Module(
        "remediation-plan-streams",
        ("tools/remediation/plan_streams.py",),
        (
            *_rem("promise_plan_streams", "promise_plans"),
            "tests/remediation/test_promise_plan_dlq.py::test_streams_and_groups_are_resolved_or_refused_by_name",
        ),
        # three claim tests sleeping 2.6 s each inside the test (their promises, owner and idle time, live
        # consumer, trimmed entries acknowledged, are pinned more strictly by test_promise_plan_streams.py)
        deselect=tuple(f"tests/remediation/test_promise_plans.py::test_{name}" for name in (
            "claim_records_each_entry_s_owner_and_idle_time",
            "claim_skips_entries_of_live_consumers_and_acks_trimmed_ones",
            "stale_lock_of_a_dead_owner_is_claimed_to_a_live_consumer")),
        keyword="not stdio and not cluster",
        timeout_constant=10.0,
    ),
    Module(
        "remediation-plan-dlq",
        ("tools/remediation/plan_dlq.py",),
        _rem("promise_plan_dlq", "promise_plan_dlq_cleanup", "promise_plans"),
        keyword="not stdio and not cluster",
        timeout_constant=10.0,
    ),
    Module(
        "remediation-rest",
        (
            "tools/remediation/operations.py",
            "tools/remediation/replays.py",
            "tools/remediation/mcp_tools.py",
        ),
        _rem("planners", "story", "replay_state", "negative", "mcp"),
    ),
    # what propose_remediation shows a client (the summary shape) and the tools' adapters
    Module(
        "remediation-adapters",
        ("tools/remediation/summary.py", "tools/remediation/mcp_tools.py"),
        _rem("mcp", "promise_plan_model"),
        timeout_constant=10.0,
    ),
)

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
