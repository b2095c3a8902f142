"""The verdicts of ``trace_job`` from what was observed, on plain data (no I/O: the reasoning alone).

:func:`tools.outbox.trace_job_logic.job_findings` takes the rows, the BullMQ state, the
completion guard and the outcome events as values, so every branch is checked here in
milliseconds of test time, with the exact sentence an agent reads (the sentence is the
product: a lost clause or a number in the wrong unit is a defect). Promises defended:

- the thresholds and their units: ``[limits] pending_ageing_s`` / ``processing_ageing_s`` in
  seconds against the rows' ages, ``processing_ageing_s`` against BullMQ's running time in
  **milliseconds** (``running_ms / 1000``), ``delayed_overdue_ms`` in milliseconds; each at
  exactly the limit and one unit each side;
- a service or Redis that could not be read makes a missing job ``inconclusive``, never
  ``not_found``; a job is ``purged`` only with evidence that it ran.

The end-to-end traces over real PostgreSQL / Redis / BullMQ are in ``test_trace_job.py`` and
``test_promise_trace.py``.
"""

from __future__ import annotations

from typing import Any

import pytest

from server.config import Settings
from tools.outbox.bull_liveness import QueueLiveness
from tools.outbox.bull_state import BullJobState
from tools.outbox.model import Hop, OutboxRow, Verdict
from tools.outbox.rows import RowTimes
from tools.outbox.trace_job_logic import bull_problem, job_findings
from tools.outbox.verdicts import verdict

JOB = "j-1"
NOW = 1_700_000_000_000  # Redis TIME of the observations (ms); 2023-11-14T22:13:20+00:00


@pytest.fixture
def settings(make_settings) -> Settings:
    """Default conventions; limits: pending 300 s, processing 300 s, delayed overdue 60,000 ms."""
    s = make_settings()
    assert (s.limits.pending_ageing_s, s.limits.processing_ageing_s, s.limits.delayed_overdue_ms) == (300, 300, 60_000)
    return s


def job_row(status: str = "COMPLETED", age_s: float | None = 10.0, updated_age_s: float | None = None,
            **columns: Any) -> OutboxRow:
    return OutboxRow(service="user", table="jobs_outbox", id=JOB, status=status, type="send-email", age_s=age_s,
                     updated_age_s=updated_age_s, hint=f"hint {status}", columns={"target": "emails", **columns})


def audit_row(status: str, age_s: float | None = 10.0, updated_age_s: float | None = None,
              since_s: float | None = None, **columns: Any) -> OutboxRow:
    """``since_s``: seconds since started_at (the column the worker writes; its updated_at it never writes)."""
    return OutboxRow(service="user", table="job_audit", id="a-9", job_id=JOB, status=status, type="send-email",
                     age_s=age_s, updated_age_s=updated_age_s, since_s=since_s,
                     since_column="started_at" if since_s is not None else None, hint=None, columns=columns)


def bull(state: str, **fields: Any) -> BullJobState:
    fields.setdefault("redis_now_ms", NOW)
    return BullJobState(queue="emails", job_id=JOB, key=f"bull:emails:{JOB}", hash_exists=True, state=state, **fields)


def event_row(type_: str = "user:job.succeeded") -> OutboxRow:
    return OutboxRow(service="user", table="event_queue", id="e-5", status="COMPLETED", type=type_)


GUARD_SET = {"key": f"job:completed:{JOB}", "exists": True, "value": "w-1", "truncated": False, "ttl_s": 80}
GUARD_ABSENT = {"key": f"job:completed:{JOB}", "exists": False, "value": None, "truncated": False, "ttl_s": None}


def times(scheduled_in_s: float | None) -> RowTimes:
    return RowTimes(created_ms=None, updated_ms=None, processed_ms=None, age_s=None, updated_age_s=None,
                    scheduled_in_s=scheduled_in_s)


def run(settings: Settings, **kw: Any) -> tuple[list[Hop], list[Verdict]]:
    args: dict[str, Any] = {
        "job_id": JOB, "job": None, "job_times": None, "audit": None, "queue": None, "bull": None,
        "bull_known": True, "guard": GUARD_ABSENT, "outcomes": [], "success_types": {"user:job.succeeded"},
        "searched": ["user"], "unavailable": [],
    }
    if "job" in kw and kw["job"] is not None and "queue" not in kw:
        args["queue"] = "emails"
    args.update(kw)
    return job_findings(settings, **args)


def only(findings: list[Verdict]) -> tuple[str, str, str, str | None]:
    assert len(findings) == 1, findings
    f = findings[0]
    return f.code, f.severity, f.sentence, f.hop


# -- jobs_outbox not pushed: ages in seconds -----------------------------------------------------


