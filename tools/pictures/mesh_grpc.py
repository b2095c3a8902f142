"""The gRPC edges of the mesh: client call -> gRPC method -> handler service, and the handler's outbox writes
onward to the queues and streams they travel on.

Everything comes from the code-navigation tools' resolution (:mod:`tools.code_nav.grpc_graph`, the same
data ``analyze_grpc`` gives), never from names in the picture:

- a *client call* is a ``this.<field>.<method>(...)`` on a field assigned ``getService<...>(X)``, ``X``
  resolved to a string (a ts-proto ``*_SERVICE_NAME`` constant included): exact;
- a *handler* is a ``@GrpcMethod(service, method)`` whose arguments resolved to strings: exact; a method of
  a class decorated with ts-proto's ``@XServiceControllerMethods()`` is only matched to an rpc by its name:
  a **candidate** (drawn dashed, labelled so);
- a call and a handler belong to the same method by the wire identity ``analyze_grpc`` uses (service name
  without package, method name in any case);
- a handler's *writes* are the index's producer sites inside it and in what it calls on its typed fields
  (:class:`tools.code_nav.outbox_writes.Writes`); each goes to the queues and streams whose producer
  site it **is** (the same file and line in the mesh), never to a route of the same name. A write of a
  candidate handler, or one the index itself only guessed, is a candidate too.

Methods known only from a ``.proto`` (no handler, no client) are counted, not drawn. Test code is left out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tools.code_nav.grpc_graph import build_graph, svc_key
from tools.code_nav.outbox_writes import Writes
from tools.flow_map.mermaid import node_id
from tools.pictures.mesh_model import MeshEdge, MeshNode

if TYPE_CHECKING:
    from tools.mesh_index.service import IndexService

Route = tuple[str, str]
FALLBACK_KINDS = ("fallback",)


@dataclass
class Handler:
    repo: str
    site: str
    symbol: str
    candidate: bool


@dataclass
class Write:
    repo: str
    site: str
    kind: str
    value: str | None
    candidate: bool


@dataclass
class Method:
    """One gRPC method (``EventService.CreateEvent``) with what calls it, implements it and writes for it."""

    name: str
    package: str = ""
    proto: str | None = None
    calls: list[tuple[str, str, str]] = field(default_factory=list)  # (repo, file:line, symbol)
    handlers: list[Handler] = field(default_factory=list)
    writes: list[Write] = field(default_factory=list)

    @property
    def repos(self) -> set[str]:
        return {c[0] for c in self.calls} | {h.repo for h in self.handlers}

    @property
    def weight(self) -> int:
        return len(self.calls) + len(self.handlers) + len(self.writes)


@dataclass
class GrpcFacts:
    methods: list[Method] = field(default_factory=list)
    proto_only: int = 0
    truncated: bool = False


def grpc_facts(index: IndexService) -> GrpcFacts:
    """Every gRPC method with a client call or a handler (non-test code), its calls, handlers and writes."""
    g = build_graph(index, False)
    writes = Writes(index, False)
    names: dict[tuple[str, str], tuple[str, str]] = {}
    for svc, method in [(c.service, c.method) for c in g.calls] + [
            (h.service, h.method) for h in g.handlers if h.via == "GrpcMethod"]:
        names.setdefault((svc_key(svc), method.lower()), (svc.rsplit(".", 1)[-1], method))
    rpcs = {(svc_key(r.service), r.method.lower()): r for r in g.rpcs}
    facts = GrpcFacts(truncated=g.truncated, proto_only=len(set(rpcs) - set(names)))
    for key in sorted(names):
        svc, method = names[key]
        rpc = rpcs.get(key)
        m = Method(name=f"{rpc.service}.{rpc.method}" if rpc else f"{svc}.{method}",
                   package=rpc.package if rpc else "", proto=f"{rpc.at.file}:{rpc.at.line}" if rpc else None)
        m.calls = [(c.at.repo, f"{c.at.file}:{c.at.line}", c.at.symbol or "") for c in g.calls_of(svc, method)]
        for h in g.handlers_of(svc, method):
            handler = Handler(h.at.repo, f"{h.at.file}:{h.at.line}", h.at.symbol or "", h.via != "GrpcMethod")
            m.handlers.append(handler)
            for w in writes.of(handler.symbol) if handler.symbol else ():
                m.writes.append(Write(w.at.repo, f"{w.at.file}:{w.at.line}", w.kind, w.value,
                                      handler.candidate or w.confidence != "exact"))
        facts.methods.append(m)
    return facts


def _trouble(m: Method) -> list[str]:
    if not m.handlers:
        return ["no @GrpcMethod handler found (not implemented, or implemented another way)"]
    if all(h.candidate for h in m.handlers):
        return ["only candidate handlers (matched by name through a ControllerMethods class decorator)"]
    return []


def _names(items: list[str]) -> str:
    shown = sorted(set(items))
    return ", ".join(shown[:2]) + (f" +{len(shown) - 2}" if len(shown) > 2 else "")


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'s' * (n != 1)}"


@dataclass
class _Acc:
    exact: list[str] = field(default_factory=list)
    candidates: list[str] = field(default_factory=list)
    types: set[str] = field(default_factory=set)
    on_failure: set[str] = field(default_factory=set)  # types only a fallback (withFallback) writes

    def text(self, kind: str, zoomed: bool) -> str:
        """The edge's label: names when zoomed in, counts otherwise; candidates always said so."""
        if kind == "grpc_write":
            what = _names(list(self.types)) if zoomed else _count(len(self.types), "type")
            when = ""
            if self.on_failure:
                when = (" (fallback, on failure)" if self.on_failure == self.types
                        else f" ({_count(len(self.on_failure), 'type')} only on failure)")
            return ("candidate " if not self.exact else "") + f"writes {what}" + when
        if kind == "grpc_call":
            return f"calls from {_names(self.exact)}" if zoomed else _count(len(self.exact), "call")
        parts = []
        if self.exact:
            parts.append(f"handler {_names(self.exact)}" if zoomed else _count(len(set(self.exact)), "handler"))
        if self.candidates:
            parts.append(f"candidate handler {_names(self.candidates)} (by name)" if zoomed
                         else _count(len(set(self.candidates)), "candidate handler") + " (by name)")
        return "; ".join(parts)


