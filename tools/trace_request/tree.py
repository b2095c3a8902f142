"""The causal tree of a request: one item per code-written row, in time order, each with the
hops the traces compute (a job: jobs_outbox -> BullMQ -> guard -> job_audit -> outcome events ->
their streams and groups; an event: event_queue -> stream entries -> groups).

An item's parent is the latest earlier item sharing its correlation id, else its trace id,
else the latest earlier item (``link`` says which). Job-outcome events written by the audit
trigger are hops of their job, not items of their own (they carry no correlation id nor
traceparent: NULL by design).
"""

from __future__ import annotations

from server.config import ColumnNames
from server.errors import MeshError
from tools.outbox.model import Hop, ServiceProblem, Verdict
from tools.outbox.trace import Tracer
from tools.outbox.verdicts import overall, verdict
from tools.trace_request.collect import Collector, Hit
from tools.trace_request.context import context_problem, parse_traceparent
from tools.trace_request.jobs import trace_jobs
from tools.trace_request.model import ContextFinding, RequestItem


async def build_items(collector: Collector) -> tuple[list[RequestItem], list[list[Verdict]]]:
    """Items in creation order and, per item, its findings in chain order (one tracer for the whole
    request: the clock offset of each service is measured once; its SQL runs in the call's transaction)."""
    settings = collector.settings
    names = settings.conventions.columns
    hits = sorted(collector.out.hits.values(), key=lambda h: (h.found.times.created_ms or 0, h.key))
    tracer = Tracer(collector.reads, settings, collector.catalog)  # type: ignore[arg-type]  # reads stands in
    outcome_ids: set[str] = set()
    built: list[tuple[Hit, RequestItem, list[Verdict]]] = []
    by_service: dict[str, list[Hit]] = {}
    for hit in hits:
        if hit.kind == "jobs_outbox":
            by_service.setdefault(hit.service, []).append(hit)
    for service, jobs in by_service.items():
        reports, unread = await trace_jobs(collector.reads, tracer, service, collector.out.tables[service],
                                           [h.found for h in jobs])
        for hit in jobs:
            report = reports.get(hit.found.row.id)
            if report is None:
                built.append(_unread(collector, hit, "code", unread.get(hit.found.row.id, "no trace"), names))
                continue
            for hop in report.hops:
                if hop.row is not None and hop.row.table == "event_queue":
                    outcome_ids.add(f"{hop.row.service}:event_queue:{hop.row.id}")
            built.append((hit, _item(hit, "code", report.verdict, report.hops, names), list(report.findings)))
    collector._down(tracer.unavailable)
    for hit in hits:
        if hit.kind != "event_queue" or hit.key in outcome_ids:
            continue
        row = hit.found.row
        success, failure = tracer.outcome_types(hit.service, [row.columns.get(names.emitter)])
        written_by = "trigger" if row.type in {*success, *failure} else "code"
        try:
            hops, findings = await tracer.event_chain(hit.found, "event_queue", "")
        except MeshError as exc:
            built.append(_unread(collector, hit, written_by, str(exc), names))
            continue
        collector._down(tracer.unavailable)
        v = overall(findings, f"event {row.id} was pushed and acknowledged by every consumer group")
        built.append((hit, _item(hit, written_by, v, hops, names), findings))
    built.sort(key=lambda b: (b[0].found.times.created_ms or 0, b[0].key))
    items = [b[1] for b in built]
    _link(items)
    return items, [b[2] for b in built]


def _unread(collector: Collector, hit: Hit, written_by: str, error: str, names: ColumnNames
            ) -> tuple[Hit, RequestItem, list[Verdict]]:
    """A row that was found but whose chain could not be read: kept as an ``inconclusive`` item, and the
    problem named in ``unavailable`` under the item's key (its service was searched: the row is here)."""
    collector._down([ServiceProblem(service=hit.key, error=error)])
    v = verdict("inconclusive", "warning", f"the row was found, but its chain could not be read: {error}",
                "fix what the error names (the access to Redis or the database, a key of the wrong type) and "
                "trace again")
    return hit, _item(hit, written_by, v, [], names), [v]


def _item(hit: Hit, written_by: str, v: Verdict, hops: list[Hop], names: ColumnNames) -> RequestItem:
    row = hit.found.row
    cols = row.columns
    tp = cols.get(names.traceparent)
    corr = cols.get(names.correlation_id)
    return RequestItem(key=hit.key, service=hit.service, table=hit.kind, id=row.id, type=row.type,
                       status=row.status, created_at=row.created_at, written_by=written_by,  # type: ignore[arg-type]
                       traceparent=str(tp) if tp else None, correlation_id=str(corr) if corr else None,
                       link=hit.link, heuristic=hit.heuristic, verdict=v, hops=hops, broken=v.code != "ok")


def _link(items: list[RequestItem]) -> None:
    for i, item in enumerate(items):
        earlier = items[:i]
        if not earlier:
            continue
        ctx = parse_traceparent(item.traceparent)
        same_corr = [e for e in earlier if item.correlation_id and e.correlation_id == item.correlation_id]
        same_trace = [e for e in earlier
                      if ctx and (c := parse_traceparent(e.traceparent)) and c.trace_id == ctx.trace_id]
        if same_corr:
            item.parent, how = same_corr[-1].key, "same correlation_id"
        elif same_trace:
            item.parent, how = same_trace[-1].key, "same trace"
        else:
            item.parent, how = earlier[-1].key, "created after"
        item.link = f"{item.link} ({how})"


def context_findings(items: list[RequestItem], collector: Collector) -> list[ContextFinding]:
    """``trace_context_broken`` for code-written items whose context does not continue their parent's."""
    by_key = {i.key: i for i in items}
    out: list[ContextFinding] = []
    for item in items:
        if item.written_by != "code" or item.parent is None:
            continue
        parent = by_key.get(item.parent)
        while parent is not None and parse_traceparent(parent.traceparent) is None:
            parent = by_key.get(parent.parent) if parent.parent else None
        if parent is None:
            continue
        schema = collector.out.tables.get(item.service, {}).get(item.table)
        has_column = bool(schema and schema.has("traceparent"))
        problem = context_problem(parse_traceparent(item.traceparent), parse_traceparent(parent.traceparent),
                                  has_column)
        if problem:
            out.append(ContextFinding(item=item.key, parent=parent.key,
                                      sentence=f"{item.key} ({item.type}) is written by code but {problem}"))
    return out