@pytest.mark.parametrize(("age_s", "severity", "tail"), [
    (299.0, "info", ": waiting for the outbox runner (not late yet)"),
    (300.0, "info", ": waiting for the outbox runner (not late yet)"),
    (301.0, "error", " (> 300s): the outbox runner is stopped or cannot reach the database"),
])
def test_a_pending_job_is_late_after_pending_ageing_s(settings, age_s, severity, tail) -> None:
    _, findings = run(settings, job=job_row("PENDING", age_s=age_s, updated_age_s=1.0), job_times=times(None))
    assert only(findings) == ("pending_in_outbox", severity, f"job {JOB} is PENDING in jobs_outbox for "
                              f"{age_s:.0f}s{tail}", "jobs_outbox")
    assert findings[0].next_step.startswith("Check that the service's outbox runner runs")


def test_a_pending_job_without_an_age_is_not_late(settings) -> None:
    _, findings = run(settings, job=job_row("PENDING", age_s=None))
    assert only(findings)[:3] == ("pending_in_outbox", "info",
                                  f"job {JOB} is PENDING in jobs_outbox for 0s: waiting for the outbox runner "
                                  "(not late yet)")


@pytest.mark.parametrize(("scheduled_in_s", "code_sentence"), [
    (30.0, ("info", f"job {JOB} is PENDING, scheduled to run in 30s: not late")),
    (0.4, ("info", f"job {JOB} is PENDING, scheduled to run in 0s: not late")),
    (0.0, ("error", f"job {JOB} is PENDING in jobs_outbox for 900s (> 300s): the outbox runner is stopped or "
                    "cannot reach the database")),
])
def test_a_pending_job_scheduled_later_is_not_late(settings, scheduled_in_s, code_sentence) -> None:
    _, findings = run(settings, job=job_row("PENDING", age_s=900.0), job_times=times(scheduled_in_s))
    assert only(findings)[1:3] == code_sentence and findings[0].hop == "jobs_outbox"
    if scheduled_in_s > 0:
        assert findings[0].next_step == "wait for its scheduled time"


@pytest.mark.parametrize(("since", "expected"), [
    (299.0, ("pending_in_outbox", "info", f"job {JOB} was claimed 299s ago and is being pushed", "jobs_outbox")),
    (300.0, ("pending_in_outbox", "info", f"job {JOB} was claimed 300s ago and is being pushed", "jobs_outbox")),
    (301.0, ("stuck_processing", "error", f"job {JOB} is PROCESSING in jobs_outbox for 301s since its updated_at "
                                         "(> 300s): the runner died between claim and push", "jobs_outbox")),
])
def test_a_processing_job_is_stuck_after_processing_ageing_s(settings, since, expected) -> None:
    """The time since the claim (updated_at) counts, not the row's age."""
    _, findings = run(settings, job=job_row("PROCESSING", age_s=5000.0, updated_age_s=since))
    assert only(findings) == expected


def test_pending_and_processing_ages_each_use_their_own_limit(make_settings) -> None:
    """Distinct limits (pending 60 s, processing 600 s): a claim 120 s old is not stuck, a PENDING row is late."""
    settings = make_settings(limits={"pending_ageing_s": 60, "processing_ageing_s": 600})
    _, findings = run(settings, job=job_row("PROCESSING", age_s=5000.0, updated_age_s=120.0))
    assert only(findings) == ("pending_in_outbox", "info", f"job {JOB} was claimed 120s ago and is being pushed",
                              "jobs_outbox")
    _, findings = run(settings, job=job_row("PROCESSING", age_s=5000.0, updated_age_s=601.0))
    assert only(findings)[:3] == ("stuck_processing", "error", f"job {JOB} is PROCESSING in jobs_outbox for 601s since "
                                  "its updated_at (> 600s): the runner died between claim and push")
    _, findings = run(settings, job=job_row("PENDING", age_s=120.0))
    assert only(findings)[:2] == ("pending_in_outbox", "error")


def test_a_processing_job_without_updated_at_uses_its_age(settings) -> None:
    _, findings = run(settings, job=job_row("PROCESSING", age_s=301.0, updated_age_s=None))
    assert only(findings)[0] == "stuck_processing"
    _, findings = run(settings, job=job_row("PROCESSING", age_s=None, updated_age_s=None))
    assert only(findings)[2] == f"job {JOB} was claimed 0s ago and is being pushed"


def test_a_job_the_runner_gave_up_on(settings) -> None:
    _, findings = run(settings, job=job_row("FAILED", lastError="ECONNREFUSED " + "x" * 400))
    assert only(findings) == ("pending_in_outbox", "error", f"job {JOB} is FAILED in jobs_outbox: the outbox runner "
                              f"gave up pushing it (ECONNREFUSED {'x' * 287})", "jobs_outbox")
    assert findings[0].next_step == ("fix the cause (runner logs), then propose_remediation("
                                     f"symptom='requeue_stuck_job', service='user', ids=['{JOB}']) puts it back to "
                                     "PENDING")
    _, findings = run(settings, job=job_row("FAILED"))
    assert only(findings)[2] == f"job {JOB} is FAILED in jobs_outbox: the outbox runner gave up pushing it"


# -- pushed, no job_audit row: BullMQ tells why ---------------------------------------------------


