"""Plans for the SQL outbox: reconcile rows after a confirmed replay, requeue stuck jobs.

``reconcile_outbox`` (runbook step 5): for the given ids, an ``event_queue`` row ``FAILED``
becomes ``COMPLETED`` (``UPDATE ... WHERE id = $2 AND status = 'FAILED'``), and a
``jobs_outbox`` row ``FAILED`` whose ``job_audit`` row is ``COMPLETED`` (the job did run)
becomes ``COMPLETED``. Given job ids, :mod:`plan_outbox_close` also closes an audit row left
PROCESSING under a set completion guard (``audit_not_closed``) and deletes the jobs_outbox row
of a job audited COMPLETED whose success event was pushed (``success_not_cleaned``). Rows in
any other state are left alone and reported.

``requeue_stuck_job``: a ``jobs_outbox`` row ``PROCESSING`` for longer than
``[limits] processing_ageing_s`` means the outbox runner died between claim and push. If
Redis or ``job_audit`` shows the job was pushed (BullMQ job hash or state, the worker's
``job:completed:<id>`` guard, a ``job_audit`` row), the row becomes ``COMPLETED`` ("pushed");
otherwise it goes back to ``PENDING`` so the runner pushes it again. Both updates are
guarded by the status and the ``updated_at`` seen when planning; the requeue also re-checks at
apply time everything the "never pushed" verdict relied on (still no BullMQ job hash, lock key or
state entry, guard unset, no job_audit row: :func:`plan_requeue.never_pushed_checks`), so a job
pushed or picked up in between stops the apply before anything is written. Given ids, it also requeues
FAILED rows and stalled or lost jobs (:mod:`plan_requeue`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from server.connections import Connections
from server.errors import MeshError, RemediationRefused
from server.lazy_modules import LazyModule
from tools.outbox.bull_state import bull_job_state
from tools.remediation import plan_outbox_close as close
from tools.remediation import plan_requeue as requeue
from tools.remediation.backups import jsonable_value
from tools.remediation.model import Check, SqlRow, SqlUpdateOp
from tools.remediation.plan_base import UUID_RE, PlanBuilder, Request, check
from tools.streams.keys import fill

sql = LazyModule("psycopg.sql")


async def _by_ids(connections: Connections, b: PlanBuilder, service: str, query: Any, ids: list[str]) -> list[dict]:
    """Every row ``query`` (one ``= ANY(%s)`` parameter) gives for ``ids``, read in chunks of at most
    ``[limits] max_rows`` ids, so the row cap never hides a row that exists (a plan may hold up to
    ``max_plan_messages`` ids). Each id matches one row at most (the id columns are unique); a chunk
    that gives more rows than ids is refused rather than cut."""
    size = b.settings.limits.max_rows
    rows: list[dict] = []
    for start in range(0, len(ids), size):
        part = ids[start:start + size]
        result = await connections.read(service, query, (part,), max_rows=len(part))
        if result.truncated:
            raise RemediationRefused(f"service {service}: {len(part)} id(s) matched more rows than ids; the id column "
                                     "configured ([conventions.columns]) is not unique there: no plan made")
        rows += result.rows
    return rows


async def _rows(connections: Connections, b: PlanBuilder, service: str, table: str, ids: list[str]) -> list[dict]:
    cols = b.settings.conventions.columns
    query = sql.SQL(
        "SELECT {i}::text AS id, {s} AS status, {u} AS updated_at, "
        "EXTRACT(EPOCH FROM (now() - {u}))::float8 AS updated_age_s FROM {t} WHERE {i} = ANY(%s)"
    ).format(i=sql.Identifier(cols.id), s=sql.Identifier(cols.status), u=sql.Identifier(cols.updated_at),
             t=sql.Identifier(table))
    return await _by_ids(connections, b, service, query, ids)


def _stamp(row: dict) -> str | None:
    return jsonable_value(row["updated_at"]) if row.get("updated_at") is not None else None


def _add_update(b: PlanBuilder, service: str, table: str, rows: list[dict], *, to_status: str, from_status: str,
                guard_updated_at: bool, why: str, extra: list[Check]) -> None:
    op = SqlUpdateOp(
        service=service, table=table, set_status=to_status, expect_status=from_status,
        rows=[SqlRow(id=r["id"], updated_at=_stamp(r) if guard_updated_at else None) for r in rows],
    )
    checks = [
        check("row_matches", service=service, table=table, id=r["id"], status=from_status,
               updated_at=_stamp(r) if guard_updated_at else None)
        for r in rows
    ]
    b.add(action="reconcile_sql" if to_status == b.settings.conventions.statuses.completed else "requeue_sql",
          description=f"{table}: {len(rows)} row(s) {from_status} -> {to_status} ({why}), one transaction",
          operation=op, target=f"{service}.{table}",
          precondition=f"each row still {from_status}" + (" with the same updated_at" if guard_updated_at else ""),
          checks=checks + extra, backup="every column of each row, read inside the transaction before the UPDATE",
          reversible=True)
    b.rows += len(rows)
    b.tables.add(f"{service}.{table}")


async def add_event_reconcile(b: PlanBuilder, connections: Connections, service: str | None,
                              event_ids: list[str], emitters: Iterable[str], extra: list[Check]) -> None:
    """After a replay: a step reconciling the replayed events' FAILED event_queue rows, if any."""
    settings = b.settings
    ids = sorted({i for i in event_ids if UUID_RE.match(i)})
    if not ids:
        return
    if service is None:
        wanted = set(emitters)
        matches = [name for name in sorted(settings.services) if settings.emitter_of(name) in wanted]
        if len(matches) != 1:
            if settings.services:
                b.notes.append("pass service=<name> to also reconcile the replayed events' event_queue rows")
            return
        service = matches[0]
        b.notes.append(f"service {service} chosen from the events' emitter")
    table = settings.conventions.tables.event_queue
    failed_status = settings.conventions.statuses.failed
    try:
        rows = await _rows(connections, b, service, table, ids)
    except MeshError as exc:
        b.warnings.append(f"event_queue of service {service} could not be read, no SQL reconciliation planned: {exc}")
        return
    failed = [r for r in rows if r["status"] == failed_status]
    for r in rows:
        if r["status"] != failed_status:
            b.notes.append(f"{table} row {r['id']} is {r['status']}: nothing to reconcile")
    if failed:
        _add_update(b, service, table, failed, to_status=settings.conventions.statuses.completed,
                    from_status=failed_status, guard_updated_at=False, why="replay confirmed", extra=extra)


