"""Verdicts and next steps of ``trace_job`` that name what repairs that very job (issue 31).

``audit_not_closed``: the completion guard is set but the job_audit row is not closed; its next step
is ``reconcile_outbox`` with the job id (after the trigger's fix when the live check names a cause); when
the trigger could not be checked the verdict says why, and reconcile_outbox refuses to close the row.
:func:`retry_next`: a job BullMQ holds failed goes to ``retry_failed_job`` with its queue and id.
:data:`NOT_AUDITED_NEXT`: a job that ran without an audit row has no symptom that would accept it.
"""

from __future__ import annotations

from server.config import Settings
from tools.outbox.audit_trigger_check import TriggerFinding
from tools.outbox.model import OutboxRow, Verdict
from tools.outbox.verdicts import verdict

NOT_AUDITED_NEXT = ("verify_flow on the job type: its worker does not write job_audit, so no success event is written "
                     "and nothing deletes the outbox row; fix the worker. No remediation symptom deletes a row whose "
                     "success no audit row records")


def retry_next(queue: str | None, job_id: str) -> str:
    return ("read failedReason and the worker logs; fix the cause, then "
            f"propose_remediation(symptom='retry_failed_job', queue='{queue}', ids=['{job_id}'])")


def audit_not_closed(settings: Settings, audit: OutboxRow, job_id: str, since: float, since_col: str,
                     trigger: TriggerFinding | None, service: str | None) -> Verdict:
    """The guard says the handler succeeded; the audit row is still PROCESSING (or PENDING): not closed."""
    conv = settings.conventions
    guard = conv.job_completed_key.replace("{job_id}", job_id)
    where = service or audit.service
    sentence = (f"job {job_id}: the completion guard {guard} is set, so the handler succeeded, but its job_audit row "
                f"is still {audit.status} ({since:.0f}s since its {since_col}): the audit row could not be closed")
    reconcile = (f"propose_remediation(symptom='reconcile_outbox', service='{where}', ids=['{job_id}']) closes the "
                 "audit row (its COMPLETED update fires the trigger, whose success event cleans the outbox row)")
    if trigger is not None and trigger.state == "cause":
        return verdict("audit_not_closed", "error", f"{sentence}. Cause: {trigger.text}",
                       f"run mesh-mcp doctor: it names the migration to add; once it is applied, {reconcile}",
                       "job_audit")
    if trigger is None or trigger.state == "unchecked":
        why = trigger.text if trigger is not None else "the live check was not run"
        return verdict("audit_not_closed", "error",
                       f"{sentence}; the audit trigger on {conv.tables.job_audit} could not be checked: {why}",
                       f"read the trigger function (\\sf in psql; mesh-mcp doctor runs the same check) and the worker "
                       "logs for the failed job_audit update. reconcile_outbox closes the audit row only once the live "
                       "check proves the trigger fine: fix or install the trigger, then "
                       f"propose_remediation(symptom='reconcile_outbox', service='{where}', ids=['{job_id}'])",
                       "job_audit")
    return verdict("audit_not_closed", "error",
                   f"{sentence}; the live check of the audit trigger found no cause ({trigger.text}): the worker's "
                   "COMPLETED update failed or was lost (see the worker logs)",
                   f"read the worker logs for the failed job_audit update; then {reconcile}", "job_audit")