def test_pushed_with_redis_unreadable_is_a_warning_not_a_loss(settings) -> None:
    hops, findings = run(settings, job=job_row(updated_age_s=42.0), bull_known=False, guard=None)
    assert only(findings) == ("pushed_not_consumed", "warning", f"job {JOB} was pushed to BullMQ queue 'emails' 42s "
                              "ago and has no job_audit row; Redis could not be read to say more", "job_audit")
    bull_hop = hops[1]
    assert (bull_hop.name, bull_hop.ref, bull_hop.found, bull_hop.state, bull_hop.healthy, bull_hop.detail) == (
        "bullmq_job", f"bull:emails:{JOB}", False, "unknown", None,
        "Redis is unavailable: the BullMQ job could not be observed")
    guard_hop = hops[2]
    assert (guard_hop.name, guard_hop.ref, guard_hop.found, guard_hop.state, guard_hop.healthy, guard_hop.detail) == (
        "completion_guard", f"job:completed:{JOB}", False, "unknown", None,
        "Redis is unavailable: the completion guard could not be read")


@pytest.mark.parametrize(("since", "severity"), [(299.0, "info"), (300.0, "info"), (301.0, "error")])
def test_a_pushed_job_bullmq_does_not_know_is_late_after_pending_ageing_s(settings, since, severity) -> None:
    _, findings = run(settings, job=job_row(age_s=9999.0, updated_age_s=since))
    assert only(findings) == ("pushed_not_consumed", severity, f"job {JOB} was pushed to queue 'emails' {since:.0f}s "
                              "ago but BullMQ has no such job and job_audit has no row: the job was lost (Redis "
                              "flushed or evicted) or pushed to another queue", "bullmq_job")
    assert findings[0].next_step == ("inspect_queue(queue='emails'); check the runner's Redis and the job's target")
    hops, _ = run(settings, job=job_row(updated_age_s=since))
    bull_hop = hops[1]
    assert (bull_hop.name, bull_hop.ref, bull_hop.found, bull_hop.state, bull_hop.healthy, bull_hop.detail) == (
        "bullmq_job", f"bull:emails:{JOB}", False, "absent", None,
        "no job hash and no state structure lists it (removed on completion, or never pushed here)")


def test_a_pushed_job_without_updated_at_counts_from_its_age(settings) -> None:
    _, findings = run(settings, job=job_row(age_s=301.0, updated_age_s=None))
    assert only(findings)[:2] == ("pushed_not_consumed", "error")
    _, findings = run(settings, job=job_row(age_s=None, updated_age_s=None), queue=None)
    assert only(findings)[:3] == ("pushed_not_consumed", "info", f"job {JOB} was pushed to queue (unknown queue) 0s "
                                  "ago but BullMQ has no such job and job_audit has no row: the job was lost (Redis "
                                  "flushed or evicted) or pushed to another queue")


def test_a_set_guard_without_audit_is_success_not_cleaned(settings) -> None:
    hops, findings = run(settings, job=job_row(), guard=GUARD_SET)
    assert only(findings) == ("success_not_cleaned", "warning", f"job {JOB}: the completion guard is set but there is "
                              "no job_audit row: the worker completed it without auditing, so no success event "
                              "cleaned the outbox row", "job_audit")
    guard_hop = hops[2]
    assert (guard_hop.name, guard_hop.found, guard_hop.state, guard_hop.healthy, guard_hop.detail,
            guard_hop.redis_key) == (
        "completion_guard", True, "set", True, "set to 'w-1', ttl 80s: a worker completed the job", GUARD_SET)


def test_a_job_failed_in_bullmq_without_audit(settings) -> None:
    _, findings = run(settings, job=job_row(), bull=bull("failed", attempts_made=3, failed_reason="boom"))
    assert only(findings) == ("handler_failed", "error", f"job {JOB} failed in BullMQ after 3 attempt(s): boom (no "
                              "job_audit row)", "bullmq_job")
    _, findings = run(settings, job=job_row(), bull=bull("failed", attempts_made=1))
    assert only(findings)[2] == f"job {JOB} failed in BullMQ after 1 attempt(s): no reason recorded (no job_audit row)"


@pytest.mark.parametrize(("running_ms", "expected"), [
    (299_999, ("running", "info", "taken 300s ago", ": in progress")),
    (300_000, ("running", "info", "taken 300s ago", ": in progress")),
    (300_001, ("stuck_processing", "warning", "taken 300s ago",
               ": the handler hangs, or the worker does not audit this job")),
    (301_000, ("stuck_processing", "warning", "taken 301s ago",
               ": the handler hangs, or the worker does not audit this job")),
])
def test_an_active_job_without_audit_is_stuck_after_processing_ageing_s_in_ms(settings, running_ms, expected) -> None:
    """BullMQ's running time is in milliseconds (Redis TIME - processedOn); the limit is in seconds."""
    active = bull("active", lock_exists=True, lock_ttl_ms=25_000, processed_on_ms=NOW - running_ms)
    _, findings = run(settings, job=job_row(updated_age_s=5.0), bull=active)
    code, severity, taken, tail = expected
    assert only(findings) == (code, severity, f"job {JOB} is active in BullMQ, its worker holds the lock, {taken}, "
                              f"and has no job_audit row{tail}", "bullmq_job")
    assert findings[0].next_step == f"inspect_queue(queue='emails', job_id='{JOB}'); the worker logs"


