"""``flow_map``: build, fold, overlay and render the picture of one target.

The static graph comes from the index (:mod:`tools.flow_map.graph`). Fan-out above 6 branches
of one kind at a node is always folded; when the Mermaid text is still over
:data:`MAX_BYTES`, the fold limit goes down (4, 3, 2, 1) until it fits (a note says so when
even that is not enough). Code nodes get ``click`` links to their file:line when the
picture still fits with them. With ``live``, the hops that remain are read once each
(:mod:`tools.flow_map.live`) and the picture is re-folded if the live figures made it too big.
"""

from __future__ import annotations

from typing import Any

import anyio.to_thread

from server.errors import InvalidArgument
from tools.flow_map.fold import fold
from tools.flow_map.graph import FlowGraph, GraphBuilder
from tools.flow_map.mermaid import DIRECTIONS
from tools.flow_map.model import FlowMap, Folded
from tools.flow_map.render import render
from tools.mesh_index.impact import ImpactEngine
from tools.mesh_index.service import MAX_DEPTH, MAX_TARGET, IndexService

MAX_BYTES = 4096
FOLD_LIMITS = (6, 4, 3, 2, 1)

_engines: dict[int, tuple[Any, ImpactEngine]] = {}


def engine_for(service: IndexService) -> ImpactEngine:
    """An ImpactEngine over the service's current linked index (rebuilt only when the index is)."""
    linked = service.linked()
    cached = _engines.get(id(service))
    if cached is None or cached[0] is not linked:
        cached = (linked, ImpactEngine(linked))
        _engines[id(service)] = cached
    return cached[1]


def validate(target: str, depth: int, direction: str) -> tuple[str, int, str]:
    if not isinstance(target, str) or not target.strip():
        raise InvalidArgument("target is empty: give a job, event or websocket type, a queue or a stream")
    if len(target) > MAX_TARGET:
        raise InvalidArgument(f"target is {len(target)} characters long (max {MAX_TARGET})")
    if isinstance(depth, bool) or not isinstance(depth, int) or not 0 <= depth <= MAX_DEPTH:
        raise InvalidArgument(f"depth must be an integer between 0 and {MAX_DEPTH} (got {depth!r})")
    direction = "TB" if direction == "TD" else direction
    if direction not in DIRECTIONS:
        raise InvalidArgument(f"direction must be one of {', '.join(DIRECTIONS)} (got {direction!r})")
    return target.strip(), depth, direction


def static_graph(service: IndexService, target: str, depth: int) -> FlowGraph:
    """The unfolded graph of ``target`` (refreshes nothing: call ``service.refresh()`` first)."""
    def service_of(rel: str) -> str | None:
        folder = service.package_dir_of(rel)
        return folder.rsplit("/", 1)[-1] if folder else None

    builder = GraphBuilder(engine_for(service), service_of)
    # -- request-map hook (issue 34): an HTTP route or gRPC method is drawn by tools.code_nav.request_flow --
    from tools.code_nav.request_flow import request_graph

    graph = request_graph(service, target, depth, builder)
    return graph if graph is not None else builder.build(target, depth)


def fit(graph: FlowGraph, direction: str, limits: tuple[int, ...] = FOLD_LIMITS,
        folded: list[Folded] | None = None) -> tuple[FlowGraph, list[Folded], str, list[str]]:
    """Fold ``graph`` until its Mermaid fits :data:`MAX_BYTES`: (graph, folded, text, notes)."""
    done = list(folded or [])
    notes: list[str] = []
    g, text = graph, ""
    for limit in limits:
        g, more = fold(graph, limit)
        text = render(g.nodes.values(), g.edges.values(), direction)
        if len(text.encode("utf-8")) <= MAX_BYTES:
            linked = render(g.nodes.values(), g.edges.values(), direction, links=True)
            if len(linked.encode("utf-8")) <= MAX_BYTES:
                return g, done + more, linked, notes
            notes.append("no click links to the code (they would take the picture over the budget); "
                         "file:line of every node is in nodes[]")
            return g, done + more, text, notes
    text_small = render(g.nodes.values(), g.edges.values(), direction, legend=False)
    notes.append(f"the picture is {len(text_small.encode('utf-8'))} bytes even folded to one branch per kind "
                 f"(over {MAX_BYTES}); the legend was left out; lower depth for a smaller picture")
    return g, done + more, text_small, notes


def build_map(service: IndexService, target: str, depth: int, direction: str) -> tuple[FlowMap, FlowGraph]:
    """The static picture (no runtime read); also returns the folded graph for a live overlay."""
    target, depth, direction = validate(target, depth, direction)
    graph = static_graph(service, target, depth)
    g, folded, text, notes = fit(graph, direction)
    return _result(service, target, depth, direction, False, g, folded, text, graph.notes + notes), g


async def flow_map(service: IndexService, target: str, depth: int = 3, live: bool = False,
                   direction: str = "LR", runtime: Any = None) -> FlowMap:
    """The picture of ``target``; with ``live``, each hop's runtime state read through ``runtime``."""
    await anyio.to_thread.run_sync(service.refresh)
    result, graph = await anyio.to_thread.run_sync(lambda: build_map(service, target, depth, direction))
    if not live:
        return result
    if runtime is None:
        raise InvalidArgument("live=true needs the services' databases and Redis (a configured server)")
    from tools.flow_map.live import LiveReader
    from tools.outbox.mcp_tools import catalog_of

    reader = LiveReader(runtime, catalog_of(runtime))
    unavailable = await reader.overlay(list(graph.nodes.values()))
    g, folded, text, notes = fit(graph, result.direction, (FOLD_LIMITS[-1] + 99, *FOLD_LIMITS), result.folded)
    out = _result(service, result.target, result.depth, result.direction, True, g, folded, text,
                  result.notes + notes)
    out.unavailable = unavailable
    if unavailable:
        out.notes.append("hops drawn grey could not be read: " + ", ".join(p.service for p in unavailable)
                         + " (their state is unknown, not ok)")
    return out


def _result(service: IndexService, target: str, depth: int, direction: str, live: bool, g: FlowGraph,
            folded: list[Folded], text: str, notes: list[str]) -> FlowMap:
    return FlowMap(
        target=target, depth=depth, direction=direction, live=live, matches=g.matches, mermaid=text,
        mermaid_bytes=len(text.encode("utf-8")), nodes=list(g.nodes.values()), edges=list(g.edges.values()),
        folded=folded, trouble=sum(1 for n in g.nodes.values() if n.trouble), notes=list(dict.fromkeys(notes)),
        index=service.info(),
    )
