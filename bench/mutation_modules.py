"""The modules ``bench/mutation.py`` mutates and the test subset each one runs (the ``MODULES`` table)."""

from __future__ import annotations

from dataclasses import dataclass


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
    Module("trace", ("tools/outbox/trace_search.py", "tools/outbox/trace_redis.py",
                     "tools/outbox/trace_event_chain.py", "tools/outbox/trace_job_chain.py"),
           ("tests/outbox/test_promise_trace_tracer.py", "tests/outbox/test_promise_trace_faults.py",
            "tests/outbox/test_promise_trace_job_edges.py"),
           timeout_multiplier=10.0),
    # the three service databases are made once per run of the subset (module-scoped, emptied per test)
    Module(
        "trace-request",
        ("tools/trace_request/collect.py", "tools/trace_request/tree.py", "tools/trace_request/lookups.py"),
        tuple(f"tests/trace_request/test_{n}.py" for n in (
            "trace_request", "ways_in_edges", "promise_collect_plan", "promise_collect_run", "promise_lookups",
            "promise_tree")),
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
        _rem("promise_check_kinds", "promise_idle_boundaries", "promise_prechecks", "negative", "races"),
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
        (*_rem("promise_plan_model", "promise_plan_reads", "promise_plan_slots", "promise_plans", "planners", "story",
               "promise_idle_boundaries"),
         # pending_range's `after` cursor: pages of one read each entry once
         "tests/remediation/test_promise_plan_streams.py::"
         "test_a_read_count_below_the_plan_cap_pages_on_instead_of_dropping_entries"),
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
            *_rem("promise_plan_streams", "promise_plans", "promise_idle_boundaries"),
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