@pytest.mark.parametrize(("since", "code"), [(300.0, "running"), (301.0, "stuck_processing")])
def test_an_active_job_with_no_processed_on_counts_from_the_push(settings, since, code) -> None:
    active = bull("active", lock_exists=True, lock_ttl_ms=25_000)
    _, findings = run(settings, job=job_row(updated_age_s=since), bull=active)
    assert only(findings)[0] == code
    assert f"taken {since:.0f}s ago" in findings[0].sentence


def test_a_completed_bullmq_job_without_audit(settings) -> None:
    _, findings = run(settings, job=job_row(), bull=bull("completed", attempts_made=1))
    assert only(findings) == ("success_not_cleaned", "warning", f"job {JOB} is completed in BullMQ but has no "
                              "job_audit row: the worker does not audit it, so no success event cleaned the outbox "
                              "row", "job_audit")


@pytest.mark.parametrize(("state", "since", "severity", "paused"), [
    ("waiting", 300.0, "info", ""), ("waiting", 301.0, "error", ""),
    ("paused", 10.0, "info", " (the queue is paused)"), ("prioritized", 400.0, "error", ""),
])
def test_a_job_nobody_takes(settings, state, since, severity, paused) -> None:
    _, findings = run(settings, job=job_row(updated_age_s=since), bull=bull(state))
    assert only(findings) == ("pushed_not_consumed", severity, f"job {JOB} waits in BullMQ queue 'emails' (state "
                              f"{state}){paused} since it was pushed {since:.0f}s ago, and no worker took it: worker "
                              "stopped or listening to another queue", "bullmq_job")
    assert findings[0].next_step == ("inspect_queue(queue='emails'); check the worker for that queue runs "
                                     "(verify_flow checks the target)")


# -- BullMQ alone: stalled, scheduled, overdue (ms) ------------------------------------------------


def test_a_stalled_job_names_the_lock_and_the_worker_liveness(settings) -> None:
    stalled = bull("active", lock_exists=False, processed_on_ms=NOW - 42_500, processed_by="worker-7",
                   liveness=QueueLiveness(workers=0))
    hops, findings = run(settings, job=job_row(), bull=stalled)
    assert only(findings) == ("stalled", "error", f"job {JOB} is active in BullMQ queue 'emails' (taken 42s ago by "
                              f"Redis's clock, by worker-7) but its lock bull:emails:{JOB}:lock is gone: the worker "
                              "that ran it died or lost its lock, so the job is stalled; no worker of queue 'emails' "
                              "is connected, so nothing moves it back to wait: BullMQ's stalled checker runs only "
                              "inside workers; start a worker of that queue", "bullmq_job")
    assert findings[0].next_step == ("inspect_queue(queue='emails') lists the stalled jobs; start or restart a worker "
                                     "of 'emails' (its stalled checker moves the job back to wait); or "
                                     "propose_remediation(symptom='requeue_stuck_job', service=<the job's service>, "
                                     f"ids=['{JOB}'])")
    bull_hop = hops[1]
    assert (bull_hop.found, bull_hop.state, bull_hop.healthy, bull_hop.bull) == (True, "active", False, stalled)
    assert bull_hop.detail == ("state active, attempts made ?, lock gone (the worker died or lost it), taken 42s ago "
                               "by worker-7")


def test_a_stalled_job_without_times_nor_liveness(settings) -> None:
    _, findings = run(settings, job=job_row(), bull=bull("active", lock_exists=False, redis_now_ms=None))
    assert only(findings)[2] == (f"job {JOB} is active in BullMQ queue 'emails' but its lock bull:emails:{JOB}:lock "
                                 "is gone: the worker that ran it died or lost its lock, so the job is stalled")
    _, findings = run(settings, job=job_row(), bull=bull("active", lock_exists=False, processed_on_ms=NOW - 1000))
    assert "(taken 1s ago by Redis's clock)" in findings[0].sentence


def test_bull_problem_with_an_unknown_queue(settings) -> None:
    stalled = bull("active", lock_exists=False, redis_now_ms=None)
    found = bull_problem(settings, stalled, None, JOB)
    assert found is not None and found.sentence.startswith(f"job {JOB} is active in BullMQ queue (unknown queue) but")
    assert bull_problem(settings, None, "emails", JOB) is None
    assert bull_problem(settings, bull("waiting"), "emails", JOB) is None
    assert bull_problem(settings, bull("delayed", delayed_until_ms=None), "emails", JOB) is None
    # a due time but no overdue (Redis TIME not read, or the job has left the delayed set): nothing to judge
    assert bull_problem(settings, bull("delayed", delayed_until_ms=NOW, redis_now_ms=None), "emails", JOB) is None
    assert bull_problem(settings, bull("waiting", delayed_until_ms=NOW - 999_000), "emails", JOB) is None
    assert bull_problem(settings, bull("active", lock_exists=True), "emails", JOB) is None