def draw(facts: GrpcFacts, *, service_id: Callable[[str], str | None], route_id: Callable[[Route], str | None],
         site_routes: dict[tuple[str, str], set[Route]], zoom: str | None,
         max_methods: int) -> tuple[list[MeshNode], list[MeshEdge], list[str], int]:
    """The method nodes and their edges (``service_id`` / ``route_id``: the drawn node of a repository or route,
    None when it is not drawn), notes, and how many methods were folded into one ``+N more`` node."""
    methods = [m for m in facts.methods if zoom is None or zoom in m.repos]
    methods.sort(key=lambda m: (not _trouble(m), -m.weight, m.name))
    kept, folded = methods[:max_methods], methods[max_methods:]
    nodes: list[MeshNode] = []
    ids: dict[str, str] = {}
    for m in kept:
        ids[m.name] = node_id("g", m.package, m.name)
        sites = [s for s in [m.proto, *(c[1] for c in m.calls), *(h.site for h in m.handlers)] if s]
        nodes.append(MeshNode(id=ids[m.name], kind="grpc", label=f"gRPC {m.name}", name=m.name,
                              produces=len(m.writes), consumes=len(m.calls),
                              types=sorted({w.value for w in m.writes if w.value}), trouble=_trouble(m),
                              sites=sites[:12] if zoom else []))
    notes: list[str] = []
    if folded:
        fold = MeshNode(id=node_id("f", "grpc", *(m.name for m in folded)), kind="folded",
                        label=f"+{len(folded)} more gRPC methods", name="grpc methods",
                        members=[m.name for m in folded])
        nodes.append(fold)
        ids.update({m.name: fold.id for m in folded})
        notes.append(f"{len(folded)} gRPC methods folded into one node (max_services={max_methods}); their edges "
                     "are drawn from it")
    acc: dict[tuple[str, str, str], _Acc] = {}  # (source, target, edge kind)
    unrouted: set[str] = set()

    def add(a: str | None, b: str | None, kind: str, item: str, candidate: bool, types: set[str] | None = None,
            fallback: bool = False) -> None:
        if a is None or b is None:
            return
        e = acc.setdefault((a, b, kind), _Acc())
        (e.candidates if candidate else e.exact).append(item)
        e.types |= types or set()
        if fallback:
            e.on_failure |= types or set()

    for m in methods:
        mid = ids[m.name]
        for repo, _site, symbol in m.calls:
            add(service_id(repo), mid, "grpc_call", symbol, False)
        for h in m.handlers:
            add(mid, service_id(h.repo), "grpc_handler", h.symbol, h.candidate)
        for w in m.writes:
            routes = site_routes.get((w.repo, w.site), set())
            if not routes and w.value:
                unrouted.add(f"{m.name} -> {w.value}")
            for r in sorted(routes):
                add(mid, route_id(r), "grpc_write", w.value or "?", w.candidate, {w.value} if w.value else set(),
                    w.kind in FALLBACK_KINDS)
    edges = [MeshEdge(source=a, target=b, label=e.text(kind, zoom is not None), sites=len(e.exact) + len(e.candidates),
                      types=sorted(e.types), confidence="exact" if e.exact else "candidate",
                      kind=kind)  # type: ignore[arg-type]  # one exact link makes the edge exact
             for (a, b, kind), e in sorted(acc.items())]
    if unrouted:
        notes.append(f"{len(unrouted)} gRPC handler write(s) reach no queue or stream of the mesh (not drawn): "
                     + "; ".join(sorted(unrouted)[:5]) + (" ..." if len(unrouted) > 5 else ""))
    return nodes, edges, notes, len(folded)


def summary(facts: GrpcFacts | None, drawn: int, zoom: str | None) -> str:
    """The ``grpc`` line of the result: what the picture holds of gRPC, or why it holds none."""
    if facts is None or not facts.methods:
        extra = f" ({facts.proto_only} rpc(s) declared in .proto files only)" if facts and facts.proto_only else ""
        return ("no gRPC edges: the workspace has no @GrpcMethod handler and no getService<...>() client call "
                f"the code-navigation tools resolve{extra}")
    ms = facts.methods if zoom is None else [m for m in facts.methods if zoom in m.repos]
    candidates = sum(h.candidate for m in ms for h in m.handlers)
    text = (f"{len(ms)} gRPC method(s){' of ' + zoom if zoom else ''} ({drawn} drawn): {sum(len(m.calls) for m in ms)} "
            f"client call(s) -> method -> {sum(len(m.handlers) for m in ms)} handler(s)"
            f"{f' ({candidates} candidate(s) matched by name, dashed)' if candidates else ''}, "
            f"{sum(len(m.writes) for m in ms)} outbox write(s) onward to their queues/streams; resolved as "
            "analyze_grpc resolves them (analyze_grpc(target=<method>) for the sites)")
    if facts.proto_only:
        text += f"; {facts.proto_only} rpc(s) declared in .proto files only (no handler, no client): not drawn"
    if facts.truncated:
        text += "; the .proto walk stopped early: partial"
    return text
