"""The flow graph of a target, built from the static index (no database, no Redis).

Nodes are the types (job, event, websocket message), the queues and streams they travel on,
and the code that writes or reads them: one node per class (or SQL function, or mapping
table) and file, whatever the site kind the index gives it (``create_job``, ``fallback``,
``handler``, ``worker``, ``post_processor``, ``sql_trigger``, ``mapping``, ... and any kind
added later), so a class that consumes one type and produces the next is one node.

Edges, solid when the index is sure (``exact``), dashed when it inferred (``heuristic``):

- producer -> type, labelled with the site kind (how it is written);
- type -> queue / stream, labelled with the outbox table it travels through;
- queue / stream -> consumer, labelled with the type (queue) or the consumer group (stream);
  a consumer site whose ``detail`` names no queue or stream hangs from the type itself;
- worker -> handler it routes;
- what happens next (the index's follow-ups, to ``depth``): consumer -> the site writing the
  next type (an audit trigger hangs from the job's workers, labelled with the status).

Static trouble drawn (see :class:`~tools.flow_map.model.Trouble`): a type nobody produces,
a job no handler takes, an event nobody consumes (a dead end), a handler no worker routes, a
queue no worker reads, a stream no consumer group reads, a post-processor whose filter
matches none of the types written to its stream, a post-processor nothing starts.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from server.errors import NotFound
from tools.flow_map.mermaid import node_id
from tools.flow_map.model import FlowEdge, FlowNode, Trouble
from tools.mesh_index.impact import ImpactEngine, _split
from tools.mesh_index.linked import Key, PostProcessorRec, SiteRec
from tools.mesh_index.model import FollowUp, Match
from tools.mesh_index.node_targets import resolve_nodes

TYPE_KINDS = ("job", "event", "ws_event")
KIND_WORD = {"job": "job", "event": "event", "ws_event": "ws message", "queue": "queue", "stream": "stream"}
ROUTE_TABLE = {"job": "jobs_outbox", "event": "event_queue"}


@dataclass
class FlowGraph:
    """Nodes and edges in drawing order, plus what building them learnt."""

    matches: list[Match] = field(default_factory=list)
    nodes: dict[str, FlowNode] = field(default_factory=dict)
    edges: dict[tuple[str, str], FlowEdge] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def copy(self) -> FlowGraph:
        return FlowGraph(list(self.matches), {k: v.model_copy(deep=True) for k, v in self.nodes.items()},
                         {k: v.model_copy() for k, v in self.edges.items()}, list(self.notes))


def class_of(symbol: str | None) -> str | None:
    """``Class`` of ``Class.method`` (a function or table name stays whole)."""
    return symbol.split(".", 1)[0] if symbol else None


def short_name(match_name: str | None, value: str) -> str:
    """``FALLBACK_CREATE_EVENT`` of ``EventsJobType.FALLBACK_CREATE_EVENT``, else the value."""
    return match_name.rsplit(".", 1)[-1] if match_name else value


class GraphBuilder:
    """Builds one :class:`FlowGraph` over an :class:`ImpactEngine` (see the module docstring)."""

    def __init__(self, engine: ImpactEngine, service_of: Callable[[str], str | None] | None = None) -> None:
        self.engine = engine
        self.service_of = service_of or (lambda _file: None)
        self.idx = engine.idx
        self.graph = FlowGraph()
        self.consumer_nodes: dict[Key, list[str]] = {}
        self.expanded: set[Key] = set()

    # -- nodes and edges ---------------------------------------------------------------------------
    def type_node(self, key: Key) -> str:
        kind, value = key
        nid = node_id("t", kind, value)
        if nid not in self.graph.nodes:
            info = self.idx.declared.get(key)
            where = info.defined_at if info else None
            self.graph.nodes[nid] = FlowNode(
                id=nid, role="type", kind=kind, label=f"{KIND_WORD.get(kind, kind)} {value}", value=value,
                name=info.name if info else None, repo=where.repo if where else None,
                file=where.file if where else None, line=where.line if where else None)
        return nid

    def route_node(self, kind: str, name: str) -> str:
        nid = node_id("r", kind, name)
        if nid not in self.graph.nodes:
            self.graph.nodes[nid] = FlowNode(id=nid, role="route", kind=kind, label=f"{KIND_WORD[kind]} {name}",
                                             value=name)
            self._route_trouble(self.graph.nodes[nid])
        return nid

    def code_node(self, site: SiteRec) -> str:
        cls = class_of(site.symbol) or site.file.rsplit("/", 1)[-1]
        nid = node_id("c", site.file, cls)
        node = self.graph.nodes.get(nid)
        if node is None:
            node = FlowNode(id=nid, role="code", kind=site.kind, label=cls, repo=site.repo, symbol=cls,
                            service=self.service_of(site.file) or site.repo,
                            file=site.file, line=site.line, confidence=site.confidence)  # type: ignore[arg-type]
            self.graph.nodes[nid] = node
        if site.kind not in node.kinds:
            node.kinds.append(site.kind)
        if site.line not in node.lines:
            node.lines.append(site.line)
        if site.confidence == "exact":
            node.confidence = "exact"
        return nid

    def edge(self, source: str, target: str, text: str | None, confidence: str) -> None:
        known = self.graph.edges.get((source, target))
        if known is None:
            self.graph.edges[(source, target)] = FlowEdge(source=source, target=target, label=text,
                                                          confidence=confidence)  # type: ignore[arg-type]
        elif confidence == "exact":
            known.confidence = "exact"

    @staticmethod
    def trouble(node: FlowNode, code: str, sentence: str) -> None:
        if all(t.code != code for t in node.trouble):
            node.trouble.append(Trouble(code=code, sentence=sentence))  # type: ignore[arg-type]

    # -- building ----------------------------------------------------------------------------------
    def build(self, target: str, depth: int) -> FlowGraph:
        keys, loose = self.engine.resolve_target(target)
        nodes = resolve_nodes(self.engine, target) if not keys else []
        if nodes:  # a class or config key: the picture of what it consumes and emits, its own code the target
            keys = list(dict.fromkeys(
                [k for hit in nodes if hit.match.kind == "class"
                 for k in self.engine.class_inputs((hit.match.file or "", hit.match.name))]
                + [k for hit in nodes for s in hit.emits for k in self._key_of(s)]))
        if not keys:
            close = self.engine.suggestions(target)
            raise NotFound(f"'{target}' matches no job, event, websocket type, queue, stream, class or config key "
                           "in the index"
                           + (f"; closest names: {', '.join(close)}" if close else "")
                           + " (list_catalogue lists every name)")
        if loose:
            self.graph.notes.append("matched ignoring case and separators")
        self.graph.matches = [self.engine.match_model(k) for k in keys]
        starts: list[Key] = []
        route_starts: list[Key] = []
        for key in keys:
            if key[0] in TYPE_KINDS:
                starts.append(key)
            else:
                route_starts.append(key)
                starts.extend(self._types_on_route(key))
        for key in route_starts:
            self.graph.nodes[self.route_node(*key)].target = True
        starts = list(dict.fromkeys(starts))
        hops = depth if not route_starts else max(depth - 1, 0)
        followups = self.engine.followups(starts, hops, False) if hops > 0 and starts else []
        order = list(starts)
        for f in followups:
            order.extend([(f.from_kind, f.from_value), (f.kind, f.value)])
        for key in dict.fromkeys(order):
            self.expand(key)
        for key in keys:
            if key[0] in TYPE_KINDS and not nodes:
                self.graph.nodes[self.type_node(key)].target = True
        owners = {(s.file, class_of(s.symbol)) for hit in nodes for s in [*hit.emits, *hit.consumes]}
        for node in self.graph.nodes.values():
            if nodes and node.role == "code" and (node.file, node.symbol) in owners:
                node.target = True
        if nodes:
            self.graph.notes.append(f"'{target}' is a {nodes[0].match.kind} ({nodes[0].match.role}): the picture of "
                                    "what it consumes and emits")
        for f in followups:
            self.follow(f)
        for key in route_starts:
            self._route_consumers(key)
        return self.graph

    def _key_of(self, site: SiteRec) -> list[Key]:
        return [(kind, site.value) for kind in TYPE_KINDS if site.value and (kind, site.value) in self.engine.known][:1]

    def _types_on_route(self, key: Key) -> list[Key]:
        kind, name = key
        type_kind = "job" if kind == "queue" else "event"
        values = [s.value for s in self.engine.producers(key) if s.value and not s.test_only]
        if kind == "queue":
            for w in self.idx.workers_by_queue.get(name, ()):
                values.extend(j for h in w.handlers if h in self.idx.handlers for j in self.idx.handlers[h].jobs)
                values.extend(w.switch_jobs)
        return [(type_kind, v) for v in dict.fromkeys(values)]

    def expand(self, key: Key) -> None:
        """The type node of ``key`` with its producers, routes and consumers."""
        if key in self.expanded or key[0] not in TYPE_KINDS:
            return
        self.expanded.add(key)
        e = self.engine
        kind, value = key
        tid = self.type_node(key)
        node = self.graph.nodes[tid]
        sites = e.producers(key)
        producers = [s for s in sites if not s.test_only]
        for s in producers:
            self.edge(self.code_node(s), tid, _write_label(s.kind, s.detail), s.confidence)
        if not producers:
            tests = len(sites)
            if tests:
                self.trouble(node, "only_test_producers", f"only test code produces it ({tests} site(s))")
            else:
                self.trouble(node, "no_producer", "nobody produces it (no production site writes it)")
        for route in e.routes(key):
            rid = self.route_node(route.kind, route.name)
            inferred = all(v.startswith(("read by", "worker ")) for v in route.via)
            self.edge(tid, rid, ROUTE_TABLE.get(kind), "heuristic" if inferred else "exact")
        consumers = [c for c in e.consumers(key) if not c.test_only]
        short = short_name(node.name, value)
        workers: dict[str, str] = {}
        for c in consumers:
            cid = self.code_node(c)
            self.consumer_nodes.setdefault(key, []).append(cid)
            if c.detail.get("worker_class") and c.kind == "worker":
                workers[c.detail["worker_class"]] = cid
        for c in consumers:
            cid = self.code_node(c)
            self._attach_consumer(key, tid, short, c, cid, workers)
        started = [c for c in consumers if c.detail.get("started") != "no"]
        if kind == "job" and not any(c.kind != "worker" or c.detail.get("route") == "switch" for c in consumers):
            self.trouble(node, "no_consumer", "no handler takes this job")
        elif kind == "event" and not started:
            self.trouble(node, "dead_end", "dead end: no post-processor that runs accepts this event")

    def _attach_consumer(self, key: Key, tid: str, short: str, c: SiteRec, cid: str, workers: dict[str, str]) -> None:
        node = self.graph.nodes[cid]
        queues = _split(c.detail.get("queue"))
        streams = _split(c.detail.get("stream"))
        routed_by = _split(c.detail.get("worker_class")) if c.kind != "worker" else []
        if c.detail.get("group") and c.detail["group"] not in node.groups:
            node.groups.append(c.detail["group"])
        if c.detail.get("started") == "no":
            self.trouble(node, "not_started", "nothing starts this post-processor (no production file imports it)")
        if c.kind == "worker" or (queues and not routed_by):
            for q in queues or [None]:
                source = self.route_node("queue", q) if q else tid
                self.edge(source, cid, short, c.confidence)
            return
        if routed_by:
            for w in routed_by:
                wid = workers.get(w)
                self.edge(wid or tid, cid, "routes" if wid else f"routed by {w}", c.confidence)
            return
        if c.kind == "handler":
            self.trouble(node, "handler_not_routed", "no worker routes this handler: it never runs")
            self.edge(tid, cid, "not routed", "heuristic")
            return
        if streams:
            group = c.detail.get("group")
            for stream in streams:
                self.edge(self.route_node("stream", stream), cid, f"group {group}" if group else short, c.confidence)
                self._filter_trouble(stream, node)
            return
        self.edge(tid, cid, c.kind, c.confidence)

    def follow(self, f: FollowUp) -> None:
        """Draw one follow-up: what leads from ``f.from_value``'s consumers to the site writing ``f.value``."""
        from_key, to_key = (f.from_kind, f.from_value), (f.kind, f.value)
        site = SiteRec(f.site.repo, f.site.file, f.site.line, f.site.symbol, f.site.kind, f.site.confidence,
                       f.site.test_only, f.site.value, dict(f.site.detail))
        sid = self.code_node(site)
        self.edge(sid, self.type_node(to_key), _write_label(f.site.kind, f.site.detail), f.confidence)
        consumers = self.consumer_nodes.get(from_key, [])
        if sid in consumers:
            return  # the consumer itself writes the next type
        named = [c for c in consumers if _names(f.via, self.graph.nodes[c].symbol)]
        if named:
            for c in named:
                self.edge(c, sid, _via_label(f), f.confidence)
            return
        if f.site.kind == "sql_trigger" and from_key[0] == "job":
            runners = [c for c in consumers if self.graph.nodes[c].kind == "worker"] or consumers
            if runners:
                for c in runners:
                    self.edge(c, sid, _via_label(f), f.confidence)
                return
        self.edge(self.type_node(from_key), sid, _via_label(f), f.confidence)

    # -- trouble of routes and consumers -------------------------------------------------------------
    def _route_trouble(self, node: FlowNode) -> None:
        name = node.value or ""
        if node.kind == "queue" and not self.idx.workers_by_queue.get(name):
            self.trouble(node, "queue_no_worker", "no worker reads this queue")
        if node.kind == "stream" and not any(pp.started for pp in self.engine.stream_consumers.get(name, ())):
            self.trouble(node, "stream_no_consumer", "no consumer group reads this stream (no post-processor runs)")
        if node.kind == "stream":
            for pp in self.engine.stream_consumers.get(name, ()):
                if pp.started and not self._filter_matches(pp, name):
                    cid = self.code_node(pp.site.with_value(name))
                    for g in pp.groups:
                        if g not in self.graph.nodes[cid].groups:
                            self.graph.nodes[cid].groups.append(g)
                    group = pp.groups[0] if pp.groups else None
                    self.edge(node.id, cid, f"group {group}" if group else "reads", "heuristic")
                    self._filter_trouble(name, self.graph.nodes[cid])

    def _filter_matches(self, pp: PostProcessorRec, stream: str) -> bool:
        """False only when the post-processor has a readable filter and no type written to ``stream`` passes it."""
        if pp.accept_all or pp.filter_unknown or not (pp.accepts or pp.patterns):
            return True
        values = {s.value for s in self.engine.stream_producers.get(stream, ()) if s.value and not s.test_only}
        return any(pp.accepts_value(v) is not None for v in values)

    def _filter_trouble(self, stream: str, node: FlowNode) -> None:
        pp = self.idx.post_processors.get((node.file or "", node.symbol or ""))
        if pp is not None and stream in pp.streams and not self._filter_matches(pp, stream):
            self.trouble(node, "filter_matches_nothing",
                         f"its filter matches none of the types written to {stream}")

    def _route_consumers(self, key: Key) -> None:
        """For a queue or stream target: every worker or post-processor reading it."""
        kind, name = key
        rid = self.route_node(kind, name)
        for c in self.engine.consumers(key):
            if c.test_only:
                continue
            cid = self.code_node(c)
            if (rid, cid) not in self.graph.edges:
                group = c.detail.get("group")
                self.edge(rid, cid, f"group {group}" if group else "reads", c.confidence)
            if kind == "stream":
                self._filter_trouble(name, self.graph.nodes[cid])


def _names(via: str, symbol: str | None) -> bool:
    return bool(symbol) and re.search(rf"(?<![\w$]){re.escape(symbol or '')}(?![\w$])", via) is not None


def _write_label(kind: str, detail: dict[str, str]) -> str:
    """How a site writes its type: its kind, or for an audit trigger the status that fires it."""
    status = detail.get("status")
    return f"on {status}" if kind == "sql_trigger" and status else kind


def _via_label(f: FollowUp) -> str:
    if f.site.kind == "sql_trigger":
        return "job_audit"
    if f.site.kind == "mapping":
        return "mapping"
    return "emits"