@pytest.mark.parametrize(("overdue_ms", "expected"), [
    (59_999, ("scheduled", "info")),
    (60_000, ("scheduled", "info")),
    (60_001, ("pushed_not_consumed", "error")),
])
def test_a_delayed_job_is_late_only_past_delayed_overdue_ms(settings, overdue_ms, expected) -> None:
    due = NOW - overdue_ms
    delayed = bull("delayed", delayed_until_ms=due, attempts_made=2, liveness=QueueLiveness(workers=0))
    hops, findings = run(settings, job=job_row(), bull=delayed)
    assert only(findings)[:2] == expected
    assert hops[1].healthy is (expected[0] == "scheduled")
    assert hops[1].detail == f"state delayed, attempts made 2, due {overdue_ms // 1000}s ago"


def test_a_delayed_job_past_due_sentence(settings) -> None:
    delayed = bull("delayed", delayed_until_ms=NOW - 125_000, liveness=QueueLiveness(workers=0))
    found = bull_problem(settings, delayed, "emails", JOB)
    assert found is not None
    assert (found.code, found.severity, found.hop) == ("pushed_not_consumed", "error", "bullmq_job")
    assert found.sentence == (f"job {JOB} is delayed in BullMQ queue 'emails' and was due at 2023-11-14T22:11:15+00:00 "
                              "(125s ago, more than 60s): no worker promoted it to wait; no worker of queue 'emails' "
                              "is connected, so nothing moves it back to wait: BullMQ's stalled checker runs only "
                              "inside workers; start a worker of that queue")
    assert found.next_step == ("inspect_queue(queue='emails'); start a worker of 'emails' (workers promote due delayed "
                               "jobs)")
    found = bull_problem(settings, delayed.model_copy(update={"liveness": None}), "emails", JOB)
    assert found is not None and found.sentence.endswith("(125s ago, more than 60s): no worker promoted it to wait")


def test_a_delayed_job_not_due_yet_is_scheduled(settings) -> None:
    delayed = bull("delayed", delayed_until_ms=NOW + 90_000, attempts_made=1)
    hops, findings = run(settings, job=job_row(), bull=delayed)
    assert only(findings) == ("scheduled", "info", f"job {JOB} is delayed in BullMQ queue 'emails' until "
                              "2023-11-14T22:14:50+00:00 (in 90s) (retry after attempt 1, backoff): scheduled, not "
                              "late", "bullmq_job")
    assert findings[0].next_step == "nothing to do before 2023-11-14T22:14:50+00:00; trace again after it"
    assert hops[1].detail == "state delayed, attempts made 1, due in 90s"
    _, findings = run(settings, job=job_row(), bull=bull("delayed", delayed_until_ms=NOW + 1_000, attempts_made=0))
    assert findings[0].sentence == (f"job {JOB} is delayed in BullMQ queue 'emails' until 2023-11-14T22:13:21+00:00 "
                                    "(in 1s): scheduled, not late")
    hops, findings = run(settings, job=job_row(), bull=bull("delayed", delayed_until_ms=NOW - 30_000))
    assert "(in 0s)" in findings[0].sentence  # past due but within the limit: not "in -30s"
    assert hops[1].detail == "state delayed, attempts made ?, due 30s ago"
    hops, _ = run(settings, job=job_row(), bull=bull("delayed", delayed_until_ms=NOW))
    assert hops[1].detail == "state delayed, attempts made ?, due 0s ago"  # due this very millisecond


def test_the_bullmq_hop_detail(settings) -> None:
    held = bull("active", lock_exists=True, lock_ttl_ms=25_000, attempts_made=1, attempts_started=2,
                processed_on_ms=NOW - 7_003, failed_reason="e" * 300)
    hops, _ = run(settings, job=job_row(), bull=held)
    h = hops[1]
    assert (h.name, h.ref, h.found, h.state, h.healthy) == ("bullmq_job", f"bull:emails:{JOB}", True, "active", True)
    assert h.detail == ("state active, attempts made 1, attempts started 2, lock held (ttl 25000 ms), taken 7s ago, "
                        f"failed reason: {'e' * 200}")
    hops, _ = run(settings, job=job_row(), bull=bull("failed", attempts_made=0))
    assert (hops[1].healthy, hops[1].detail) == (False, "state failed, attempts made 0")
    hops, _ = run(settings, job=job_row(), bull=bull("waiting"))
    assert (hops[1].healthy, hops[1].detail) == (True, "state waiting, attempts made ?")
    hops, _ = run(settings, job=job_row(), bull=bull("active", lock_exists=True, redis_now_ms=None))
    assert hops[1].detail == "state active, attempts made ?, lock held (ttl None ms)"


