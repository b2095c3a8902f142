"""The request map drawn by ``flow_map``: the route, gateway call and gRPC handler as code nodes in
front of the flow graphs of the outbox rows the handler writes (:mod:`tools.flow_map.graph`).

:func:`request_graph` is the hook ``flow_map`` calls before its own target resolution: it answers
only for a target the index does not know as a job, event, queue or stream and that is an HTTP route
or a gRPC method of the workspace (None otherwise).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from server.errors import NotFound
from tools.code_nav.request_map import is_request, request_map
from tools.flow_map.mermaid import node_id
from tools.flow_map.model import FlowNode

if TYPE_CHECKING:
    from tools.flow_map.graph import FlowGraph, GraphBuilder
    from tools.mesh_index.service import IndexService

FRONT = ("http_route", "gateway_call", "grpc_handler")
KEY_KIND = {"create_job": "job", "fallback": "job", "direct_queue": "job", "create_event": "event",
            "repository_create": "event", "ws_send": "ws_event"}


def request_graph(service: IndexService, target: str, depth: int, builder: GraphBuilder) -> FlowGraph | None:
    keys, _loose = builder.engine.resolve_target(target)
    if keys or not is_request(service, target):
        return None
    rm = request_map(service, target)
    matches = []
    previous: list[str] = []
    handler_node: str | None = None
    for hop in rm.hops:
        if hop.kind in FRONT and hop.at is not None:
            nid = node_id("q", hop.kind, hop.name, hop.at.file, hop.at.line)
            builder.graph.nodes[nid] = FlowNode(
                id=nid, role="code", kind=hop.kind, label=hop.name if hop.kind != "grpc_handler" else
                f"{hop.at.symbol} (gRPC {hop.name})", repo=hop.at.repo, symbol=hop.at.symbol, file=hop.at.file,
                line=hop.at.line, confidence=hop.confidence, target=hop.kind == "http_route" or not previous)
            for p in previous:
                builder.edge(p, nid, None, hop.confidence)
            previous = [nid]
            handler_node = nid if hop.kind == "grpc_handler" else handler_node
        elif hop.kind == "outbox_write" and handler_node is not None:
            kind, _sp, value = hop.name.partition(" ")
            key = (KEY_KIND.get(kind, "job"), value)
            try:
                builder.build(value, depth)
                matches.extend(builder.graph.matches)
            except NotFound:
                continue
            builder.edge(handler_node, builder.type_node(key),
                         "fallback (on failure)" if kind == "fallback" else kind, hop.confidence)
    if not builder.graph.nodes:
        raise NotFound(f"{target!r}: " + ("; ".join(rm.notes) or "nothing to draw"))
    builder.graph.matches = list({(m.kind, m.value): m for m in matches}.values())
    builder.graph.notes.extend(n for n in rm.notes if n not in builder.graph.notes)
    return builder.graph
