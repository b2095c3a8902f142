"""``reconcile_outbox`` for the two verdicts of a job that ran and succeeded but whose rows were left behind.

- ``audit_not_closed``: the job's ``job:completed:<id>`` guard is set (the handler succeeded) but its
  ``job_audit`` row is still PROCESSING (or PENDING): the worker's COMPLETED update failed (the audit
  trigger raising). Step: ``UPDATE job_audit SET status = 'COMPLETED'`` of that audit row, guarded by
  its status; the update fires the audit trigger, whose success event lets the common post-processor
  delete the jobs_outbox row. Planned only when the live check of the trigger
  (:mod:`tools.outbox.audit_trigger_check`) proves it fine: a trigger that still raises would roll the
  update back, and one that could not be checked (no column list, dynamic SQL, a helper function, no
  trigger at all) may write no success event, leaving the outbox row behind. Preconditions: the audit
  row unchanged in status, the guard still there.
- ``success_not_cleaned``: the job is audited COMPLETED and its success event was pushed (event_queue
  COMPLETED), yet the jobs_outbox row is still there: the common success post-processor did not delete
  it. Step: ``DELETE FROM jobs_outbox`` of that row, guarded by its status (COMPLETED), each row backed
  up (every column) and read back before the DELETE. Preconditions: the jobs_outbox row, the audit row
  and the success event each still COMPLETED.

Given ids are jobs_outbox ids (= job ids, = ``job_audit.job_id``).
"""

from __future__ import annotations

from typing import Any

from server.connections import Connections
from server.errors import MeshError
from server.lazy_modules import LazyModule
from tools.outbox import queries
from tools.outbox.audit_trigger_check import check_audit_trigger
from tools.outbox.schema_discovery import SchemaCatalog
from tools.outbox.trace import Tracer
from tools.remediation import redis_reads as rr
from tools.remediation.model import SqlDeleteOp, SqlRow, SqlUpdateOp
from tools.remediation.plan_base import PlanBuilder, check
from tools.streams.keys import fill

sql = LazyModule("psycopg.sql")

OUTCOMES_PER_JOB = 10


async def audit_rows_of_jobs(connections: Connections, b: PlanBuilder, service: str, ids: list[str]) -> list[dict]:
    """``id, job_id, status`` of the job_audit rows whose job_id is one of ``ids``."""
    conv = b.settings.conventions
    cols = conv.columns
    query = sql.SQL("SELECT {i}::text AS id, {j} AS job_id, {s} AS status FROM {t} WHERE {j} = ANY(%s)").format(
        i=sql.Identifier(cols.id), j=sql.Identifier(cols.job_id), s=sql.Identifier(cols.status),
        t=sql.Identifier(conv.tables.job_audit))
    result = await connections.read(service, query, (ids,), max_rows=len(ids))
    return result.rows


async def add_audit_closures(b: PlanBuilder, connections: Connections, service: str, audits: list[dict]) -> int:
    """A step closing the audit rows left open under a set completion guard; returns how many."""
    conv = b.settings.conventions
    st = conv.statuses
    open_rows = [a for a in audits if a["status"] not in (st.completed, st.failed)]
    if not open_rows:
        return 0
    redis = connections.redis()
    guarded: list[tuple[dict, Any]] = []
    async with connections.redis_errors():
        for a in open_rows:
            key = fill(conv.job_completed_key, job_id=str(a["job_id"]))
            snap = await rr.key_snapshot(redis, key)
            if snap is None:
                b.warnings.append(f"{conv.tables.job_audit} row of job {a['job_id']} is {a['status']} and its guard "
                                  f"{key} is not set: the job did not finish; trace_job says why (nothing closed)")
            else:
                guarded.append((a, snap))
    if not guarded:
        return 0
    try:
        trigger = await check_audit_trigger(connections, b.settings, service)
    except MeshError as exc:
        b.warnings.append(f"the audit trigger of service {service} could not be checked ({exc}): no audit row closed")
        return 0
    finding = trigger.finding()
    if finding.state == "cause":
        b.warnings.append(f"the audit trigger still cannot close an audit row: {finding.text}. "
                          f"{trigger.migration(conv.columns.emitter_id, conv.columns.job_id)}; then propose again")
        return 0
    if finding.state != "fine":
        b.warnings.append(
            f"the audit trigger on {conv.tables.job_audit} of service {service} could not be checked: {finding.text}. "
            f"Closing an audit row is planned only when the live check proves that the COMPLETED update writes a "
            f"success event that fits {conv.tables.event_queue}: read the trigger function (\\sf in psql; "
            "mesh-mcp doctor runs the same check), fix or install it, then propose again; no audit row closed")
        return 0
    table = conv.tables.job_audit
    op = SqlUpdateOp(service=service, table=table, set_status=st.completed, expect_status=st.processing,
                     rows=[SqlRow(id=a["id"]) for a, _ in guarded if a["status"] == st.processing])
    if len(op.rows) != len(guarded):
        b.warnings.extend(f"{table} row of job {a['job_id']} is {a['status']}, not {st.processing}: not closed"
                          for a, _ in guarded if a["status"] != st.processing)
    if not op.rows:
        return 0
    checks = [check("row_matches", service=service, table=table, id=a["id"], status=st.processing, updated_at=None)
              for a, _ in guarded if a["status"] == st.processing]
    checks += [check("key_unchanged", key=snap.key, digest=snap.digest, allow_missing=False)
               for a, snap in guarded if a["status"] == st.processing]
    b.add(action="reconcile_sql",
          description=(f"{table}: close {len(op.rows)} audit row(s) {st.processing} -> {st.completed}: the completion "
                       "guard proves the handler succeeded; the update fires the audit trigger, whose success event "
                       "lets the common post-processor delete the jobs_outbox row"),
          operation=op, target=f"{service}.{table}",
          precondition=f"each audit row still {st.processing}; each job's completion guard still set, unchanged",
          checks=checks, backup="every column of each row, read inside the transaction before the UPDATE",
          reversible=True)
    b.rows += len(op.rows)
    b.tables.add(f"{service}.{table}")
    b.notes.append("closing by hand writes no finished_at nor result_payload: the success post-processor's feedback "
                   "event will carry no originalPayload")
    return len(op.rows)


