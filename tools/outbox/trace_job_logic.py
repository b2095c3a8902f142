"""The reasoning of ``trace_job`` over what was observed (no I/O here, so it is easy to read).

Inputs are the jobs_outbox and job_audit rows (or None), the BullMQ job state, the
completion guard key and the job-outcome events with their own hops and findings. The
output is the list of hops in chain order and the findings, also in chain order:

1. jobs_outbox PENDING / PROCESSING / FAILED: the runner has not pushed the job;
2. pushed, no job_audit row: BullMQ tells why (waiting: not consumed; failed: handler;
   active with its lock: ``running``; active without its lock: ``stalled``; delayed and not
   due: ``scheduled``, past due by ``[limits] delayed_overdue_ms``: ``pushed_not_consumed``;
   gone: lost or wrong queue);
3. job_audit FAILED: ``handler_failed``; PROCESSING (or PENDING) while the completion guard is set:
   ``audit_not_closed`` (the handler succeeded, the audit row could not be closed; the cause when the
   live trigger check finds it, or why it could not check the trigger); PROCESSING: BullMQ first
   (``stalled`` when the lock is gone, whatever the row's times say: they come from the worker's clock and time zone),
   then ``stuck_processing`` when it has run for long (counted from ``started_at``, else
   ``created_at``: the worker never writes job_audit's ``updated_at``), else ``running``;
4. job_audit COMPLETED with the jobs_outbox row still there: the success event's own
   problem if it has one (``event_pending``, ``in_dlq``, ...), else ``success_not_cleaned``;
5. no row at all: ``purged`` when Redis or event_queue prove the job finished, else
   ``not_found``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from server.config import Settings
from tools.outbox.audit_trigger_check import TriggerFinding
from tools.outbox.bull_state import BullJobState
from tools.outbox.job_next_steps import NOT_AUDITED_NEXT, audit_not_closed, retry_next
from tools.outbox.model import Hop, OutboxRow, Verdict
from tools.outbox.rows import RowTimes
from tools.outbox.verdicts import verdict


def _bull_hop(queue: str | None, bull: BullJobState | None, bull_known: bool, job_id: str, prefix: str,
              overdue_limit_ms: int) -> Hop:
    if queue is None:
        return Hop(name="bullmq_job", ref=f"{prefix}:?:{job_id}", found=False, state="unknown", healthy=None,
                   detail="queue unknown: no jobs_outbox row to read its target from")
    ref = f"{prefix}:{queue}:{job_id}"
    if not bull_known:
        return Hop(name="bullmq_job", ref=ref, found=False, state="unknown", healthy=None,
                   detail="Redis is unavailable: the BullMQ job could not be observed")
    if bull is None:
        return Hop(name="bullmq_job", ref=ref, found=False, state="absent", healthy=None,
                   detail="no job hash and no state structure lists it (removed on completion, or never pushed here)")
    detail = f"state {bull.state}, attempts made {bull.attempts_made if bull.attempts_made is not None else '?'}"
    if bull.attempts_started is not None:
        detail += f", attempts started {bull.attempts_started}"
    if bull.state == "active":
        detail += (f", lock held (ttl {bull.lock_ttl_ms} ms)" if bull.lock_exists
                   else ", lock gone (the worker died or lost it)")
        if bull.running_ms() is not None:
            detail += f", taken {bull.running_ms() // 1000}s ago" + (f" by {bull.processed_by}" if bull.processed_by
                                                                    else "")
    overdue = bull.overdue_ms()
    if overdue is not None:
        detail += f", due {'in ' + str(-overdue // 1000) + 's' if overdue < 0 else str(overdue // 1000) + 's ago'}"
    if bull.failed_reason:
        detail += f", failed reason: {bull.failed_reason[:200]}"
    healthy = bull.state != "failed" and not bull.stalled and not (overdue is not None and overdue > overdue_limit_ms)
    return Hop(name="bullmq_job", ref=ref, found=True, state=bull.state, healthy=healthy, detail=detail, bull=bull)


def _guard_hop(guard: dict[str, Any] | None, key_pattern: str, job_id: str) -> Hop:
    key = key_pattern.replace("{job_id}", job_id)
    if guard is None:
        return Hop(name="completion_guard", ref=key, found=False, state="unknown", healthy=None,
                   detail="Redis is unavailable: the completion guard could not be read")
    if guard["exists"]:
        return Hop(name="completion_guard", ref=key, found=True, state="set", healthy=True,
                   detail=f"set to {guard['value']!r}, ttl {guard['ttl_s']}s: a worker completed the job",
                   redis_key=guard)
    return Hop(name="completion_guard", ref=key, found=False, state="absent", healthy=None,
               detail="not set: no worker completed the job (or the guard expired)", redis_key=guard)


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="seconds")


def bull_problem(settings: Settings, bull: BullJobState | None, queue: str | None, job_id: str) -> Verdict | None:
    """What BullMQ alone proves about an unfinished job: ``stalled``, ``scheduled``, or a delayed job past due."""
    if bull is None:
        return None
    q = f"'{queue}'" if queue else "(unknown queue)"
    if bull.stalled:
        running = bull.running_ms()
        taken = (f" (taken {running // 1000}s ago by Redis's clock"
                 + (f", by {bull.processed_by}" if bull.processed_by else "") + ")") if running is not None else ""
        lock = f"{bull.key}:{settings.conventions.bullmq_lock_suffix}"
        live = bull.liveness.sentence(str(queue)) if bull.liveness is not None else ""
        return verdict(
            "stalled", "error",
            f"job {job_id} is active in BullMQ queue {q}{taken} but its lock {lock} is gone: the worker that ran it "
            f"died or lost its lock, so the job is stalled" + (f"; {live}" if live else ""),
            f"inspect_queue(queue={q}) lists the stalled jobs; start or restart a worker of {q} (its stalled checker "
            "moves the job back to wait); or propose_remediation(symptom='requeue_stuck_job', service=<the job's "
            f"service>, ids=['{job_id}'])", "bullmq_job")
    overdue = bull.overdue_ms()
    if overdue is None or bull.delayed_until_ms is None:
        return None
    due = _iso(bull.delayed_until_ms)
    if overdue > settings.limits.delayed_overdue_ms:
        live = bull.liveness.sentence(str(queue)) if bull.liveness is not None else ""
        return verdict(
            "pushed_not_consumed", "error",
            f"job {job_id} is delayed in BullMQ queue {q} and was due at {due} ({overdue // 1000}s ago, more than "
            f"{settings.limits.delayed_overdue_ms // 1000}s): no worker promoted it to wait"
            + (f"; {live}" if live else ""),
            f"inspect_queue(queue={q}); start a worker of {q} (workers promote due delayed jobs)", "bullmq_job")
    retry = (f" (retry after attempt {bull.attempts_made}, backoff)" if bull.attempts_made else "")
    return verdict("scheduled", "info",
                   f"job {job_id} is delayed in BullMQ queue {q} until {due} (in {max(0, -overdue) // 1000}s){retry}: "
                   "scheduled, not late", f"nothing to do before {due}; trace again after it", "bullmq_job")


def _not_pushed(settings: Settings, job: OutboxRow, times: RowTimes | None, job_id: str) -> Verdict | None:
    st = settings.conventions.statuses
    limits = settings.limits
    age = job.age_s or 0.0
    since = job.updated_age_s if job.updated_age_s is not None else age
    since_col = "updated_at" if job.updated_age_s is not None else "created_at"
    last_error = job.columns.get(settings.conventions.columns.last_error)
    if job.status == st.pending:
        if times is not None and times.scheduled_in_s is not None and times.scheduled_in_s > 0:
            return verdict("pending_in_outbox", "info",
                           f"job {job_id} is PENDING, scheduled to run in {times.scheduled_in_s:.0f}s: not late",
                           "wait for its scheduled time", "jobs_outbox")
        late = age > limits.pending_ageing_s
        return verdict(
            "pending_in_outbox", "error" if late else "info",
            f"job {job_id} is PENDING in jobs_outbox for {age:.0f}s"
            + (f" (> {limits.pending_ageing_s}s): the outbox runner is stopped or cannot reach the database"
               if late else ": waiting for the outbox runner (not late yet)"), hop="jobs_outbox")
    if job.status == st.processing:
        if since > limits.processing_ageing_s:
            return verdict("stuck_processing", "error",
                           f"job {job_id} is PROCESSING in jobs_outbox for {since:.0f}s since its {since_col} (> "
                           f"{limits.processing_ageing_s}s): the runner died between claim and push",
                           "restart the outbox runner; then propose_remediation(symptom='requeue_stuck_job', "
                           f"service='{job.service}', ids=['{job_id}'])", "jobs_outbox")
        return verdict("pending_in_outbox", "info", f"job {job_id} was claimed {since:.0f}s ago and is being pushed",
                       hop="jobs_outbox")
    if job.status == st.failed:
        return verdict("pending_in_outbox", "error",
                       f"job {job_id} is FAILED in jobs_outbox: the outbox runner gave up pushing it"
                       + (f" ({str(last_error)[:300]})" if last_error else ""),
                       "fix the cause (runner logs), then propose_remediation(symptom='requeue_stuck_job', "
                       f"service='{job.service}', ids=['{job_id}']) puts it back to PENDING",
                       "jobs_outbox")
    return None


def _pushed_without_audit(
    settings: Settings, job: OutboxRow, queue: str | None, bull: BullJobState | None, bull_known: bool,
    guard_set: bool, job_id: str,
) -> Verdict:
    limits = settings.limits
    since = job.updated_age_s if job.updated_age_s is not None else (job.age_s or 0.0)
    late = since > limits.pending_ageing_s
    q = f"'{queue}'" if queue else "(unknown queue)"
    if not bull_known:
        return verdict("pushed_not_consumed", "warning",
                       f"job {job_id} was pushed to BullMQ queue {q} {since:.0f}s ago and has no job_audit row; "
                       "Redis could not be read to say more", hop="job_audit")
    if bull is None:
        if guard_set:
            return verdict("success_not_cleaned", "warning",
                           f"job {job_id}: the completion guard is set but there is no job_audit row: the worker "
                           "completed it without auditing, so no success event cleaned the outbox row",
                           NOT_AUDITED_NEXT, "job_audit")
        return verdict("pushed_not_consumed", "error" if late else "info",
                       f"job {job_id} was pushed to queue {q} {since:.0f}s ago but BullMQ has no such job and "
                       "job_audit has no row: the job was lost (Redis flushed or evicted) or pushed to another queue",
                       f"inspect_queue(queue={q}); check the runner's Redis and the job's target", "bullmq_job")
    if bull.state == "failed":
        return verdict("handler_failed", "error",
                       f"job {job_id} failed in BullMQ after {bull.attempts_made} attempt(s): "
                       f"{bull.failed_reason or 'no reason recorded'} (no job_audit row)",
                       retry_next(queue, job_id), "bullmq_job")
    problem = bull_problem(settings, bull, queue, job_id)
    if problem is not None:
        return problem
    if bull.state == "active":
        running_ms = bull.running_ms()
        running_s = running_ms / 1000 if running_ms is not None else since
        long = running_s > limits.processing_ageing_s
        return verdict("stuck_processing" if long else "running", "warning" if long else "info",
                       f"job {job_id} is active in BullMQ, its worker holds the lock, taken {running_s:.0f}s ago, "
                       "and has no job_audit row" + (": the handler hangs, or the worker does not audit this job"
                                                     if long else ": in progress"),
                       f"inspect_queue(queue={q}, job_id='{job_id}'); the worker logs", "bullmq_job")
    if bull.state == "completed":
        return verdict("success_not_cleaned", "warning",
                       f"job {job_id} is completed in BullMQ but has no job_audit row: the worker does not audit it, "
                       "so no success event cleaned the outbox row", NOT_AUDITED_NEXT, "job_audit")
    paused = " (the queue is paused)" if bull.state == "paused" else ""
    return verdict("pushed_not_consumed", "error" if late else "info",
                   f"job {job_id} waits in BullMQ queue {q} (state {bull.state}){paused} since it was pushed "
                   f"{since:.0f}s ago, and no worker took it: worker stopped or listening to another queue",
                   f"inspect_queue(queue={q}); check the worker for that queue runs (verify_flow checks the target)",
                   "bullmq_job")


def _failure_feedback(outcomes: list[tuple[OutboxRow, list[Hop], list[Verdict]]], success_types: set[str],
                      accepted: set[str] | None) -> str:
    """What becomes of a failed job's failure events: their count and types, and when the failure
    post-processor does not accept their type, that mismatch (P4: acknowledged unprocessed)."""
    failures = [row for row, _h, _f in outcomes if row.type not in success_types]
    if not failures:
        return ""
    types = sorted({str(row.type) for row in failures})
    out = f"; {len(failures)} failure event(s) ({', '.join(types)})"
    refused = [t for t in types if accepted and t not in accepted]
    if refused:
        out += (f" that the failure post-processor does not process (it accepts only "
                f"{', '.join(sorted(accepted or []))}): no failure feedback is written (P4)")
    return out


def job_findings(
    settings: Settings,
    *,
    job_id: str,
    job: OutboxRow | None,
    job_times: RowTimes | None,
    audit: OutboxRow | None,
    queue: str | None,
    bull: BullJobState | None,
    bull_known: bool,
    guard: dict[str, Any] | None,
    outcomes: list[tuple[OutboxRow, list[Hop], list[Verdict]]],
    success_types: set[str],
    searched: list[str],
    unavailable: list[str],
    redis_known: bool = True,
    trigger: TriggerFinding | None = None,
    service: str | None = None,
    failure_accepted: set[str] | None = None,
) -> tuple[list[Hop], list[Verdict]]:
    """Hops in chain order and findings (chain order) of one job.

    ``trigger``: what the live check of the audit trigger (:mod:`tools.outbox.audit_trigger_check`) found (a
    cause, could not be checked, or fine), when the tracer ran it (the audit row is not closed while the guard
    is set).
    """
    conv = settings.conventions
    st = conv.statuses
    limits = settings.limits
    hops: list[Hop] = []
    findings: list[Verdict] = []
    if job is not None:
        hops.append(Hop(name="jobs_outbox", ref=f"{job.service}.jobs_outbox {job.id}", found=True, state=job.status,
                        healthy=job.status == st.completed, detail=job.hint or str(job.status), row=job))
    else:
        hops.append(Hop(name="jobs_outbox", ref=f"jobs_outbox {job_id}", found=False, state="absent", healthy=None,
                        detail="no row: deleted by the success post-processor, purged, or never written"))
    hops.append(_bull_hop(queue, bull, bull_known, job_id, conv.bullmq_prefix, limits.delayed_overdue_ms))
    hops.append(_guard_hop(guard, conv.job_completed_key, job_id))
    guard_set = bool(guard and guard["exists"])
    if audit is not None:
        hops.append(Hop(name="job_audit", ref=f"{audit.service}.job_audit job_id={job_id}", found=True,
                        state=audit.status, healthy=audit.status == st.completed,
                        detail=audit.hint or str(audit.status), row=audit))
    else:
        hops.append(Hop(name="job_audit", ref=f"job_audit job_id={job_id}", found=False, state="absent",
                        healthy=None, detail="no job_audit row: no worker started the job (or it was purged)"))
    outcome_findings: list[Verdict] = []
    for _row, chain_hops, chain_findings in outcomes:
        hops.extend(chain_hops)
        outcome_findings.extend(chain_findings)

    not_pushed = _not_pushed(settings, job, job_times, job_id) if job is not None else None
    if not_pushed is not None:
        findings.append(not_pushed)
        return hops, findings
    if audit is None:
        if job is not None:
            findings.append(_pushed_without_audit(settings, job, queue, bull, bull_known, guard_set, job_id))
            return hops, findings
        evidence = []
        if guard_set:
            evidence.append(f"the completion guard {conv.job_completed_key.replace('{job_id}', job_id)} is set")
        if bull is not None:
            evidence.append(f"BullMQ still holds it ({bull.state})")
        if outcomes:
            evidence.append(f"{len(outcomes)} outcome event(s) in event_queue ({outcomes[0][0].type})")
        if evidence:
            findings.append(verdict(
                "purged", "info",
                f"job {job_id} has no jobs_outbox nor job_audit row, but {'; '.join(evidence)}: it ran and its "
                f"finished rows were purged (retention {conv.retention_s}s)", hop="jobs_outbox"))
        elif unavailable or not redis_known:
            missing = [*unavailable, *([] if redis_known else ["redis"])]
            findings.append(verdict(
                "inconclusive", "warning",
                f"no jobs_outbox or job_audit row for job {job_id} in {', '.join(searched) or 'no service'}, but "
                f"{', '.join(missing)} could not be searched (see unavailable): the job may be there",
                f"fix the access to {', '.join(missing)} and trace again, or pass service=...", "jobs_outbox"))
        else:
            where = ", ".join(searched) or "no service"
            sentence = (f"no jobs_outbox or job_audit row for job {job_id} in {where}, and no trace in Redis or "
                        f"event_queue. Finished rows older than the retention ({conv.retention_s}s) are purged, so "
                        "an old job leaves nothing; a recent one was never written to these databases")
            findings.append(verdict("not_found", "warning", sentence, hop="jobs_outbox"))
        # the outcome events' own hops stay visible; their Redis state is history once the job is purged
        return hops, findings
    since = audit.since_s if audit.since_s is not None else (audit.age_s or 0.0)
    since_col = audit.since_column or "created_at"
    if audit.status == st.failed:
        message = audit.columns.get(conv.columns.error_message)
        retrying = ""
        if bull is not None and bull.state in ("delayed", "waiting") and (bull.attempts_made or 0) < conv.job_attempts:
            retrying = f"; BullMQ will retry it (attempt {bull.attempts_made or 0}/{conv.job_attempts})"
        if bull is not None and bull.state == "failed":
            failed_next = retry_next(queue, job_id)
        elif retrying:
            failed_next = "BullMQ retries it by itself; read error_message and the worker logs, then trace again"
        else:
            failed_next = ("read error_message and the worker logs; BullMQ holds no failed job to retry ("
                           + (f"state {bull.state}" if bull is not None else "removed") + "): after the fix, the "
                           "service has to emit the job again")
        findings.append(verdict(
            "handler_failed", "error",
            f"job {job_id} ({audit.type}) failed in its handler: {str(message or 'no error_message')[:300]}{retrying}"
            + _failure_feedback(outcomes, success_types, failure_accepted), failed_next, "job_audit"))
        # one failure event per attempt, all on the same streams: the latest one's delivery tells the story
        findings.extend(f for f in (outcomes[-1][2] if outcomes else []) if f.code != "ok")
        return hops, findings
    if audit.status != st.completed and guard_set:
        findings.append(audit_not_closed(settings, audit, job_id, since, since_col, trigger, service))
        return hops, findings
    if audit.status != st.completed:
        problem = bull_problem(settings, bull, queue, job_id)
        if problem is not None:
            findings.append(problem)
            return hops, findings
        running_ms = bull.running_ms() if bull is not None and bull.state == "active" else None
        held = bull is not None and bull.lock_exists is True
        run_s = running_ms / 1000 if running_ms is not None else since
        clock = "by Redis's clock" if running_ms is not None else f"since its {since_col}"
        if run_s > limits.processing_ageing_s:
            cause = ("its worker is alive (it renews the lock) but the handler hangs" if held else
                     "the worker died while running it, or it hangs")
            if held:
                stuck_next = (f"the worker logs (the handler of {audit.type} hangs); restarting that worker ends its "
                              "lock, the job then stalls and goes back to wait")
            elif bull is None and job is not None:
                stuck_next = (f"propose_remediation(symptom='requeue_stuck_job', service='{audit.service}', "
                              f"ids=['{job_id}']): BullMQ lost the job, the outbox runner pushes it again")
            else:
                stuck_next = (f"inspect_queue(queue='{queue}', job_id='{job_id}') and the worker logs"
                              if queue else "the worker logs; no jobs_outbox row says which queue to look at")
            findings.append(verdict(
                "stuck_processing", "warning" if held else "error",
                f"job {job_id} is {audit.status} in job_audit for {run_s:.0f}s {clock} "
                f"(> {limits.processing_ageing_s}s): {cause}", stuck_next, "job_audit"))
        else:
            findings.append(verdict("running", "info",
                                    f"job {job_id} is running ({audit.status} for {run_s:.0f}s {clock}"
                                    + (", its worker holds the lock" if held else "") + ")",
                                    "wait, then trace again", "job_audit"))
        return hops, findings
    # job_audit COMPLETED
    if job is None:
        # the job is done, but its outcome event's own problems (a group not reading it, ...) still count
        problems = [f for f in outcome_findings if f.code != "ok"]
        findings.extend(problems or [verdict("ok", "ok", f"job {job_id} succeeded and its outbox row was cleaned up")])
        return hops, findings
    success = [(row, f) for row, _, f in outcomes if row.type in success_types]
    if not success:
        findings.append(verdict(
            "success_not_cleaned", "error",
            f"job {job_id} succeeded (job_audit COMPLETED) but event_queue has no success event for it "
            f"(types {', '.join(sorted(success_types))}, job id at payload."
            f"{' or payload.'.join(conv.job_outcome_id_keys) or '(no path configured)'}): the audit trigger "
            f"{conv.audit_trigger} did not write one, or the row was purged (COMPLETED rows older than "
            f"{conv.retention_s}s), or the trigger puts the job id elsewhere ([conventions] job_outcome_id_keys); "
            "nothing deletes the jobs_outbox row",
            f"mesh-mcp doctor checks the trigger {conv.audit_trigger} on job_audit; no remediation symptom deletes the "
            "row while no success event proves the success was delivered", "outcome_event"))
        return hops, findings
    row, event_findings = success[-1]
    problems = [f for f in event_findings if f.code != "ok"]
    if problems:
        findings.extend(problems)
        return hops, findings
    recent = since <= limits.processing_ageing_s
    findings.append(verdict(
        "success_not_cleaned", "info" if recent else "error",
        f"job {job_id} succeeded and its success event {row.id} ({row.type}) was delivered and acknowledged, yet the "
        "jobs_outbox row is still there: the common success post-processor did not delete it"
        + (" (it may just be about to)" if recent else ""),
        "check the common success post-processor's logs; then propose_remediation(symptom='reconcile_outbox', "
        f"service='{job.service}', ids=['{job_id}']) deletes the row (backed up first)", "jobs_outbox"))
    return hops, findings

