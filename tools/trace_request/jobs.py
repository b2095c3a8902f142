"""The chains of the jobs of one request, read in bulk: per service, the job_audit rows of all its
jobs and their job-outcome events in one round trip (two ``= ANY(%s)`` lookups pipelined), then
each job's Redis hops and verdict by :meth:`tools.outbox.trace.Tracer.finish_job` (the reasoning
of ``trace_job``, unchanged). The jobs_outbox rows themselves were read by the search. The
outcome types are those of the job row's emitter and of the service's (``trace_job`` also adds
the audit row's emitter: it is the same service's in the writers of the target system).
"""

from __future__ import annotations

from server.errors import MeshError
from tools.outbox.model import TraceReport
from tools.outbox.rows import AUDIT_MISSING, hint_columns, hint_for
from tools.outbox.schema_discovery import TableSchema
from tools.outbox.trace import Found, ServiceRows, Tracer
from tools.trace_request import lookups
from tools.trace_request.reads import RequestReads

OUTCOMES_PER_JOB = 10


async def trace_jobs(reads: RequestReads, tracer: Tracer, service: str, tables: dict[str, TableSchema],
                     jobs: list[Found]) -> tuple[dict[str, TraceReport], dict[str, str]]:
    """``(job id -> its trace report, job id -> why its chain could not be read)`` for the jobs of
    ``service``: a job whose audit rows or outcome events could not be read, or whose trace raised (a
    Redis key of the wrong type, a command Redis refused) is in the second, with the error, never
    raised and never dropped. A Redis that is down does not raise: the tracer names it (``redis``)
    and the job's hops say what is unknown."""
    settings = tracer.settings
    conv = settings.conventions
    cap = settings.limits.payload_max_bytes
    audit_schema, events = tables["job_audit"], tables["event_queue"]
    ids = [f.row.id for f in jobs]
    emitter_col = events.names.emitter
    types: dict[str, tuple[list[str], list[str]]] = {}
    accepted: dict[str, set[str]] = {}
    for f in jobs:
        types[f.row.id] = tracer.outcome_types(service, [f.row.columns.get(emitter_col)])
        accepted[f.row.id] = set(tracer.failure_accepted)
    all_types = sorted({t for success, failure in types.values() for t in (*success, *failure)})
    audit_q = lookups.rows_of_jobs(audit_schema, ids, cap, 5 * len(ids))
    outcome_q = (lookups.outcomes_of_jobs(events, conv.job_outcome_id_keys, all_types, ids, cap,
                                          OUTCOMES_PER_JOB * len(ids)) if events.exists else None)
    planned = [(name, q) for name, q in (("audit", audit_q), ("outcomes", outcome_q)) if q is not None]
    try:
        results = await reads.read_many(service, [(q[0], q[1], settings.limits.max_rows) for _n, q in planned])
    except MeshError as exc:
        return {}, {job_id: str(exc) for job_id in ids}
    got = dict(zip([n for n, _q in planned], results, strict=True))
    audits: dict[str, Found] = {}
    for raw in got["audit"].rows if "audit" in got else []:
        found = tracer._found(service, audit_schema, raw)
        audits.setdefault(str(found.row.columns.get(audit_schema.col("job_id") or "job_id")), found)  # newest first
    outcomes: dict[str, list[Found]] = {}
    for raw in got["outcomes"].rows if "outcomes" in got else []:
        keys = raw.pop(lookups.OUTCOME_KEYS, None) or []
        found = tracer._found(service, events, raw)
        for job_id in {str(k) for k in keys if k is not None} & set(ids):
            success, failure = types[job_id]
            if found.row.type in (*success, *failure) and len(outcomes.setdefault(job_id, [])) < OUTCOMES_PER_JOB:
                outcomes[job_id].append(found)
    reports: dict[str, TraceReport] = {}
    unread: dict[str, str] = {}
    for job in jobs:
        job_id = job.row.id
        audit = audits.get(job_id)
        success, _failure = types[job_id]
        status = audit.row.status if audit else AUDIT_MISSING
        job.row.hint = hint_for(job.row, job.times, conv.statuses, settings.limits, audit_status=status,
                                column=hint_columns(tables["jobs_outbox"]))
        rows = ServiceRows(service=service, tables=tables, job=job, audit=audit,
                           outcomes=outcomes.get(job_id, []), success_types=set(success),
                           failure_accepted=accepted[job_id])
        try:
            reports[job_id] = await tracer.finish_job(rows, job_id, service, [service])
        except MeshError as exc:
            unread[job_id] = str(exc)
    return reports, unread