def test_the_hops_of_a_job_with_no_row(settings) -> None:
    hops, _ = run(settings)
    assert [(h.name, h.ref, h.found, h.state, h.healthy, h.detail) for h in hops] == [
        ("jobs_outbox", f"jobs_outbox {JOB}", False, "absent", None,
         "no row: deleted by the success post-processor, purged, or never written"),
        ("bullmq_job", f"bull:?:{JOB}", False, "unknown", None,
         "queue unknown: no jobs_outbox row to read its target from"),
        ("completion_guard", f"job:completed:{JOB}", False, "absent", None,
         "not set: no worker completed the job (or the guard expired)"),
        ("job_audit", f"job_audit job_id={JOB}", False, "absent", None,
         "no job_audit row: no worker started the job (or it was purged)"),
    ]
    assert hops[2].redis_key == GUARD_ABSENT


def test_the_hops_of_a_job_with_its_rows_and_outcome(settings) -> None:
    outcome_hop = Hop(name="outcome_event", ref="user.event_queue e-5", found=True, state="COMPLETED", healthy=True,
                      detail="d")
    ok = verdict("ok", "ok", "fine")
    hops, _ = run(settings, job=job_row(), audit=audit_row("COMPLETED"), bull=bull("completed"),
                         outcomes=[(event_row(), [outcome_hop], [ok])])
    assert [(h.name, h.ref, h.found, h.state, h.healthy, h.detail) for h in hops] == [
        ("jobs_outbox", f"user.jobs_outbox {JOB}", True, "COMPLETED", True, "hint COMPLETED"),
        ("bullmq_job", f"bull:emails:{JOB}", True, "completed", True, "state completed, attempts made ?"),
        ("completion_guard", f"job:completed:{JOB}", False, "absent", None,
         "not set: no worker completed the job (or the guard expired)"),
        ("job_audit", f"user.job_audit job_id={JOB}", True, "COMPLETED", True, "COMPLETED"),
        ("outcome_event", "user.event_queue e-5", True, "COMPLETED", True, "d"),
    ]
    assert hops[0].row is not None and hops[3].row is not None
    hops, _ = run(settings, job=job_row("PENDING"), audit=audit_row("FAILED"))
    assert (hops[0].healthy, hops[0].detail, hops[3].healthy) == (False, "hint PENDING", False)
    no_hint = job_row("PENDING").model_copy(update={"hint": None})
    hops, _ = run(settings, job=no_hint)
    assert hops[0].detail == "PENDING"


# -- no row at all: purged only with evidence; inconclusive when a service or Redis was not read ----


def test_no_row_and_no_evidence_is_not_found(settings) -> None:
    _, findings = run(settings, searched=["user", "billing"])
    assert only(findings) == ("not_found", "warning", f"no jobs_outbox or job_audit row for job {JOB} in user, "
                              "billing, and no trace in Redis or event_queue. Finished rows older than the retention "
                              "(86400s) are purged, so an old job leaves nothing; a recent one was never written to "
                              "these databases", "jobs_outbox")
    _, findings = run(settings, searched=[])
    assert "in no service, and no trace" in findings[0].sentence


def test_a_service_that_could_not_be_read_makes_a_missing_job_inconclusive(settings) -> None:
    _, findings = run(settings, searched=["user"], unavailable=["billing"])
    assert only(findings) == ("inconclusive", "warning", f"no jobs_outbox or job_audit row for job {JOB} in user, but "
                              "billing could not be searched (see unavailable): the job may be there", "jobs_outbox")
    assert findings[0].next_step == "fix the access to billing and trace again, or pass service=..."
    _, findings = run(settings, searched=[], unavailable=["user", "billing"])
    assert findings[0].sentence.startswith(f"no jobs_outbox or job_audit row for job {JOB} in no service, but user, "
                                           "billing could not")
    _, findings = run(settings, searched=["user", "orders"], unavailable=["billing"])
    assert findings[0].sentence.startswith(f"no jobs_outbox or job_audit row for job {JOB} in user, orders, but ")


def test_redis_that_could_not_be_read_makes_a_missing_job_inconclusive(settings) -> None:
    _, findings = run(settings, guard=None, bull_known=False, redis_known=False)
    assert only(findings)[:3] == ("inconclusive", "warning", f"no jobs_outbox or job_audit row for job {JOB} in user, "
                                  "but redis could not be searched (see unavailable): the job may be there")
    assert findings[0].next_step == "fix the access to redis and trace again, or pass service=..."
    _, findings = run(settings, guard=None, unavailable=["billing"], redis_known=False)
    assert "but billing, redis could not be searched" in findings[0].sentence
    assert findings[0].next_step == "fix the access to billing, redis and trace again, or pass service=..."


