"""The whole mesh from the static index, aggregated per service, folded to fit, zoomable.

Routes and their sites come from :class:`~tools.mesh_index.impact.ImpactEngine` (the same
producers and consumers ``analyze_impact`` gives): a queue's producers are the job sites that
target it and its consumers the workers listening on it; a stream's producers are the event
sites (code and SQL triggers) writing to it and its consumers the post-processors reading it.
Websocket outputs are the websocket types a started post-processor sends (the index's
follow-ups). gRPC methods, their client calls, handlers and the handlers' outbox writes come from the
code-navigation tools (:mod:`tools.pictures.mesh_grpc`), drawn when :func:`build_mesh` is given them.
Test-only sites are left out. Nothing is read at run time.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from server.errors import InvalidArgument, NotFound
from tools.flow_map.mermaid import node_id
from tools.mesh_index.impact import ImpactEngine
from tools.pictures import mesh_grpc
from tools.pictures.mesh_grpc import GrpcFacts
from tools.pictures.mesh_model import MeshEdge, MeshGraph, MeshNode

MAX_SERVICES = 200
SITES_SHOWN = 12


@dataclass
class _Edge:
    sites: set[str] = field(default_factory=set)
    types: set[str] = field(default_factory=set)
    heuristic: bool = False


@dataclass
class _Mesh:
    routes: dict[tuple[str, str], MeshNode] = field(default_factory=dict)
    # (service, route key, "out" | "in") -> edge
    edges: dict[tuple[str, tuple[str, str], str], _Edge] = field(default_factory=dict)
    service_sites: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    services: set[str] = field(default_factory=set)

    def link(self, service: str, route: tuple[str, str], way: str, where: str, value: str | None,
             heuristic: bool = False) -> None:
        self.services.add(service)
        edge = self.edges.setdefault((service, route, way), _Edge())
        edge.sites.add(where)
        if value:
            edge.types.add(value)
        edge.heuristic = edge.heuristic or heuristic
        self.service_sites[service].add(where)


def _route_node(kind: str, name: str) -> MeshNode:
    label = {"queue": "queue ", "stream": "stream "}.get(kind, "") + name
    return MeshNode(id=node_id("r", kind, name), kind=kind, label=label, name=name)  # type: ignore[arg-type]


def collect(engine: ImpactEngine) -> _Mesh:
    """Every non-test producer and consumer site of every queue and stream, and the websocket sends."""
    mesh = _Mesh()
    idx = engine.idx
    for kind in ("queue", "stream"):
        names = engine.queue_producers.keys() | idx.workers_by_queue.keys() if kind == "queue" else \
            engine.stream_producers.keys() | engine.stream_consumers.keys()
        names |= {v for k, v in engine.known if k == kind}
        for name in sorted(names):
            route = (kind, name)
            mesh.routes[route] = _route_node(kind, name)
            tests = 0
            for s in engine.producers(route):
                tests += s.test_only
                if not s.test_only:
                    mesh.link(s.repo, route, "out", f"{s.file}:{s.line}", s.value, s.confidence != "exact")
            if tests:
                mesh.routes[route].trouble.append(f"only test code writes to it ({tests} site{'s' * (tests != 1)}, "
                                                  "not drawn)")
            for s in engine.consumers(route):
                if not s.test_only:
                    mesh.link(s.repo, route, "in", f"{s.file}:{s.line}", None, s.confidence != "exact")
            if kind == "stream":
                for pp in engine.stream_consumers.get(name, ()):
                    if not pp.started:
                        mesh.routes[route].trouble.append(f"post-processor {pp.key[1]} reads it but nothing starts it")
    events = sorted(k for k in engine.known if k[0] == "event")
    ws = ("websocket", "websocket clients")
    for f in engine.followups(events, 1, False):
        if f.kind == "ws_event" and not f.site.test_only:
            mesh.routes.setdefault(ws, MeshNode(id=node_id("r", *ws), kind="websocket", label="websocket clients",
                                                name="websocket clients"))
            mesh.link(f.site.repo, ws, "out", f"{f.site.file}:{f.site.line}", f.value, f.confidence != "exact")
    for (_service, route, way), edge in mesh.edges.items():
        node = mesh.routes[route]
        if way == "out":
            node.produces += len(edge.sites)
        else:
            node.consumes += len(edge.sites)
        node.types = sorted(set(node.types) | edge.types)
    for (kind, _name), node in mesh.routes.items():
        if kind == "queue" and not node.consumes:
            node.trouble.append("no worker listens")
        if kind == "stream" and not node.consumes:
            node.trouble.append("no consumer group (no started post-processor reads it)")
        if kind in ("queue", "stream") and not node.produces and not any("test code" in t for t in node.trouble):
            node.trouble.append("nothing writes to it")
    return mesh


def _types_label(types: set[str], zoomed: bool, sites: int) -> str:
    if zoomed and types:
        shown = sorted(types)
        return ", ".join(shown[:3]) + (f" +{len(shown) - 3}" if len(shown) > 3 else "")
    if types:
        return f"{len(types)} type{'s' * (len(types) != 1)}"
    return f"{sites} site{'s' * (sites != 1)}"


def build_mesh(engine: ImpactEngine, fmt: str = "mermaid", service: str | None = None,
               max_services: int = 40, grpc: GrpcFacts | None = None) -> MeshGraph:
    """The mesh graph (without its rendering: see :mod:`tools.pictures.mesh_render`). ``grpc``: the workspace's
    gRPC methods (:func:`tools.pictures.mesh_grpc.grpc_facts`); their repositories are services of the mesh,
    and at most ``max_services`` methods are drawn (the rest folded into one node)."""
    if fmt not in ("mermaid", "json", "html"):
        raise InvalidArgument(f"format must be mermaid, json or html (got {fmt!r})")
    if isinstance(max_services, bool) or not isinstance(max_services, int) or not 1 <= max_services <= MAX_SERVICES:
        raise InvalidArgument(f"max_services must be an integer between 1 and {MAX_SERVICES} (got {max_services!r})")
    mesh = collect(engine)
    methods = grpc.methods if grpc else []
    for m in methods:
        mesh.services |= m.repos
    site_routes: dict[tuple[str, str], set[tuple[str, str]]] = defaultdict(set)
    for (s, r, way), e in mesh.edges.items():
        if way == "out":
            for site in e.sites:
                site_routes[(s, site)].add(r)
    services = sorted(mesh.services)
    notes: list[str] = []
    edges = dict(mesh.edges)
    routes = dict(mesh.routes)
    grpc_weight: dict[str, int] = defaultdict(int)
    for m in methods:
        for c in m.calls:
            grpc_weight[c[0]] += 1
        for h in m.handlers:
            grpc_weight[h.repo] += 1
    if service is not None:
        if service not in mesh.services:
            close = [s for s in services if service.lower() in s.lower() or s.lower() in service.lower()]
            raise NotFound(f"service {service!r} is not a service of the workspace (services: "
                           f"{', '.join(close or services) or 'none'}); pass one of them, or no service")
        own = {r for (s, r, _w) in edges if s == service}
        neighbours = {service}
        for m in methods:  # its gRPC methods: the services at their other end, the routes their handlers write to
            if service in m.repos:
                neighbours |= m.repos
                own |= {r for w in m.writes for r in site_routes.get((w.repo, w.site), ())}
        neighbours |= {s for (s, r, _w) in edges if r in own}
        notes.append(f"zoomed into {service}: {len(own)} queues/streams/websocket outputs, "
                     f"{len(neighbours) - 1} other services; {len(services) - len(neighbours)} services and "
                     f"{len(routes) - len(own)} routes not connected to it are left out")
        edges = {k: v for k, v in edges.items() if k[1] in own}
        routes = {k: v for k, v in routes.items() if k in own}
        services = sorted(neighbours)
    # fold services beyond max_services: busiest kept (then by name), the rest in one node
    weight = {s: sum(len(e.sites) for (sv, _r, _w), e in edges.items() if sv == s) + grpc_weight[s] for s in services}
    keep = sorted(services, key=lambda s: (s != service, -weight[s], s))[:max_services]
    folded_services = sorted(set(services) - set(keep))
    nodes: dict[str, MeshNode] = {}
    for s in sorted(keep):
        nodes[s] = MeshNode(id=node_id("s", s), kind="service", label=s, name=s,
                            produces=sum(len(e.sites) for (sv, _r, w), e in edges.items() if sv == s and w == "out"),
                            consumes=sum(len(e.sites) for (sv, _r, w), e in edges.items() if sv == s and w == "in"),
                            sites=sorted(mesh.service_sites[s])[:SITES_SHOWN] if service else [])
    fold_id = None
    if folded_services:
        fold_id = node_id("f", "services", *folded_services)
        nodes["\x00folded"] = MeshNode(id=fold_id, kind="folded", label=f"+{len(folded_services)} more services",
                                       name="services", members=folded_services)
        notes.append(f"{len(folded_services)} services folded into one node (max_services={max_services}); "
                     "their edges are drawn from it")
    # fold routes beyond 2 * max_services (troubled first, then busiest)
    route_weight = {r: sum(len(e.sites) for (_s, rr, _w), e in edges.items() if rr == r) for r in routes}
    route_keep = set(sorted(routes, key=lambda r: (not routes[r].trouble, -route_weight[r], r))[:2 * max_services])
    route_folds: dict[str, MeshNode] = {}
    for r in sorted(set(routes) - route_keep):
        fold = route_folds.setdefault(r[0], MeshNode(id=node_id("f", "routes", r[0]), kind="folded", label="",
                                                    name=f"{r[0]}s"))
        fold.members.append(r[1])
    for kind, fold in route_folds.items():
        fold.label = f"+{len(fold.members)} more {kind}s"
        notes.append(f"{len(fold.members)} {kind}s folded into one node")
    route_ids = {r: (routes[r].id if r in route_keep else route_folds[r[0]].id) for r in routes}
    merged: dict[tuple[str, str], _Edge] = {}
    for (s, r, way), e in edges.items():
        sid = nodes[s].id if s in nodes else fold_id
        rid = route_ids[r]
        key = (sid, rid) if way == "out" else (rid, sid)
        m = merged.setdefault(key, _Edge())  # type: ignore[arg-type]
        m.sites |= e.sites
        m.types |= e.types
        m.heuristic = m.heuristic or e.heuristic
    out_edges = [MeshEdge(source=a, target=b, sites=len(e.sites), types=sorted(e.types),
                          label=_types_label(e.types, service is not None, len(e.sites)),
                          confidence="heuristic" if e.heuristic else "exact")
                 for (a, b), e in sorted(merged.items())]
    out_nodes = [*nodes.values(), *(routes[r] for r in sorted(route_keep)), *route_folds.values()]
    g_nodes, g_edges, g_notes, g_folded = mesh_grpc.draw(
        grpc or GrpcFacts(), service_id=lambda repo: nodes[repo].id if repo in nodes else fold_id,
        route_id=route_ids.get, site_routes=site_routes, zoom=service, max_methods=max_services)
    out_nodes += g_nodes
    out_edges += g_edges
    notes += g_notes
    kinds = [r[0] for r in routes]
    ws_types = routes.get(("websocket", "websocket clients"))
    return MeshGraph(
        format=fmt, service=service, max_services=max_services, services=sorted(mesh.services),  # type: ignore[arg-type]
        nodes=out_nodes, edges=out_edges,
        counts={"services": len(services), "queues": kinds.count("queue"), "streams": kinds.count("stream"),
                "websocket_types": len(ws_types.types) if ws_types else 0,
                "grpc_methods": sum(1 for m in methods if service is None or service in m.repos),
                "edges": len(out_edges), "trouble": sum(1 for n in out_nodes if n.trouble)},
        folded=len(folded_services) + sum(len(f.members) for f in route_folds.values()) + g_folded,
        grpc=mesh_grpc.summary(grpc, sum(1 for n in g_nodes if n.kind == "grpc"), service), notes=notes,
    )