async def build_reconcile_outbox(b: PlanBuilder, connections: Connections, req: Request) -> None:
    conv = b.settings.conventions
    service, ids = req.service or "", list(req.ids or [])
    st = conv.statuses
    events = await _rows(connections, b, service, conv.tables.event_queue, ids)
    jobs = await _rows(connections, b, service, conv.tables.jobs_outbox, ids)
    query = sql.SQL("SELECT {j} AS job_id, {s} AS status FROM {t} WHERE {j} = ANY(%s)").format(
        j=sql.Identifier(conv.columns.job_id), s=sql.Identifier(conv.columns.status),
        t=sql.Identifier(conv.tables.job_audit))
    audits = {r["job_id"]: r["status"] for r in await _by_ids(connections, b, service, query, ids)}
    b.candidates_found = len(events) + len(jobs)
    seen = {r["id"] for r in events} | {r["id"] for r in jobs}
    missing = [i for i in ids if i.lower() not in seen]
    events_failed = [r for r in events if r["status"] == st.failed]
    jobs_failed = []
    for r in jobs:
        audit = audits.get(r["id"])
        if r["status"] == st.failed and audit == st.completed:
            jobs_failed.append(r)
        elif r["status"] == st.failed:
            b.warnings.append(f"{conv.tables.jobs_outbox} row {r['id']} is FAILED but its job_audit is "
                              f"{audit or 'missing'}: the job did not succeed; retry it rather than marking it done")
    for r in events:
        if r["status"] != st.failed:
            b.notes.append(f"{conv.tables.event_queue} row {r['id']} is {r['status']}: nothing to reconcile")
    b.nothing_to_do = (f"none of the {len(ids)} id(s) is, in service {service}, a FAILED row that can be reconciled, "
                       "a job whose audit row was left open under its completion guard, or a succeeded job whose "
                       "outbox row was left after its success event was pushed")
    if events_failed:
        _add_update(b, service, conv.tables.event_queue, events_failed, to_status=st.completed,
                    from_status=st.failed, guard_updated_at=False, why="processed after a replay", extra=[])
    if jobs_failed:
        _add_update(b, service, conv.tables.jobs_outbox, jobs_failed, to_status=st.completed, from_status=st.failed,
                    guard_updated_at=False, why="job_audit shows the job COMPLETED", extra=[])
    audit_rows = await close.audit_rows_of_jobs(connections, b, service, ids)
    audited = {str(a["job_id"]).lower() for a in audit_rows}
    b.warnings.extend(f"no row {i} in {conv.tables.event_queue}, {conv.tables.jobs_outbox} or (as a job id) "
                      f"{conv.tables.job_audit} of service {service} (purged, or another service?)"
                      for i in missing if i.lower() not in audited)
    closed = await close.add_audit_closures(b, connections, service, audit_rows)
    deleted = await close.add_cleaned_deletes(b, connections, service, jobs, audit_rows)
    b.candidates_found = len(events) + len(jobs) + len({str(a["job_id"]) for a in audit_rows} - seen)
    b.notes.append("runbook step 5: afterwards check that job_audit closes the cycle (trace_job / trace_event)")
    parts = []
    if events_failed or jobs_failed:
        parts.append(f"mark {len(events_failed) + len(jobs_failed)} FAILED outbox row(s) COMPLETED")
    if closed:
        parts.append(f"close {closed} audit row(s) left open under their completion guard")
    if deleted:
        parts.append(f"delete {deleted} jobs_outbox row(s) of succeeded jobs whose success event was pushed")
    b.summary = f"service {service}: " + "; ".join(parts) if parts else ""