def test_a_job_with_evidence_that_it_ran_is_purged(settings) -> None:
    outcome_hop = Hop(name="outcome_event", ref="user.event_queue e-5", found=True, state="COMPLETED", healthy=True,
                      detail="d")
    hops, findings = run(settings, guard=GUARD_SET, outcomes=[(event_row(), [outcome_hop], [])], unavailable=["x"])
    assert only(findings) == ("purged", "info", f"job {JOB} has no jobs_outbox nor job_audit row, but the completion "
                              f"guard job:completed:{JOB} is set; 1 outcome event(s) in event_queue "
                              "(user:job.succeeded): it ran and its finished rows were purged (retention 86400s)",
                              "jobs_outbox")
    assert hops[-1] == outcome_hop
    _, findings = run(settings, bull=bull("completed"))
    assert only(findings)[2] == (f"job {JOB} has no jobs_outbox nor job_audit row, but BullMQ still holds it "
                                 "(completed): it ran and its finished rows were purged (retention 86400s)")


# -- job_audit FAILED / PROCESSING ------------------------------------------------------------------


def test_a_failed_handler_with_its_message_and_retry(settings) -> None:
    audit = audit_row("FAILED", error_message="SMTP 550 " + "y" * 400)
    retry = bull("delayed", attempts_made=1, delayed_until_ms=NOW + 5_000)
    problem = verdict("in_pel", "warning", "pel")
    _, findings = run(settings, job=job_row(), audit=audit, bull=retry,
                         outcomes=[(event_row("user:job.failed"), [], [verdict("ok", "ok", "fine"), problem])])
    assert [(f.code, f.severity, f.sentence, f.hop) for f in findings] == [
        ("handler_failed", "error", f"job {JOB} (send-email) failed in its handler: SMTP 550 {'y' * 291}; BullMQ will "
         "retry it (attempt 1/3); 1 failure event(s) (user:job.failed)", "job_audit"),
        ("in_pel", "warning", "pel", None),
    ]


@pytest.mark.parametrize(("state", "attempts", "retrying"), [
    ("waiting", 2, "; BullMQ will retry it (attempt 2/3)"), ("waiting", 3, ""), ("delayed", 4, ""),
    ("delayed", 0, "; BullMQ will retry it (attempt 0/3)"), ("failed", 1, ""), ("active", 1, ""),
])
def test_a_failed_handler_is_retried_only_below_the_attempts(settings, state, attempts, retrying) -> None:
    _, findings = run(settings, job=job_row(), audit=audit_row("FAILED"), bull=bull(state, attempts_made=attempts))
    expected_attempts = f" (attempt {attempts}/3)" if retrying else ""
    assert only(findings)[2] == f"job {JOB} (send-email) failed in its handler: no error_message{retrying}"
    assert expected_attempts in findings[0].sentence
    _, findings = run(settings, audit=audit_row("FAILED"), bull=None)
    assert only(findings)[2] == f"job {JOB} (send-email) failed in its handler: no error_message"


def test_a_failed_handler_with_no_bull_attempts_counts_zero(settings) -> None:
    """``attempts_made`` None (BullMQ 5 before the first attempt ends) is 0: below the attempts, shown as 0."""
    _, findings = run(settings, audit=audit_row("FAILED"), bull=bull("waiting"))
    assert findings[0].sentence.endswith("; BullMQ will retry it (attempt 0/3)")


def test_a_processing_audit_with_a_stalled_job_is_stalled(settings) -> None:
    _, findings = run(settings, job=job_row(), audit=audit_row("PROCESSING", updated_age_s=1.0),
                      bull=bull("active", lock_exists=False))
    assert only(findings)[:2] == ("stalled", "error")
    assert findings[0].sentence.startswith(f"job {JOB} is active in BullMQ queue 'emails' but its lock ")


@pytest.mark.parametrize(("running_ms", "expected"), [
    (299_999, ("running", "info", f"job {JOB} is running (PROCESSING for 300s by Redis's clock, its worker holds the "
                                  "lock)", "job_audit")),
    (300_000, ("running", "info", f"job {JOB} is running (PROCESSING for 300s by Redis's clock, its worker holds the "
                                  "lock)", "job_audit")),
    (300_001, ("stuck_processing", "warning", f"job {JOB} is PROCESSING in job_audit for 300s by Redis's clock "
                                              "(> 300s): its worker is alive (it renews the lock) but the handler "
                                              "hangs", "job_audit")),
])
def test_a_processing_audit_is_stuck_after_processing_ageing_s_in_ms(settings, running_ms, expected) -> None:
    """The audit row's times are the worker's clock: BullMQ's running time (ms, Redis's clock) wins."""
    active = bull("active", lock_exists=True, lock_ttl_ms=20_000, processed_on_ms=NOW - running_ms)
    _, findings = run(settings, job=job_row(), audit=audit_row("PROCESSING", updated_age_s=9999.0), bull=active)
    assert only(findings) == expected
    if expected[0] == "running":
        assert findings[0].next_step == "wait, then trace again"


