"""The verdict codes of ``trace_job`` / ``trace_event``: meaning, default next step, ranking.

A trace collects *findings* (one per problem seen, in chain order); the report's
``verdict`` is the first finding of the worst severity present, i.e. the first broken
link of the chain. Codes are stable: agents and the remediation tools rely on them.
"""

from __future__ import annotations

from tools.outbox.model import Hop, Severity, Verdict, VerdictCode

CATALOGUE: dict[str, tuple[str, str]] = {
    "ok": (
        "Every hop of the chain completed.",
        "Nothing to repair. If the effect is still missing, check the consumer's business logic "
        "(shouldProcess filter, handler) with analyze_impact.",
    ),
    "pending_in_outbox": (
        "The jobs_outbox row is still PENDING (or FAILED to push): the outbox runner has not pushed the job.",
        "Check that the service's outbox runner runs and reaches its database (runner logs).",
    ),
    "stuck_processing": (
        "A row stays PROCESSING: the runner died between claim and push, or the worker died while running the job.",
        "Restart the runner or worker; for a jobs_outbox row stuck since its claim, or a job BullMQ lost with its "
        "worker, propose_remediation(symptom='requeue_stuck_job', service=..., ids=[<job id>]).",
    ),
    "pushed_not_consumed": (
        "The job or message was pushed to Redis but nobody consumed it: worker or consumer group stopped, "
        "wrong queue or stream, or no consumer group.",
        "inspect_queue(queue) / inspect_stream(stream); check the worker or post-processor runs and listens to "
        "that exact queue or stream (verify_flow).",
    ),
    "handler_failed": (
        "The worker ran the job and its handler failed (job_audit FAILED or BullMQ failed).",
        "Read error_message / failedReason and the worker logs; fix the cause, then, for a job BullMQ holds failed, "
        "propose_remediation(symptom='retry_failed_job', queue=..., ids=[<job id>]).",
    ),
    "success_not_cleaned": (
        "The job succeeded (job_audit COMPLETED) but its jobs_outbox row is still there: the success event was not "
        "processed by the common post-processor.",
        "Check the success event's stream and the common post-processor (trace its outcome event); once its success "
        "event was pushed, propose_remediation(symptom='reconcile_outbox', service=..., ids=[<job id>]) deletes the "
        "row (backed up first).",
    ),
    "audit_not_closed": (
        "The job ran and succeeded (its job:completed guard is set) but its job_audit row is still PROCESSING: the "
        "audit row could not be closed (the audit trigger raising on COMPLETED, e.g. a NOT NULL column its INSERT "
        "leaves out), so no success event was written and nothing cleans the outbox row. The sentence gives the "
        "cause the live check of the trigger found, or says the trigger could not be checked and why (an INSERT "
        "without a column list, a write through EXECUTE or a helper function, no trigger at all).",
        "Fix the cause (mesh-mcp doctor names the migration to add); then "
        "propose_remediation(symptom='reconcile_outbox', service=..., ids=[<job id>]) closes the audit row.",
    ),
    "event_pending": (
        "The event_queue row has not been pushed (PENDING, or FAILED to push): outbox runner stopped or Redis "
        "unreachable.",
        "Check the service's outbox runner and its Redis connection (runner logs).",
    ),
    "in_pel": (
        "The message was delivered to a consumer group and is unacknowledged in its PEL (infrastructure error or "
        "still running); it is re-read after claimIntervalMs.",
        "list_pending(stream, group) to see idle times; if it does not move, check the consumer logs.",
    ),
    "dead_consumer": (
        "The message sits in the PEL of a consumer that no longer reads (idle beyond dead_consumer_idle_ms); "
        "consumers only reclaim from *other* consumers.",
        "propose_remediation(symptom='claim_dead_consumer', stream=..., group=...) to move it to a live consumer.",
    ),
    "in_dlq": (
        "The message was dead-lettered after maxRetries business failures and acknowledged; nothing replays it.",
        "Export it with dlq_list, fix the cause, then propose_remediation(symptom='dlq_replay', stream=...).",
    ),
    "trimmed": (
        "The stream no longer holds the message: MAXLEN trimming removed it (the oldest entry is newer).",
        "The message cannot be re-read from Redis; if it was not processed, it has to be emitted again from its "
        "event_queue row (no remediation symptom re-emits a pushed event: see the effect downstream first).",
    ),
    "idempotency_lock_stale": (
        "An idempotency lock is held for a message that failed or is stuck: the next read will be acknowledged "
        "with no effect.",
        "propose_remediation(symptom='clear_stale_lock', stream=..., group=...), then let the message be re-read.",
    ),
    "purged": (
        "The rows are gone but Redis or event_queue shows the item existed and finished: COMPLETED rows older than "
        "the retention are deleted by the runner.",
        "Nothing to repair in the outbox; look for the effect downstream.",
    ),
    "not_found": (
        "Nothing was found for this id.",
        "Check the id and the service (service=None searches every service), or find the row with "
        "query_outbox(type=...).",
    ),
    "stalled": (
        "The job is active in BullMQ but its worker's lock is gone: the worker died or lost its lock while running "
        "it. BullMQ's stalled checker moves it back to wait only while some worker of that queue runs.",
        "Start (or restart) a worker of the queue; or propose_remediation(symptom='requeue_stuck_job', service=..., "
        "ids=[<job id>]) moves it back to wait.",
    ),
    "scheduled": (
        "The job is delayed in BullMQ (scheduled, or waiting for a retry backoff) and is not due yet.",
        "Nothing to do before its due time; trace again after it.",
    ),
    "running": (
        "A worker holds the job and it has not run for long: in progress, not late.",
        "Wait, then trace again.",
    ),
    "entry_not_found": (
        "The stream exists but the entry was not found in what was searched, and nothing proves it was trimmed.",
        "Check the runner pushed it (its logs), another target stream, or a different id field "
        "([conventions] event_id_field); the sentence says what was searched.",
    ),
    "inconclusive": (
        "The answer cannot be given: a service that could hold the item could not be searched, or a hop is "
        "unhealthy with no rule explaining it.",
        "Fix the access to the services named (see unavailable), then trace again.",
    ),
}
"""code -> (meaning, default next step); the docs' verdict table is generated from it."""