async def build_requeue_stuck_job(b: PlanBuilder, connections: Connections, req: Request) -> None:
    settings, conv = b.settings, b.settings.conventions
    cols, st, table = conv.columns, conv.statuses, conv.tables.jobs_outbox
    service = req.service or ""
    ageing = settings.limits.processing_ageing_s
    cap = settings.limits.max_plan_messages
    base = sql.SQL(
        "SELECT {i}::text AS id, {s} AS status, {tg} AS target, {u} AS updated_at, "
        "EXTRACT(EPOCH FROM (now() - {u}))::float8 AS updated_age_s FROM {t} "
    ).format(i=sql.Identifier(cols.id), s=sql.Identifier(cols.status), tg=sql.Identifier(cols.target),
             u=sql.Identifier(cols.updated_at), t=sql.Identifier(table))
    if req.ids is not None:
        query = base + sql.SQL("WHERE {i} = ANY(%s)").format(i=sql.Identifier(cols.id))
        rows = await _by_ids(connections, b, service, query, list(req.ids))
    else:
        query = base + sql.SQL(
            "WHERE {s} = %s AND {u} < now() - make_interval(secs => %s) ORDER BY {u} LIMIT %s"
        ).format(s=sql.Identifier(cols.status), u=sql.Identifier(cols.updated_at))
        result = await connections.read(service, query, (st.processing, ageing, cap + 1), max_rows=cap + 1)
        rows = result.rows
        b.truncated = len(rows) > cap or result.truncated  # [limits] max_rows below the plan cap cuts too
        rows = rows[:cap]
    b.candidates_found = len(rows)
    b.nothing_to_do = f"no {table} row of service {service} stuck {st.processing} for more than {ageing} s"
    stuck = []
    widened = 0
    if req.ids is not None:
        b.nothing_to_do = (f"none of the {len(req.ids)} id(s) is, in service {service}, a row stuck {st.processing}, a "
                           f"{st.failed} row to push again, or a pushed job stalled or lost by a dead worker")
        failed = [r for r in rows if r["status"] == st.failed]
        if failed:
            requeue.add_back_to_pending(b, service, table, failed, st.failed,
                                        "the runner gave up pushing it: it pushes it again")
        widened += len(failed) + await requeue.add_pushed_requeues(
            b, connections, service, [r for r in rows if r["status"] == st.completed])
        events = [r for r in await _rows(connections, b, service, conv.tables.event_queue, list(req.ids))]
        events_failed = [r for r in events if r["status"] == st.failed]
        if events_failed:
            requeue.add_back_to_pending(b, service, conv.tables.event_queue, events_failed, st.failed,
                                        "the runner gave up pushing it: it pushes it again to every target service")
            b.notes.append("an event pushed to some of its target streams before it FAILED is pushed to all of them "
                           "again: consumers see a second message with a new entry id")
        widened += len(events_failed)
        b.warnings.extend(f"{conv.tables.event_queue} row {r['id']} is {r['status']}: only a {st.failed} event is "
                          "pushed again; skipped" for r in events if r["status"] != st.failed)
        seen = {r["id"] for r in rows} | {r["id"] for r in events}
        b.warnings.extend(f"no row {i} in {table} or {conv.tables.event_queue} of service {service}"
                          for i in req.ids if i.lower() not in seen)
        b.candidates_found = len(rows) + len(events)
        rows = [r for r in rows if r["status"] not in (st.failed, st.completed)]
    for r in rows:
        if r["status"] != st.processing:
            b.warnings.append(f"{table} row {r['id']} is {r['status']}, not {st.processing}: skipped")
        elif r["updated_age_s"] is None:
            b.warnings.append(f"{table} row {r['id']} has no {cols.updated_at}: how long it has been {st.processing} "
                              "is unknown; skipped")
        elif r["updated_age_s"] < ageing:
            b.warnings.append(f"{table} row {r['id']} was updated {r['updated_age_s']:.0f} s ago (< {ageing} s): "
                              "a runner may be pushing it right now; skipped")
        else:
            stuck.append(r)
    if not stuck:
        if widened:
            b.summary = f"requeue {widened} item(s) of service {service} (see the steps)"
        return
    query = sql.SQL("SELECT {j} AS job_id FROM {t} WHERE {j} = ANY(%s)").format(
        j=sql.Identifier(cols.job_id), t=sql.Identifier(conv.tables.job_audit))
    audited = {r["job_id"] for r in await _by_ids(connections, b, service, query, [r["id"] for r in stuck])}
    redis = connections.redis()
    pushed, unpushed = [], []
    async with connections.redis_errors():
        for r in stuck:
            job = await bull_job_state(redis, conv, r["target"], r["id"],
                                       list_scan_max=settings.limits.bull_list_scan_max)
            done_key = fill(conv.job_completed_key, job_id=r["id"])
            if job is not None or r["id"] in audited or await redis.exists(done_key):
                pushed.append(r)
            else:
                unpushed.append(r)
    if pushed:
        _add_update(b, service, table, pushed, to_status=st.completed, from_status=st.processing,
                    guard_updated_at=True, why="BullMQ or job_audit shows the job was pushed", extra=[])
    if unpushed:
        evidence = {r["id"]: requeue.never_pushed_checks(b, service, str(r["target"]), r["id"]) for r in unpushed}
        requeue.add_back_to_pending(b, service, table, unpushed, st.processing,
                                    "never pushed: the outbox runner pushes it again",
                                    evidence=evidence, evidence_text=requeue.NEVER_PUSHED_EVIDENCE)
        b.notes.append("a requeued job is pushed with job id = row id; the worker's job:completed guard and "
                       "job_audit protect against a double run")
    b.summary = (f"unstick {len(stuck)} {table} row(s) of service {service}: {len(pushed)} to "
                 f"{st.completed} (already pushed), {len(unpushed)} back to {st.pending}"
                 + (f"; requeue {widened} more item(s) (see the steps)" if widened else ""))
