"""``trace_request``: validate, collect the rows of the request, build its tree, give the verdict.

The verdict is the first broken link of the whole tree: the items in creation order, the
findings of each in chain order, the first of the worst severity (trace verdict codes of
:mod:`tools.outbox.verdicts`). When a service (or Redis) could not be searched the answer
is ``inconclusive`` and names it; ``not_found`` is said only of the services searched, with
the purge window (COMPLETED rows older than the retention are deleted).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio

from server.config import Settings
from server.connections import Connections
from server.errors import MeshError
from tools.outbox.model import Verdict
from tools.outbox.schema_discovery import TABLE_KINDS, SchemaCatalog
from tools.outbox.verdicts import overall, verdict
from tools.trace_request import inputs, mermaid
from tools.trace_request.collect import Collector
from tools.trace_request.model import RequestItem, RequestReport, WsMessage
from tools.trace_request.reads import RequestReads
from tools.trace_request.tree import build_items, context_findings
from tools.trace_request.ws import ws_messages

if TYPE_CHECKING:
    from tools.mesh_index.service import IndexService


def validate(settings: Settings, **kwargs: object) -> inputs.RequestInput:
    names = {kind: getattr(settings.conventions.tables, kind) for kind in TABLE_KINDS}
    return inputs.validate(configured=sorted(settings.services), table_names=names, **kwargs)  # type: ignore[arg-type]


async def trace_request(
    connections: Connections, settings: Settings, catalog: SchemaCatalog, *,
    correlation_id: str | None = None, trace_id: str | None = None, entity_id: str | None = None,
    start: str | None = None, since_s: float = 86400, services: list[str] | None = None,
    index: IndexService | None = None,
) -> RequestReport:
    """``index``: the static index of the workspace, for the websocket messages the consumers send
    (None: not joined, and ``ws_note`` says so)."""
    inp = validate(settings, correlation_id=correlation_id, trace_id=trace_id, entity_id=entity_id, start=start,
                   since_s=since_s, services=services)
    async with RequestReads(connections) as reads:
        collector = Collector(connections, settings, catalog, reads)
        collected = await collector.collect(inp)
        items, per_item = await build_items(collector)
    keys = {i.key for i in items}
    unread = [p.service for p in collected.unavailable if p.service in keys]  # found, its chain not read
    down = [p.service for p in collected.unavailable if p.service not in keys]
    searched = [s for s in inp.services if s not in down]
    inconclusive = bool(collected.unavailable)
    if not items:
        v = _not_found(inp, settings, searched, down)
    else:
        findings: list[Verdict] = []
        for item, item_findings in zip(items, per_item, strict=True):
            for f in item_findings:
                findings.append(f.model_copy(update={"sentence": f"{item.key}: {f.sentence}",
                                                     "hop": f"{item.key} {f.hop or ''}".strip()}))
        v = overall(findings, f"every row of the request ({len(items)}) completed its chain")
        if inconclusive:
            v = v.model_copy(update={"sentence": v.sentence + _unknown(down, unread)})
    ws, ws_note = await _ws(index, items, collector, settings)
    return RequestReport(
        way=inp.way, value=inp.value, searched_services=searched, verdict=v, inconclusive=inconclusive,
        items=items, trace_context=context_findings(items, collector), left_out=collected.left_out,
        skipped=collected.skipped, unindexed=collected.unindexed, truncated=collected.truncated,
        unavailable=collected.unavailable, mermaid=mermaid.render(items, ws), sql_round_trips=reads.round_trips,
        ws_messages=ws, ws_note=ws_note,
    )


def _unknown(down: list[str], unread: list[str]) -> str:
    parts = ([f"not searched: {', '.join(down)}"] if down else []) + (
        [f"chain not read: {', '.join(unread)}"] if unread else [])
    return f" (inconclusive: {'; '.join(parts)})"


def _not_found(inp: inputs.RequestInput, settings: Settings, searched: list[str], down: list[str]) -> Verdict:
    retention = settings.conventions.retention_s
    sentence = (f"no row of {inp.way}={inp.value} in {', '.join(searched) or 'no service'}. COMPLETED rows older "
                f"than the retention ({retention}s) are purged, so an old finished request leaves no row")
    if inp.way == "entity_id":
        sentence += f"; the payload search covered the last {inp.since_s:.0f}s only"
    if down:
        sentence += _unknown(down, [])
    return verdict("not_found", "warning", sentence)


async def _ws(index: IndexService | None, items: list[RequestItem], collector: Collector, settings: Settings
              ) -> tuple[list[WsMessage], str | None]:
    """The websocket messages of the tree's consumers (static index), or why there are none."""
    if index is None:
        return [], ("not joined: no workspace is configured (--workspace DIR or workspace = \"...\" in mesh.toml), "
                    "so the static index cannot say which websocket messages the consumers send")
    if not any(i.table == "event_queue" for i in items):
        return [], None
    from tools.flow_map.service import engine_for  # the index's modules load only when a workspace is used

    try:
        engine = await anyio.to_thread.run_sync(engine_for, index)
    except MeshError as exc:
        return [], f"not joined: the static index could not be read ({exc})"
    col = settings.conventions.columns.target_services
    targets: dict[str, list[str]] = {}
    for item in items:
        hit = collector.out.hits.get(item.key)
        value = hit.found.row.columns.get(col) if hit else None
        targets[item.key] = [str(t) for t in value] if isinstance(value, list) else []
    found = ws_messages(engine, items, settings.conventions.stream_prefix, targets)
    return found, None if found else ("the static index names no websocket message sent by the consumers of "
                                      "these events")