@pytest.mark.parametrize(("since", "expected"), [
    (300.0, ("running", "info", f"job {JOB} is running (PROCESSING for 300s since its started_at)")),
    (301.0, ("stuck_processing", "error", f"job {JOB} is PROCESSING in job_audit for 301s since its started_at "
                                          "(> 300s): the worker died while running it, or it hangs")),
])
def test_a_processing_audit_without_bullmq_counts_from_started_at(settings, since, expected) -> None:
    """The worker writes started_at, never job_audit's updated_at: an updated_at age is not read."""
    _, findings = run(settings, audit=audit_row("PROCESSING", age_s=9999.0, updated_age_s=1.0, since_s=since))
    assert only(findings)[:3] == expected


def test_a_processing_audit_of_a_job_no_longer_active_uses_started_at(settings) -> None:
    """A BullMQ job in another state (waiting: retried) has no running time."""
    waiting = bull("waiting", lock_exists=None, processed_on_ms=NOW - 999_000)
    _, findings = run(settings, audit=audit_row("PROCESSING", since_s=10.0), bull=waiting)
    assert only(findings)[2] == f"job {JOB} is running (PROCESSING for 10s since its started_at)"
    _, findings = run(settings, audit=audit_row("PROCESSING", age_s=12.0, updated_age_s=None))
    assert only(findings)[2] == f"job {JOB} is running (PROCESSING for 12s since its created_at)"
    _, findings = run(settings, audit=audit_row("PROCESSING", age_s=None, updated_age_s=None))
    assert only(findings)[2] == f"job {JOB} is running (PROCESSING for 0s since its created_at)"


# -- job_audit COMPLETED ------------------------------------------------------------------------------


def test_a_completed_job_whose_row_was_cleaned_is_ok_unless_its_event_has_a_problem(settings) -> None:
    _, findings = run(settings, audit=audit_row("COMPLETED"))
    assert only(findings) == ("ok", "ok", f"job {JOB} succeeded and its outbox row was cleaned up", None)
    problem = verdict("in_dlq", "error", "dlq")
    _, findings = run(settings, audit=audit_row("COMPLETED"),
                      outcomes=[(event_row(), [], [verdict("ok", "ok", "fine"), problem])])
    assert findings == [problem]


def test_a_completed_job_without_a_success_event(settings) -> None:
    failure = (event_row("user:job.failed"), [], [verdict("ok", "ok", "fine")])
    _, findings = run(settings, job=job_row(), audit=audit_row("COMPLETED"), outcomes=[failure],
                      success_types={"user:job.succeeded", "job.succeeded"})
    assert only(findings) == ("success_not_cleaned", "error", f"job {JOB} succeeded (job_audit COMPLETED) but "
                              "event_queue has no success event for it (types job.succeeded, user:job.succeeded, job "
                              "id at payload.after.job_id): the audit trigger notify_job_audit_status_change did not "
                              "write one, or the row was purged (COMPLETED rows older than 86400s), or the trigger "
                              "puts the job id elsewhere ([conventions] job_outcome_id_keys); nothing deletes the "
                              "jobs_outbox row", "outcome_event")
    assert findings[0].next_step == ("mesh-mcp doctor checks the trigger notify_job_audit_status_change on job_audit; "
                                     "no remediation symptom deletes the row while no success event proves the "
                                     "success was delivered")


def test_a_completed_job_whose_success_event_has_a_problem_names_it(settings) -> None:
    pending = verdict("event_pending", "error", "pending")
    first = (event_row(), [], [verdict("in_dlq", "error", "older")])
    last = (event_row(), [], [verdict("ok", "ok", "fine"), pending])
    _, findings = run(settings, job=job_row(), audit=audit_row("COMPLETED"), outcomes=[first, last])
    assert findings == [pending]  # the latest success event's own problem


@pytest.mark.parametrize(("since", "severity", "tail"), [
    (299.0, "info", " (it may just be about to)"), (300.0, "info", " (it may just be about to)"),
    (301.0, "error", ""),
])
def test_a_delivered_success_event_with_the_row_still_there(settings, since, severity, tail) -> None:
    _, findings = run(settings, job=job_row(), audit=audit_row("COMPLETED", age_s=9999.0, since_s=since),
                      outcomes=[(event_row(), [], [verdict("ok", "ok", "fine")])])
    assert only(findings) == ("success_not_cleaned", severity, f"job {JOB} succeeded and its success event e-5 "
                              "(user:job.succeeded) was delivered and acknowledged, yet the jobs_outbox row is still "
                              f"there: the common success post-processor did not delete it{tail}", "jobs_outbox")


def test_a_delivered_success_event_ages_from_the_audit_row(settings) -> None:
    _, findings = run(settings, job=job_row(), audit=audit_row("COMPLETED", age_s=301.0, updated_age_s=None),
                      outcomes=[(event_row(), [], [])])
    assert only(findings)[1] == "error"
    _, findings = run(settings, job=job_row(), audit=audit_row("COMPLETED", age_s=None, updated_age_s=None),
                      outcomes=[(event_row(), [], [])])
    assert only(findings)[1] == "info"