EVIDENCE: dict[str, str] = {
    "ok": "every hop was observed and none is unhealthy (a hop with healthy=false and no rule explaining it gives "
          "inconclusive instead)",
    "pending_in_outbox": "the jobs_outbox row is PENDING (late: older than pending_ageing_s; not late: scheduled_at "
                         "in the future), PROCESSING less than processing_ageing_s, or FAILED",
    "stuck_processing": "a row PROCESSING longer than processing_ageing_s; for a job, the running time comes from "
                        "BullMQ (processedOn vs Redis TIME) when the job is active, with its lock held (the handler "
                        "hangs) or no BullMQ job",
    "pushed_not_consumed": "jobs_outbox COMPLETED (pushed) with no job_audit row and the job waiting in BullMQ (or "
                           "gone), or delayed past its due time by more than delayed_overdue_ms; a stream entry the "
                           "group has not delivered, or a stream without consumer group",
    "handler_failed": "job_audit FAILED, or BullMQ failed with no job_audit row",
    "success_not_cleaned": "job_audit COMPLETED (or the completion guard / BullMQ completed) while the jobs_outbox row "
                           "is still there and the success event shows no problem of its own",
    "audit_not_closed": "job_audit PROCESSING (or PENDING) while the job:completed:<id> guard is set; the cause is the "
                        "live check of the audit trigger against event_queue's NOT NULL columns (pg_catalog): a "
                        "cause, \"could not be checked: <why>\", or checked and fine",
    "event_pending": "the event_queue row is PENDING, FAILED, or PROCESSING for less than processing_ageing_s",
    "in_pel": "XPENDING lists the entry for the group, its consumer idle less than dead_consumer_idle_ms",
    "dead_consumer": "XPENDING lists the entry on a consumer whose XINFO CONSUMERS idle is at least "
                     "dead_consumer_idle_ms",
    "in_dlq": "the entry is acknowledged and <stream>-dlq holds an entry whose messageId is its id",
    "trimmed": "the entry is absent after the whole search and XINFO STREAM proves trimming: Redis >= 7 "
               "entries-added > length, the first entry newer than the push time, max-deleted-entry-id (XDEL only) "
               "older than it; Redis 6.2 the first entry newer than the push time and the length at the configured "
               "MAXLEN",
    "idempotency_lock_stale": "the idempotency lock exists while the message failed, was dead-lettered or sits in "
                              "the PEL longer than claim_interval_ms",
    "purged": "no row in any searched service, every service searched, and the completion guard, BullMQ or a "
              "job-outcome event proves the job ran",
    "not_found": "no row in any service, every configured service was searched (and Redis read), and no trace of "
                 "the item; or the target stream does not exist",
    "stalled": "the job id is in BullMQ's active list and its lock key <prefix>:<queue>:<id>:lock does not exist; "
               "CLIENT LIST (connection names <prefix>:<base64 queue>) says whether a worker of the queue runs",
    "scheduled": "the job is in BullMQ's delayed set and its due time (score, else timestamp + delay) is ahead of "
                 "Redis TIME, or past it by at most delayed_overdue_ms",
    "running": "the job is active with its lock held (or job_audit PROCESSING) for at most processing_ageing_s",
    "entry_not_found": "the stream exists, the entry was searched (window shifted by the measured clock offset and "
                       "widened up to stream_window_max_ms, or the whole stream when shorter than "
                       "stream_read_whole_max) and not found, and XINFO STREAM does not prove trimming",
    "inconclusive": "the item was not found where searched but a service (or Redis) could not be searched, or a hop "
                    "is unhealthy with no rule explaining it, or Redis could not be read for a stream of a pushed "
                    "event",
}
"""code -> the evidence a verdict of that code rests on; docs/runtime-diagnosis.md lists it."""