async def _delivered_success(connections: Connections, b: PlanBuilder, service: str, job: dict) -> dict | None:
    """The job's success event whose row is COMPLETED (pushed), if any (newest last); warns otherwise."""
    settings = b.settings
    catalog = SchemaCatalog(connections, settings)
    events = await catalog.table(service, "event_queue")
    if not events.exists or not events.has("type") or not events.has("payload"):
        b.warnings.append(f"service {service} has no readable event_queue: the success event of job {job['id']} "
                          "cannot be checked; nothing deleted")
        return None
    success, _failure = Tracer(connections, settings, catalog).outcome_types(service, [job.get("emitter")])
    query, params = queries.outcome_events_query(events, settings.conventions, success, job["id"],
                                                 settings.limits.payload_max_bytes, OUTCOMES_PER_JOB)
    rows = (await connections.read(service, query, params, max_rows=OUTCOMES_PER_JOB)).rows
    id_col, status_col = events.col("id") or "id", events.col("status") or "status"
    done = [r for r in rows if r.get(status_col) == settings.conventions.statuses.completed]
    if not done:
        states = ", ".join(f"{r.get(id_col)} {r.get(status_col)}" for r in rows) or "none found"
        b.warnings.append(f"job {job['id']}: its success event was not pushed ({states}); the post-processor has "
                          "nothing to act on yet: trace_job names that link; nothing deleted")
        return None
    return {"id": str(done[-1][id_col]), "type": done[-1].get(events.col("type") or "type")}


async def add_cleaned_deletes(b: PlanBuilder, connections: Connections, service: str, jobs: list[dict],
                              audits: list[dict]) -> int:
    """A step deleting the COMPLETED jobs_outbox rows whose job is audited COMPLETED and whose success event
    was pushed (what the common success post-processor does); returns how many."""
    conv = b.settings.conventions
    st = conv.statuses
    audit_of = {str(a["job_id"]): a for a in audits}
    ids: list[str] = []
    checks = []
    for job in jobs:
        if job["status"] != st.completed:
            continue
        audit = audit_of.get(job["id"])
        if audit is None or audit["status"] != st.completed:
            b.warnings.append(f"{conv.tables.jobs_outbox} row {job['id']} is {st.completed} (pushed) but its job_audit "
                              f"is {audit['status'] if audit else 'missing'}: the job is not known to have succeeded; "
                              "nothing deleted (trace_job)")
            continue
        event = await _delivered_success(connections, b, service, job)
        if event is None:
            continue
        ids.append(job["id"])
        checks += [
            check("row_matches", service=service, table=conv.tables.jobs_outbox, id=job["id"], status=st.completed,
                  updated_at=None),
            check("row_matches", service=service, table=conv.tables.job_audit, id=audit["id"], status=st.completed,
                  updated_at=None),
            check("row_matches", service=service, table=conv.tables.event_queue, id=event["id"],
                  status=st.completed, updated_at=None),
        ]
        b.notes.append(f"job {job['id']}: success event {event['id']} ({event['type']}) was pushed; the common success "
                       "post-processor would also have written its feedback event, which this deletion does not")
    if not ids:
        return 0
    table = conv.tables.jobs_outbox
    b.add(action="delete_sql",
          description=(f"{table}: delete {len(ids)} {st.completed} row(s) whose job succeeded (job_audit "
                       f"{st.completed}) and whose success event was pushed, as the common success post-processor "
                       "does; one transaction"),
          operation=SqlDeleteOp(service=service, table=table, expect_status=st.completed, ids=ids),
          target=f"{service}.{table}",
          precondition=f"each jobs_outbox row, its job_audit row and its success event still {st.completed}",
          checks=checks,
          backup="every column of each row, read inside the transaction and read back from disk before the DELETE",
          reversible=True)
    b.rows += len(ids)
    b.tables.add(f"{service}.{table}")
    return len(ids)
