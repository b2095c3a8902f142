"""The request map: an HTTP route of the gateway (``POST /api/v1/events``) or a gRPC method, followed
hop by hop to what the user finally receives.

route -> gateway controller method -> the gRPC client call it reaches (through the gateway's own
services, by the declared types of their fields) -> the ``@GrpcMethod`` handler -> the outbox rows the
handler writes (directly, through ``withFallback``, through its services and repositories) -> for
each row, the static index's answer (:meth:`IndexService.analyze_impact`): its queues and streams,
workers, handlers and post-processors, and the follow-ups down to the websocket messages. Each hop
has file:line and a confidence (``heuristic`` where a name, not a resolution, linked it).

:func:`attach_request_map` is the hook ``analyze_impact`` calls on a target it does not know.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tools.code_nav import http_routes
from tools.code_nav.grpc_graph import GrpcGraph, build_graph, select
from tools.code_nav.model import Hop, RequestMap, Where
from tools.code_nav.outbox_writes import Writes

if TYPE_CHECKING:
    from tools.mesh_index.model import ImpactResult
    from tools.mesh_index.service import IndexService

MAX_HOPS = 120
FOLLOW_DEPTH = 3
CONSUMER_HOPS = {"worker": "worker", "handler": "handler", "post_processor": "post_processor"}


class _Map:
    def __init__(self, target: str, route: str | None):
        self.out = RequestMap(target=target, route=route, hops=[])
        self.seen: set[tuple[str, str, str | None]] = set()

    def hop(self, kind: str, name: str, at: Where | None, confidence: str = "exact", **detail: str) -> None:
        key = (kind, name, f"{at.file}:{at.line}" if at else None)
        if key in self.seen or len(self.out.hops) >= MAX_HOPS:
            return
        self.seen.add(key)
        self.out.hops.append(Hop(step=len(self.out.hops) + 1, kind=kind, name=name, at=at,
                                 confidence=confidence,  # type: ignore[arg-type]
                                 detail={k: v for k, v in detail.items() if v}))


def is_request(service: IndexService, target: str) -> bool:
    """Whether ``target`` is an HTTP route or names a gRPC method of the workspace."""
    if http_routes.parse_route(target):
        return True
    if "." not in target and "/" not in target:
        return False  # a bare word: a job or event member name first (analyze_impact's own resolution)
    return bool(select(build_graph(service, False), target))


def request_map(service: IndexService, target: str, include_tests: bool = False) -> RequestMap:
    parsed = http_routes.parse_route(target)
    g = build_graph(service, include_tests)
    writes = Writes(service, include_tests)
    m = _Map(target, f"{parsed[0]} {parsed[1]}" if parsed else None)
    layout = service.layout()
    calls: list[tuple[str, str, str]] = []  # (service, method, confidence)
    if parsed:
        routes, loose = http_routes.find(http_routes.collect(writes.facts, layout), *parsed)
        if not routes:
            m.out.notes.append(f"no gateway controller answers {parsed[0]} {parsed[1]} (NestJS @Controller + "
                               "@Get/@Post/...; global prefix and URI versioning applied)")
            return m.out
        if loose:
            m.out.notes.append("matched without the global prefix or version (none found for that repository)")
        for r in routes:
            m.hop("http_route", f"{r.verb} {r.path}", Where(repo=r.repo, file=r.file, line=r.line, symbol=r.symbol),
                  "heuristic" if loose else "exact")
            calls.extend(_gateway_calls(m, g, writes, r.symbol))
        if not calls:
            m.out.notes.append("the controller reaches no gRPC client call the index resolved (a client stored "
                               "elsewhere than a field of the calling class, or called through a helper)")
    else:
        for svc, method, _rpc in select(g, target):
            for c in g.calls_of(svc, method):
                m.hop("gateway_call", f"{c.service}.{c.method}", c.at, client_field=c.client_field)
            calls.append((svc, method, "exact"))
    for svc, method, confidence in dict.fromkeys(calls):
        handlers = g.handlers_of(svc, method)
        if not handlers:
            m.out.notes.append(f"no @GrpcMethod handler for {svc}.{method}")
        for h in handlers:
            m.hop("grpc_handler", f"{h.service}.{h.method}", h.at, confidence)
            for w in writes.of(h.at.symbol or ""):
                m.hop("outbox_write", f"{w.kind} {w.value}", w.at, w.confidence, via=" -> ".join(w.via),
                      when="only when the wrapped call fails (not on 400/404/409)" if w.kind == "fallback" else "")
                if w.value:
                    _downstream(service, m, w.value, include_tests)
    return m.out


def _gateway_calls(m: _Map, g: GrpcGraph, writes: Writes, symbol: str) -> list[tuple[str, str, str]]:
    reached = {symbol}
    writes.of(symbol, on_call=lambda _caller, callee, _line: reached.add(callee))
    out = []
    for c in g.calls:
        if c.at.symbol in reached:
            m.hop("gateway_call", f"{c.service}.{c.method}", c.at, client_field=c.client_field)
            out.append((c.service, c.method, "exact"))
    return out


def _downstream(service: IndexService, m: _Map, value: str, include_tests: bool) -> None:
    result = service.analyze_impact(value, FOLLOW_DEPTH, include_tests)
    for r in result.routes:
        m.hop(r.kind, r.name, None, via="; ".join(r.via))
    for c in result.consumers:
        kind = CONSUMER_HOPS.get(c.kind, c.kind)
        m.hop(kind, c.symbol or c.file, Where(repo=c.repo, file=c.file, line=c.line, symbol=c.symbol),
              c.confidence, value=c.value or "")
    for f in result.followups:
        kind = "ws_message" if f.kind == "ws_event" else f.kind
        m.hop(kind, f.value, Where(repo=f.site.repo, file=f.site.file, line=f.site.line, symbol=f.site.symbol),
              f.confidence, after=f.from_value, via=f.via)


def attach_request_map(service: IndexService, result: ImpactResult, include_tests: bool) -> ImpactResult:
    """analyze_impact's hook: a target that matched nothing and is an HTTP route or a gRPC method gets its map."""
    if result.matches or getattr(result, "nodes", None) or not is_request(service, result.target):
        return result
    result.request_map = request_map(service, result.target, include_tests)
    result.suggestions = []
    result.notes.insert(0, "the target is an HTTP route or gRPC method: see request_map (route -> gRPC -> outbox "
                        "-> queues/streams -> consumers -> websocket)")
    return result
