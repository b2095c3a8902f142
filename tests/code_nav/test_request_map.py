"""The request map: an HTTP route or gRPC method followed to the websocket messages (library and hooks)."""

from __future__ import annotations

from tools.code_nav.http_routes import collect, find
from tools.code_nav.request_map import request_map


def test_routes_with_global_prefix_and_version(nav_service):
    routes = collect(nav_service.all_facts(), nav_service.layout())
    assert {(r.verb, r.path, r.symbol) for r in routes} >= {
        ("POST", "/api/v1/events", "EventsController.create"),
        ("DELETE", "/api/v1/events/:id", "EventsController.remove")}
    found, loose = find(routes, "DELETE", "/api/v1/events/42")
    assert [r.symbol for r in found] == ["EventsController.remove"] and not loose
    found, loose = find(routes, "POST", "/events")
    assert [r.symbol for r in found] == ["EventsController.create"] and loose


def test_post_events_to_the_websocket(nav_service):
    m = request_map(nav_service, "POST /api/v1/events")
    kinds = [h.kind for h in m.hops]
    assert kinds[:4] == ["http_route", "gateway_call", "grpc_handler", "outbox_write"]
    first = {h.kind: h for h in reversed(m.hops)}
    route = first["http_route"].at
    assert (route.file, route.line) == ("api-gateway/src/events/events.controller.ts", 9)
    assert first["gateway_call"].at.symbol == "EventsGatewayService.create"
    assert first["grpc_handler"].at.symbol == "EventCommandController.createEvent"
    fallback = next(h for h in m.hops if h.name == "fallback events.fallback_create_event")
    assert "fails" in fallback.detail["when"]
    names = {(h.kind, h.name) for h in m.hops}
    assert {("queue", "fallback-event-queue"), ("worker", "FallbackEventWorker"),
            ("stream", "stream:event:successfully_created"), ("ws_message", "ws.event.created"),
            ("ws_message", "ws.event.fallback_create_event")} <= names
    assert kinds.index("ws_message") > kinds.index("outbox_write")
    assert all(h.at is not None for h in m.hops if h.kind not in ("queue", "stream"))


def test_grpc_method_target_and_unknown_route(nav_service):
    m = request_map(nav_service, "EventService.DeleteEvent")
    assert [h.kind for h in m.hops][:3] == ["gateway_call", "grpc_handler", "outbox_write"]
    missing = request_map(nav_service, "GET /api/v1/nothing")
    assert missing.hops == [] and "no gateway controller" in missing.notes[0]


def test_analyze_impact_and_flow_map_hooks(nav_service):
    from tools.flow_map.service import build_map

    impact = nav_service.analyze_impact("POST /api/v1/events", 1, False)
    assert impact.request_map is not None and impact.matches == [] and impact.suggestions == []
    assert "request map POST /api/v1/events" in impact.summary_text()
    assert nav_service.analyze_impact("GEOCODE_EVENT", 1, False).request_map is None  # a type: unchanged
    picture, _graph = build_map(nav_service, "POST /api/v1/events", 3, "LR")
    kinds = {n.kind for n in picture.nodes}
    assert {"http_route", "gateway_call", "grpc_handler", "ws_event", "queue"} <= kinds
    assert "POST /api/v1/events" in picture.mermaid
