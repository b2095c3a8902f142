"""Targets of analyze_impact that are not a value: a class, a config key (and kinds other modules plug in).

A *node* answers "what does it consume, what does it emit": a handler consumes its jobs, a
worker the jobs it routes, a post-processor the events that reach it (its filter accepts them and
they are written to a stream it reads); any class emits what its own producer sites write (and,
through the classes it names, what its injected writers write for it). A config key
(``scatterGather.aggregations``, ``successEvent``, ``ws-service/config/default.json``) emits what
the sites reading it write.

Target kinds are a small dispatch, :data:`NODE_KINDS` (name -> resolver): a resolver takes the
engine and the target text and returns :class:`NodeHit` s (empty when the target is not of its
kind). Another module adds a kind with :func:`register_node_kind` (an HTTP route or a gRPC method:
the sites its handler writes are what it emits). Values (jobs, events, websocket types, queues,
streams) are resolved first, by :meth:`ImpactEngine.resolve_target`; nodes only when no value matches.

Upstream (``direction`` = upstream|both): from the values a target consumes (or the value itself),
the sites producing them, then what those sites' classes consume in turn, to ``depth`` levels;
an outcome event written by the audit trigger goes up to the jobs of its emitter.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tools.mesh_index.linked import Key, SiteRec
from tools.mesh_index.model import FollowUp, NodeMatch
from tools.mesh_index.table_narrowing import emitter_of

if TYPE_CHECKING:
    from tools.mesh_index.impact import ImpactEngine

MAX_UPSTREAM = 500


@dataclass(slots=True)
class NodeHit:
    match: NodeMatch
    consumes: list[SiteRec] = field(default_factory=list)  # the node's own consumer sites, one per value
    emits: list[SiteRec] = field(default_factory=list)  # producer sites of the node, one per value


NodeResolver = Callable[["ImpactEngine", str], list[NodeHit]]


def class_nodes(engine: ImpactEngine, target: str) -> list[NodeHit]:
    """Classes named ``target``: handlers, workers, post-processors, and any class with producer sites."""
    name = target.strip()
    idx = engine.idx
    owners = {k for k in (*idx.handlers, *idx.workers, *idx.post_processors, *idx.class_producers) if k[1] == name}
    hits = []
    for owner in sorted(owners):
        roles = [r for r, table in (("handler", idx.handlers), ("worker", idx.workers),
                                    ("post_processor", idx.post_processors)) if owner in table]
        consumes = [s for k in engine.class_inputs(owner) for s in _consumer_site(engine, owner, k)]
        emits = [site.with_value(k[1]) for k, site in idx.class_producers.get(owner, ())]
        for other in idx.collaborators.get(owner, ()):  # its injected writers, for the values its calls bind
            allowed = idx.collaborator_values.get((owner, other))
            emits += [site.with_value(k[1], via_class=other[1]) for k, site in idx.class_producers.get(other, ())
                      if allowed is None or k[1] in allowed]
        where = _where(engine, owner)
        hits.append(NodeHit(NodeMatch(kind="class", name=name, role=", ".join(roles) or "producer",
                                      file=owner[0], line=where), consumes, emits))
    return hits


def config_key_nodes(engine: ImpactEngine, target: str) -> list[NodeHit]:
    """A config file or key (a dotted path or its last name): the sites writing a value read from it."""
    t = target.strip()
    if not t or " " in t:
        return []
    emits: dict[str, list[SiteRec]] = {}
    for sites in engine.idx.producers.values():
        for s in sites:
            cfg = s.detail.get("config", "")
            if not cfg:
                continue
            file, _sep, key = cfg.partition(": ")
            parts = key.split(".")
            names = {file, key, parts[-1]} | {".".join(parts[:i]) for i in range(1, len(parts))}
            if t in names:
                emits.setdefault(key if t != file else file, []).append(s)
    if not emits:
        return []
    every = [s for sites in emits.values() for s in sites]
    return [NodeHit(NodeMatch(kind="config_key", name=t, role="config", file=every[0].detail["config"].split(": ")[0],
                              line=None), [], every)]


NODE_KINDS: dict[str, NodeResolver] = {"class": class_nodes, "config_key": config_key_nodes}


def register_node_kind(kind: str, resolver: NodeResolver) -> None:
    """Plug another target kind into analyze_impact (tried after values, in registration order)."""
    NODE_KINDS[kind] = resolver


def resolve_nodes(engine: ImpactEngine, target: str) -> list[NodeHit]:
    for resolver in NODE_KINDS.values():
        hits = resolver(engine, target)
        if hits:
            return hits
    return []


def _consumer_site(engine: ImpactEngine, owner: tuple[str, str], key: Key) -> list[SiteRec]:
    return [c for c in engine.consumers(key) if (c.file, (c.symbol or "").split(".")[0]) == owner]


def _where(engine: ImpactEngine, owner: tuple[str, str]) -> int | None:
    idx = engine.idx
    for table in (idx.handlers, idx.workers, idx.post_processors):
        if owner in table:
            return table[owner].site.line  # type: ignore[attr-defined]
    sites = idx.class_producers.get(owner, ())
    return min(s.line for _k, s in sites) if sites else None


def upstream(engine: ImpactEngine, starts: list[Key], depth: int, include_tests: bool) -> list[FollowUp]:
    """Who writes ``starts`` and, level by level, what those writers consume (see the module docstring)."""
    out: list[FollowUp] = []
    seen = set(starts)
    frontier = list(starts)
    for d in range(1, depth + 1):
        nxt: list[Key] = []
        for key in frontier:
            for site in engine.producers(key):
                if (site.test_only and not include_tests) or len(out) >= MAX_UPSTREAM:
                    continue
                owner = (site.file, (site.symbol or "").split(".")[0])
                ins = outcome_jobs(engine, key, site) if site.kind.startswith("sql_") else engine.class_inputs(owner)
                via = f"{site.kind} {site.symbol or site.file}"
                model = site.with_value(key[1]).model()
                if not ins:  # a start of the flow (a controller, a service): nothing it consumes is known
                    out.append(FollowUp(depth=d, from_kind="code", from_value=site.symbol or site.file, kind=key[0],
                                        value=key[1], via=via, confidence=site.confidence,  # type: ignore[arg-type]
                                        site=model))
                for k in ins:
                    out.append(FollowUp(depth=d, from_kind=k[0], from_value=k[1], kind=key[0], value=key[1], via=via,
                                        confidence=site.confidence, site=model))  # type: ignore[arg-type]
                    if k not in seen:
                        seen.add(k)
                        nxt.append(k)
        frontier = nxt
    return out


def outcome_jobs(engine: ImpactEngine, key: Key, site: SiteRec) -> list[Key]:
    """The jobs whose audit rows make the audit trigger write outcome event ``key`` (the jobs of its emitter)."""
    idx = engine.idx
    emitters = {o.emitter for o in idx.outcomes if o.value == key[1] and o.site.file == site.file}
    if not emitters:
        return []
    return sorted(k for k, sites in idx.producers.items() if k[0] == "job" and (
        None in emitters or any(emitter_of(s, idx.emitters) in emitters for s in sites if not s.test_only)))