SEVERITY_RANK: dict[str, int] = {"error": 0, "warning": 1, "info": 2, "ok": 3}

GROUP_PRIORITY: dict[str, int] = {
    "in_dlq": 0,
    "dead_consumer": 1,
    "idempotency_lock_stale": 2,
    "in_pel": 3,
    "pushed_not_consumed": 4,
    "trimmed": 5,
    "entry_not_found": 6,
    "not_found": 6,
    "ok": 9,
}
"""Among the parallel consumer groups of one message, the most serious code comes first."""


def verdict(
    code: VerdictCode, severity: Severity, sentence: str, next_step: str | None = None, hop: str | None = None
) -> Verdict:
    return Verdict(code=code, severity=severity, sentence=sentence, next_step=next_step or CATALOGUE[code][1], hop=hop)


def overall(findings: list[Verdict], ok_sentence: str, hops: list[Hop] | None = None) -> Verdict:
    """The first finding of the worst severity present, or ``ok``.

    ``ok`` is decided from every hop together: while any hop is unhealthy (``healthy`` is
    False) and no finding explains it, the verdict is ``inconclusive`` naming those hops.
    """
    real = [f for f in findings if f.code != "ok"]
    if not real:
        sick = [h for h in hops or [] if h.healthy is False]
        if sick:
            names = "; ".join(f"{h.name} {h.ref} is {h.state}" for h in sick)
            return verdict("inconclusive", "warning",
                           f"no rule explains the unhealthy hop(s): {names}; the chain is not known to be complete",
                           "read those hops' detail and trace again; report the case", sick[0].name)
        return verdict("ok", "ok", ok_sentence)
    worst = min(SEVERITY_RANK[f.severity] for f in real)
    return next(f for f in real if SEVERITY_RANK[f.severity] == worst)


def ranked(findings: list[Verdict]) -> list[Verdict]:
    """Findings worst first, chain order kept within a severity."""
    real = [f for f in findings if f.code != "ok"]
    return sorted(real, key=lambda f: SEVERITY_RANK[f.severity])
