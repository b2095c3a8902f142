"""The linked index: resolved facts held in plain, slotted records for fast queries.

Built by :func:`tools.mesh_index.sites.link` from every file's facts; read by
:mod:`~tools.mesh_index.impact`, :mod:`~tools.mesh_index.catalogue` and other capabilities
(``verify_flow`` reuses :attr:`LinkedIndex.declared`, :attr:`handlers`, :attr:`workers`,
:attr:`post_processors`, :attr:`mappings` and :attr:`wrappers` instead of re-resolving names).
Records are immutable once built; a refresh builds a new :class:`LinkedIndex`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from tools.mesh_index.model import Site

Key = tuple[str, str]  # (kind, value)


@dataclass(slots=True)
class SiteRec:
    repo: str
    file: str
    line: int
    symbol: str | None
    kind: str
    confidence: str = "exact"
    test_only: bool = False
    value: str | None = None
    detail: dict[str, str] = field(default_factory=dict)

    def model(self) -> Site:
        return Site.model_construct(
            repo=self.repo, file=self.file, line=self.line, symbol=self.symbol, kind=self.kind,
            confidence=self.confidence, test_only=self.test_only, value=self.value, detail=dict(self.detail),
        )

    def with_value(self, value: str, confidence: str | None = None, **detail: str) -> SiteRec:
        return SiteRec(self.repo, self.file, self.line, self.symbol, self.kind, confidence or self.confidence,
                       self.test_only, value, {**self.detail, **{k: v for k, v in detail.items() if v}})


@dataclass(slots=True)
class TypeInfo:
    """A declared job / event / ws_event / queue / stream value."""

    kind: str
    value: str
    name: str  # qualified name at the declaration (Enum.MEMBER)
    defined_at: SiteRec | None
    aliases: list[str] = field(default_factory=list)
    test_only: bool = False


@dataclass(slots=True)
class HandlerRec:
    key: tuple[str, str]  # (file, class)
    site: SiteRec
    jobs: list[str]
    confidence: str = "exact"
    routed_by: list[tuple[str, str]] = field(default_factory=list)


@dataclass(slots=True)
class WorkerRec:
    key: tuple[str, str]
    site: SiteRec
    queues: list[str]
    handlers: list[tuple[str, str]]
    switch_jobs: list[str]
    queue_raw: str | None = None


@dataclass(slots=True)
class PostProcessorRec:
    key: tuple[str, str]
    site: SiteRec
    streams: list[str]
    groups: list[str]
    accepts: dict[str, str]  # value -> confidence
    patterns: list[tuple[str, str]]  # (endsWith|startsWith|includes, text)
    accept_all: bool = False
    filter_unknown: bool = False
    binding: str | None = None  # how stream/group were found
    stream_heuristic: bool = False  # the stream name came from a config file or a guess
    started: bool = True  # False: no production file imports or constructs the class, so nothing runs it

    def accepts_value(self, value: str) -> str | None:
        """``exact``/``heuristic`` when this post-processor's filter lets ``value`` through, else None."""
        if value in self.accepts:
            return self.accepts[value]
        for op, pattern in self.patterns:
            if (op == "endsWith" and value.endswith(pattern)) or (op == "startsWith" and value.startswith(pattern)) \
                    or (op == "includes" and pattern in value):
                return "heuristic"
        return None


@dataclass(slots=True)
class MappingRec:
    name: str
    site: SiteRec
    entries: list[tuple[Key, Key, int, bool]]  # (from, to, line, heuristic)


@dataclass(slots=True)
class OutcomeRec:
    """An event the audit trigger writes when a job's audit row changes status."""

    site: SiteRec
    value: str
    status: str | None
    emitter: str | None  # the emitter the value was computed for (None: same for all)
    heuristic: bool
    names_guessed: bool = False  # no audit trigger found: the name comes from [conventions], not from SQL


@dataclass(slots=True)
class LinkedIndex:
    declared: dict[Key, TypeInfo] = field(default_factory=dict)
    by_qual: dict[str, Key] = field(default_factory=dict)
    by_member: dict[str, set[Key]] = field(default_factory=dict)
    producers: dict[Key, list[SiteRec]] = field(default_factory=dict)
    # sites whose value could only be guessed ("every value of a table / config key"): never producers
    candidates: dict[Key, list[SiteRec]] = field(default_factory=dict)
    routes_out: dict[Key, dict[Key, list[str]]] = field(default_factory=dict)  # key -> (queue|stream, name) -> via
    handlers: dict[tuple[str, str], HandlerRec] = field(default_factory=dict)
    workers: dict[tuple[str, str], WorkerRec] = field(default_factory=dict)
    post_processors: dict[tuple[str, str], PostProcessorRec] = field(default_factory=dict)
    mappings: list[MappingRec] = field(default_factory=list)
    mapping_from: dict[Key, list[tuple[MappingRec, Key, int, bool]]] = field(default_factory=dict)
    outcomes: list[OutcomeRec] = field(default_factory=list)
    unresolved: dict[str, list[SiteRec]] = field(default_factory=dict)  # kind -> sites
    class_producers: dict[tuple[str, str], list[tuple[Key, SiteRec]]] = field(default_factory=dict)
    wrappers: dict[tuple[str, str], SiteRec] = field(default_factory=dict)  # fallback wrapper -> its createJob
    # handler / post-processor -> classes it names (injected writers, repositories) that produce jobs or events
    collaborators: dict[tuple[str, str], list[tuple[str, str]]] = field(default_factory=dict)
    # (consumer, collaborator) -> the only values the consumer's calls make the collaborator write
    collaborator_values: dict[tuple[tuple[str, str], tuple[str, str]], list[str]] = field(default_factory=dict)
    emitters: list[str] = field(default_factory=list)
    stream_prefix: str = "stream:"
    handlers_by_job: dict[str, list[HandlerRec]] = field(default_factory=dict)
    workers_by_queue: dict[str, list[WorkerRec]] = field(default_factory=dict)

    def add_producer(self, key: Key, site: SiteRec) -> None:
        self.producers.setdefault(key, []).append(site)

    def add_candidate(self, key: Key, site: SiteRec) -> None:
        self.candidates.setdefault(key, []).append(site)

    def add_route(self, key: Key, route: Key, via: str) -> None:
        vias = self.routes_out.setdefault(key, {}).setdefault(route, [])
        if via not in vias:
            vias.append(via)

    def stream_key(self, target: str) -> str:
        """The Redis stream an outbox runner writes for ``target_services`` entry ``target``."""
        return target if target.startswith(self.stream_prefix) else self.stream_prefix + target

    def known_values(self) -> set[Key]:
        keys = set(self.declared) | set(self.producers)
        for rec in self.handlers.values():
            keys.update(("job", j) for j in rec.jobs)
        for w in self.workers.values():
            keys.update(("queue", q) for q in w.queues)
        for pp in self.post_processors.values():
            keys.update(("stream", s) for s in pp.streams)
            keys.update(("event", v) for v in pp.accepts)
        for routes in self.routes_out.values():
            keys.update(routes)
        return keys


_WORD = re.compile(r"[^a-z0-9]+")


def norm(text: str) -> str:
    """Lower-case with separators removed: ``FALLBACK_CREATE_EVENT`` ~ ``fallback-create-event``."""
    return _WORD.sub("", text.lower())
