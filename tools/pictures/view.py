"""What the MCP App draws: one small graph shape for flow, trace, request and mesh results.

``{"title", "kind", "verdict", "nodes": [...], "edges": [...], "notes": [...]}``; a node has ``id``,
``label``, ``sub`` (second line), ``kind``, ``state`` (ok | warning | error | unknown | none),
``broken`` (the hop a verdict names, or a static dead end), ``trouble``, ``at`` (file:line),
``detail``, ``next`` and, for a folded node, ``fold`` (what it stands for, expandable in the app).
An edge has ``source``, ``target``, ``label``, ``dashed``.

The view is attached to a tool result's ``_meta`` under :data:`VIEW_META_KEY`, only for clients
that negotiated MCP Apps: the text and structured content stay exactly what they were.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tools.flow_map.trace_mermaid import _parents, _verdict_hops

if TYPE_CHECKING:
    from tools.flow_map.model import FlowMap
    from tools.outbox.model import Hop, TraceReport
    from tools.pictures.mesh_model import MeshGraph
    from tools.trace_request.model import RequestReport

VIEW_META_KEY = "mesh-mcp/view"
MAX_VIEW_NODES = 400
LIVE_STATE = {"ok": "ok", "warning": "warning", "error": "error", "unknown": "unknown"}
HOP_STATE = {True: "ok", False: "error", None: "unknown"}


def _verdict(v: Any) -> dict[str, Any] | None:
    if v is None:
        return None
    return {"code": v.code, "sentence": v.sentence, "next_step": v.next_step, "hop": v.hop}


def _cap(view: dict[str, Any]) -> dict[str, Any]:
    nodes = view["nodes"]
    if len(nodes) > MAX_VIEW_NODES:
        kept = {n["id"] for n in nodes[:MAX_VIEW_NODES]}
        view["notes"].append(f"{len(nodes) - MAX_VIEW_NODES} nodes not drawn (the view draws {MAX_VIEW_NODES})")
        view["nodes"] = nodes[:MAX_VIEW_NODES]
        view["edges"] = [e for e in view["edges"] if e["source"] in kept and e["target"] in kept]
    return view


def flow_view(result: FlowMap) -> dict[str, Any]:
    folds = {f.node: f for f in result.folded}
    nodes = []
    for n in result.nodes:
        at = f"{n.file}:{n.line}" if n.file and n.line else None
        detail = [t.sentence for t in n.trouble]
        if n.live is not None:
            detail.append(f"live {n.live.status}: {n.live.sentence}")
        sub = ", ".join(n.kinds) if n.kinds else (n.value if n.role != "type" else n.kind)
        node = {"id": n.id, "label": n.label, "sub": sub or "", "kind": n.role if n.role != "code" else n.kind,
                "state": LIVE_STATE.get(n.live.status, "unknown") if n.live else "none",
                "broken": bool(n.trouble), "trouble": [t.code for t in n.trouble], "at": at, "detail": detail,
                "next": _flow_next(n)}
        if n.id in folds:
            node["fold"] = [{"label": item} for item in folds[n.id].items]
        nodes.append(node)
    edges = [{"source": e.source, "target": e.target, "label": e.label or "", "dashed": e.confidence != "exact"}
             for e in result.edges]
    return _cap({"title": f"flow of {result.target}" + (" (live)" if result.live else ""), "kind": "flow",
                 "verdict": None, "nodes": nodes, "edges": edges, "notes": list(result.notes)})


def _flow_next(n: Any) -> str | None:
    if n.kind == "queue" and n.value:
        return f"inspect_queue(queue={n.value!r})"
    if n.kind == "stream" and n.value:
        return f"inspect_stream(stream={n.value!r})"
    if n.role == "type" and n.value and n.live is not None and n.kind in ("job", "event"):
        table, trace = ("jobs_outbox", "trace_job") if n.kind == "job" else ("event_queue", "trace_event")
        return f"query_outbox(table={table!r}, type={n.value!r}), then {trace} of a row"
    if n.role == "type" and n.value:
        return f"flow_map(target={n.value!r}, live=true)"
    if n.file:
        return f"open {n.file}:{n.line}" if n.line else f"open {n.file}"
    return None


def _hop_nodes(hops: list[Hop], verdict: Any, prefix: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    marked = _verdict_hops(hops, verdict)
    ids = [f"{prefix}h{i}" for i in range(len(hops))]
    nodes = []
    for i, hop in enumerate(hops):
        broken = i in marked
        nodes.append({"id": ids[i], "label": str(hop.name), "sub": hop.state or ("found" if hop.found else "absent"),
                      "kind": "hop", "state": HOP_STATE.get(hop.healthy, "unknown"), "broken": broken,
                      "trouble": [verdict.code] if broken else [], "at": str(hop.ref), "detail": [hop.detail],
                      "next": verdict.next_step if broken else None})
    edges = [{"source": ids[p], "target": ids[i], "label": "", "dashed": hops[i].found is False}
             for i, p in enumerate(_parents(hops)) if p is not None]
    return nodes, edges


def trace_view(report: TraceReport) -> dict[str, Any]:
    nodes, edges = _hop_nodes(list(report.hops), report.verdict, "")
    return _cap({"title": f"trace of {report.kind} {report.id}", "kind": "trace", "verdict": _verdict(report.verdict),
                 "nodes": nodes, "edges": edges,
                 "notes": [f"{p.service}: {p.error}" for p in report.unavailable]})


def request_view(report: RequestReport) -> dict[str, Any]:
    nodes: list[dict[str, Any]] = []
    edges: list[dict[str, Any]] = []
    item_ids: dict[str, str] = {}
    for i, item in enumerate(report.items):
        iid = f"i{i}"
        item_ids[item.key] = iid
        nodes.append({"id": iid, "label": f"{item.table} {item.type or ''}".strip(), "sub": item.status or "",
                      "kind": "item", "state": "error" if item.broken else "ok", "broken": item.broken,
                      "trouble": [item.verdict.code] if item.broken else [], "at": item.key,
                      "detail": [item.verdict.sentence, f"reached by {item.link}"],
                      "next": item.verdict.next_step if item.broken else None})
        hop_nodes, hop_edges = _hop_nodes(list(item.hops), item.verdict, f"i{i}")
        if hop_nodes:
            edges.append({"source": iid, "target": hop_nodes[0]["id"], "label": "", "dashed": False})
        nodes.extend(hop_nodes)
        edges.extend(hop_edges)
    for item in report.items:
        if item.parent in item_ids:
            edges.append({"source": item_ids[item.parent], "target": item_ids[item.key], "label": item.link,
                          "dashed": item.heuristic})
    for j, ws in enumerate(report.ws_messages):
        wid = f"w{j}"
        nodes.append({"id": wid, "label": f"ws {ws.value}", "sub": "static evidence", "kind": "ws_event",
                      "state": "unknown", "broken": False, "trouble": [], "at": ws.site,
                      "detail": [f"sent by {ws.consumer} (not seen at run time)"], "next": None})
        if ws.parent in item_ids:
            edges.append({"source": item_ids[ws.parent], "target": wid, "label": ws.group or "", "dashed": True})
    return _cap({"title": f"request {report.way}={report.value}", "kind": "request",
                 "verdict": _verdict(report.verdict), "nodes": nodes, "edges": edges,
                 "notes": [f"{p.service}: {p.error}" for p in report.unavailable]
                 + (["inconclusive: a service or chain could not be read"] if report.inconclusive else [])})


def _mesh_next(n: Any, graph: MeshGraph) -> str | None:
    if n.kind == "queue":
        return f"inspect_queue(queue={n.name!r})"
    if n.kind == "stream":
        return f"inspect_stream(stream={n.name!r})"
    if n.kind == "service":
        return None if n.name == graph.service else f"visualize_mesh(service={n.name!r})"
    if n.kind == "websocket":
        return "flow_map(target=<a websocket type>)"
    if n.kind == "grpc":
        return f"analyze_grpc(target={n.name!r})"
    return "visualize_mesh(service=<one of them>) or a larger max_services"


def mesh_view(graph: MeshGraph) -> dict[str, Any]:
    nodes = []
    for n in graph.nodes:
        sub = {"service": f"writes {n.produces} · reads {n.consumes}",
               "grpc": f"{n.consumes} calls · {n.produces} writes",
               "folded": f"{len(n.members)} folded"}.get(n.kind, f"{len(n.types)} type{'s' * (len(n.types) != 1)}")
        node = {"id": n.id, "label": n.label, "sub": sub, "kind": n.kind, "state": "none", "broken": bool(n.trouble),
                "trouble": list(n.trouble), "at": n.sites[0] if n.sites else None,
                "detail": [*n.trouble, *(f"type {t}" for t in n.types[:20]), *n.sites], "next": _mesh_next(n, graph)}
        if n.kind == "folded":
            node["fold"] = [{"label": m} for m in n.members]
        nodes.append(node)
    edges = [{"source": e.source, "target": e.target, "label": e.label, "dashed": e.confidence != "exact"}
             for e in graph.edges]
    title = f"mesh around {graph.service}" if graph.service else "the whole mesh"
    return _cap({"title": title, "kind": "mesh", "verdict": None, "nodes": nodes, "edges": edges,
                 "notes": [*graph.notes, graph.grpc]})
