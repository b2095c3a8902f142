"""gRPC edges in visualize_mesh: client service -> gRPC method -> handler service, and the handler's outbox
writes onward to the queues and streams they travel on.

The workspace is the code-navigation fixture (the realistic workspace plus ``nav_overlay``: .proto files,
an api-gateway with ``getService<...>()`` clients, ``@GrpcMethod`` handlers in both cases, a ts-proto
``@XServiceControllerMethods()`` class), copied per test. Every picture goes through the real Mermaid parser
(``tests/js/mermaid``), which gives back the vertices, edges and strokes as Mermaid itself read them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from server.config import Conventions
from tests.code_nav.conftest import build_nav_workspace
from tests.flow_map.mermaid_parser import decode, edges, parse_ok, vertices
from tests.helpers import in_process_client
from tools.mesh_index.service import IndexService
from tools.pictures.mesh_render import mesh_text
from tools.pictures.service import visualize

GW, EVENT, NOTIF = "api-gateway", "ms-event", "ms-notification"
CONTROLLERS = {"event": "ms-event/src/modules/event/controllers/commands/event.command.controller.ts",
               "notification": "ms-notification/src/controllers/notification.controller.ts"}


@pytest.fixture
def nav(tmp_path: Path) -> Path:
    return build_nav_workspace(tmp_path / "ws")


def _mesh(root: Path, state: Path, fmt: str = "mermaid", service: str | None = None, max_services: int = 40):
    index = IndexService(root, Conventions(), cache_dir=state)
    try:
        index.refresh()
        return visualize(index, fmt, service, max_services)
    finally:
        index.close()


def _edges(graph) -> dict[tuple[str, str], object]:
    label = {n.id: n.label for n in graph.nodes}
    return {(label[e.source], label[e.target]): e for e in graph.edges}


def _same_as_mermaid(graph) -> dict:
    """The picture parses, and Mermaid reads the nodes, edges and dashes the graph holds."""
    (picture,) = parse_ok([graph.mermaid])
    drawn, links = vertices(picture), edges(picture)
    assert {n.id for n in graph.nodes} == set(drawn)
    assert {(e.source, e.target) for e in graph.edges} == set(links)
    for e in graph.edges:
        assert links[(e.source, e.target)]["stroke"] == ("normal" if e.confidence == "exact" else "dotted"), e
    for n in graph.nodes:
        assert decode(drawn[n.id]["label"]).split("\n")[0] == n.label
        if n.kind == "grpc":
            assert drawn[n.id]["shape"] == "subroutine"
    return drawn


def test_client_method_handler_and_the_writes_onward(nav: Path, tmp_path: Path) -> None:
    graph = _mesh(nav, tmp_path / "state")
    methods = {n.name: n for n in graph.nodes if n.kind == "grpc"}
    assert set(methods) == {"EventService.CreateEvent", "EventService.DeleteEvent", "NotificationService.SendDigest",
                            "PostService.CreatePost", "AccountService.DeleteAccount", "UserService.UpdateUser",
                            "UserService.GetUser"}
    assert graph.counts["grpc_methods"] == 7 and GW in graph.services
    e = _edges(graph)
    create = "gRPC EventService.CreateEvent"
    call, handler = e[(GW, create)], e[(create, EVENT)]
    assert (call.kind, call.confidence, call.label) == ("grpc_call", "exact", "1 call")
    assert (handler.kind, handler.confidence, handler.label) == ("grpc_handler", "exact", "1 handler")
    # the writes of EventCommandController.createEvent (directly, and through EventService and EventRepository)
    # go to the routes those very sites write to
    writes = {b: x for (a, b), x in e.items() if a == create and x.kind == "grpc_write"}
    assert set(writes) == {"queue fallback-event-queue", "queue event-queue",
                           "stream stream:event:successfully_created", "stream stream:ws:event-created-feedback"}
    assert writes["queue fallback-event-queue"].types == ["events.fallback_create_event"]
    assert writes["queue fallback-event-queue"].label == "writes 1 type (fallback, on failure)"
    assert writes["queue event-queue"].types == ["events.geocode_event"]
    assert all(x.confidence == "exact" for x in writes.values())
    assert methods["EventService.CreateEvent"].types == ["event.created", "events.fallback_create_event",
                                                         "events.geocode_event"]
    # a method with an exact handler and a ts-proto ControllerMethods candidate: one edge, exact, both said
    assert e[("gRPC NotificationService.SendDigest", NOTIF)].label == "1 handler; 1 candidate handler (by name)"
    # DigestAdminController.helper is a method of the decorated class but no rpc, no client: no method is made of it
    assert not any("helper" in n.name for n in graph.nodes)
    assert not any(n.trouble for n in methods.values())
    _same_as_mermaid(graph)
    text = mesh_text(graph)
    assert "7 gRPC methods" in text.splitlines()[0] and "gRPC: 7 gRPC method(s) (7 drawn): 3 client call(s)" in text
    assert "1 candidate(s) matched by name, dashed" in text and "analyze_grpc(target=Service.Method)" in text


def test_zoomed_into_the_gateway_names_calls_handlers_and_types(nav: Path, tmp_path: Path) -> None:
    graph = _mesh(nav, tmp_path / "state", service=GW)
    e = _edges(graph)
    assert {n.name for n in graph.nodes if n.kind == "grpc"} == {
        "EventService.CreateEvent", "EventService.DeleteEvent", "NotificationService.SendDigest"}
    assert e[(GW, "gRPC EventService.CreateEvent")].label == "calls from EventsGatewayService.create"
    assert e[("gRPC EventService.CreateEvent", EVENT)].label == "handler EventCommandController.createEvent"
    assert e[("gRPC EventService.DeleteEvent", "queue fallback-event-queue")].label == (
        "writes events.fallback_delete_event (fallback, on failure)")
    # the routes the handlers write to are drawn around the gateway, with their consumers
    assert ("queue event-queue", "workers-runners") in e
    assert {n.label for n in graph.nodes if n.kind == "service"} >= {GW, EVENT, NOTIF, "workers-runners"}
    create = next(n for n in graph.nodes if n.name == "EventService.CreateEvent")
    assert "npm-packages/packages/contracts-nest/proto/event/v1/event.proto:7" in create.sites
    _same_as_mermaid(graph)


def test_a_handler_matched_by_name_only_is_a_dashed_candidate(nav: Path, tmp_path: Path) -> None:
    """Without NotificationController's @GrpcMethod, only ts-proto's class decorator (matched by method name)
    implements SendDigest: a candidate, dashed and labelled, and the method says so."""
    path = nav / CONTROLLERS["notification"]
    path.write_text(path.read_text().replace("  @GrpcMethod(NOTIFICATION_SERVICE_NAME, 'sendDigest')\n", ""))
    graph = _mesh(nav, tmp_path / "state")
    e = _edges(graph)
    edge = e[("gRPC NotificationService.SendDigest", NOTIF)]
    assert (edge.confidence, edge.label) == ("candidate", "1 candidate handler (by name)")
    method = next(n for n in graph.nodes if n.name == "NotificationService.SendDigest")
    assert method.trouble == ["only candidate handlers (matched by name through a ControllerMethods class decorator)"]
    drawn = _same_as_mermaid(graph)
    assert "broken" in drawn[method.id]["classes"]


def test_many_methods_fold_and_hostile_names_stay_labels(nav: Path, tmp_path: Path) -> None:
    hostile = 'Delete"]-->x|#%<b>`'
    path = nav / CONTROLLERS["event"]
    path.write_text(path.read_text().replace("@GrpcMethod('EventService', 'DeleteEvent')",
                                             f"@GrpcMethod('EventService', '{hostile}')"))
    whole = _mesh(nav, tmp_path / "state")
    node = next(n for n in whole.nodes if n.name == f"EventService.{hostile}")
    drawn = _same_as_mermaid(whole)
    assert decode(drawn[node.id]["label"]).split("\n")[0] == f"gRPC EventService.{hostile}"
    # the client's deleteEvent (the proto's DeleteEvent) now reaches no handler: in trouble, drawn first
    assert next(n for n in whole.nodes if n.name == "EventService.DeleteEvent").trouble == [
        "no @GrpcMethod handler found (not implemented, or implemented another way)"]
    folded = _mesh(nav, tmp_path / "state2", max_services=2)
    methods = [n for n in folded.nodes if n.kind == "grpc"]
    fold = next(n for n in folded.nodes if n.kind == "folded" and n.name == "grpc methods")
    assert len(methods) == 2 and fold.label == f"+{len(fold.members)} more gRPC methods"
    assert len(methods) + len(fold.members) == whole.counts["grpc_methods"] == 8
    assert "EventService.DeleteEvent" in {n.name for n in methods}  # troubled methods are kept first
    assert any(e.source == fold.id and e.kind == "grpc_write" for e in folded.edges)
    assert any("gRPC methods folded into one node" in note for note in folded.notes)
    _same_as_mermaid(folded)


@pytest.mark.anyio
async def test_visualize_mesh_over_mcp_and_the_app_view(nav: Path, make_settings) -> None:
    async with in_process_client(make_settings(workspace=str(nav))) as client:
        result = await client.call_tool("visualize_mesh", {"format": "json", "service": "ms-event"})
        page = await client.call_tool("visualize_mesh", {"format": "html"})
    data = result.structured_content
    kinds = {e["kind"] for e in data["edges"]}
    assert {"flow", "grpc_call", "grpc_handler", "grpc_write"} <= kinds
    assert data["grpc"].startswith("2 gRPC method(s) of ms-event (2 drawn): 2 client call(s) -> method -> 2 handler(s)")
    assert "gRPC EventService.CreateEvent" in page.structured_content["html"]


def test_graph_command_draws_the_grpc_edges(nav: Path, tmp_path: Path, capsys, mesh_config) -> None:
    from server.cli import main

    config = mesh_config({"workspace": str(nav), "state_dir": str(tmp_path / "state")})
    assert main(["graph", "--config", str(config)]) == 0
    out = capsys.readouterr().out
    assert '[["gRPC EventService.CreateEvent' in out and "%% gRPC: 7 gRPC method(s) (7 drawn)" in out
    (picture,) = parse_ok([out])
    assert any(v["shape"] == "subroutine" for v in picture["vertices"])
