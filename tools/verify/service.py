"""verify_flow: the implementation checklist of a job or event type, on top of the static index.

:func:`verify_flow` resolves the target through the index (``analyze_impact``: same
target syntax, same matching by string value), gathers the facts the checks read into a
:class:`~tools.verify.inputs.FlowInputs` (sites from ``analyze_impact``; declared queues
and streams, post-processors, qualified names and package folders from the index's
resolved facts), runs the job or event checklist and returns a
:class:`~tools.verify.model.FlowReport`. :func:`verify_all` does it for every job and
event type of the catalogue, sharing lookups and parsed files between flows;
:func:`failing_checks_by_type` is the short form for ``list_catalogue``.

Everything here is synchronous and CPU-bound: MCP adapters call it in a worker thread.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any, Protocol

from server.config import StaticConventions
from server.errors import InvalidArgument, NotFound
from tools.mesh_index.model import Catalogue, ImpactResult, Match, Site
from tools.verify.checks_event import run_event_checks
from tools.verify.checks_job import run_job_checks
from tools.verify.facts import norm_expr, registry_entries
from tools.verify.facts_producers import collection_receivers, direct_queue_calls
from tools.verify.inputs import ConsumerView, FlowInputs, Registry, RegistryKey, evidence
from tools.verify.model import FlowReport, ResolvedTarget, VerifyAllReport
from tools.verify.modules import ModuleScanner
from tools.verify.tsparse import marked_files, parse_file

log = logging.getLogger("mesh.verify")

VERIFIABLE_KINDS = ("job", "event")
MAX_REGISTRY_FILES = 5_000
MAX_TARGET = 300


class IndexServiceLike(Protocol):
    """What verify_flow uses of :class:`tools.mesh_index.service.IndexService`."""

    workspace: Path
    conventions: StaticConventions

    def analyze_impact(self, target: str, depth: int = 1, include_tests: bool = False) -> ImpactResult: ...

    def catalogue(
        self, kind: str | None = None, orphans_only: bool = False, *, with_checks: bool = True
    ) -> Catalogue: ...

    def linked(self) -> Any: ...

    def package_dir_of(self, rel: str) -> str: ...


class _Session:
    """Lookups shared by the flows of one run: catalogue, registry, modules, post-processors."""

    def __init__(self, index: IndexServiceLike) -> None:
        self.index = index
        self.workspace = Path(index.workspace)
        self.conv: StaticConventions = index.conventions
        self.linked = index.linked()
        self.modules = ModuleScanner(self.workspace, self.conv)
        full = getattr(index, "full_conventions", None)
        self.outcome_types = [*full.job_success_types, *full.job_failure_types] if full is not None else []
        self._catalogue: Catalogue | None = None
        self._declared: dict[str, dict[str, Site]] = {}
        self._registry_scanned = False
        self._registry: Registry | None = None
        self._pp_base: list[tuple[Any, Site, str, str]] | None = None
        self.failing_by_type: dict[tuple[str, str], list[str]] | None = None

    # --- shared lookups ----------------------------------------------------------------

    def catalogue(self) -> Catalogue:
        if self._catalogue is None:
            # without the failing-check annotation: that annotation is computed from these flows
            self._catalogue = self.index.catalogue(with_checks=False)
        return self._catalogue

    def declared(self, kind: str) -> dict[str, Site]:
        """Value -> declaration site of every declared ``kind`` (queue, stream) the index resolved."""
        if kind not in self._declared:
            self._declared[kind] = {
                info.value: info.defined_at.model()
                for (k, _value), info in self.linked.declared.items()
                if k == kind and info.defined_at is not None
            }
        return self._declared[kind]

    def resolve_qual(self, text: str) -> tuple[str, str] | None:
        """(kind, value) of a qualified member name the index resolved, e.g. ``ShopQueue.SHOP``."""
        key = self.linked.by_qual.get(norm_expr(text))
        return tuple(key) if key else None

    def registry(self) -> Registry | None:
        """Registry keys of the contracts package with their resolved values; None when no registry exists."""
        if not self._registry_scanned:
            self._registry = self._scan_registry()
            self._registry_scanned = True
        return self._registry

    def _scan_registry(self) -> Registry | None:
        root = self.workspace / self.conv.messaging_package
        markers = [name.encode() for name in self.conv.job_registry]
        found: list[RegistryKey] = []
        declared = False
        for parsed in marked_files(root, self.conv.skip_dirs, markers, MAX_REGISTRY_FILES):
            entries = registry_entries(parsed, self.conv)
            declared = declared or bool(entries) or any(
                f"interface {r}".encode() in parsed.source or f"type {r} ".encode() in parsed.source
                for r in self.conv.job_registry
            )
            rel = parsed.path.relative_to(self.workspace).as_posix()
            for entry in entries:
                if entry.key_is_string:
                    value: str | None = entry.key
                else:
                    key = self.resolve_qual(entry.key)
                    value = key[1] if key and key[0] == "job" else None
                found.append(RegistryKey(rel, entry, value))
        return Registry.of(found) if declared else None

    def _post_processors(self) -> list[tuple[Any, Site, str, str]]:
        """(record, site, class, groups) of every production post-processor, built once per session."""
        if self._pp_base is None:
            self._pp_base = []
            for rec in self.linked.post_processors.values():
                site = rec.site.model()
                if site.test_only:
                    continue
                cls = site.detail.get("post_processor_class") or (site.symbol or "").split(".")[0]
                self._pp_base.append((rec, site, cls, ", ".join(rec.groups)))
        return self._pp_base

    def consumer_views(self, value: str) -> list[ConsumerView]:
        """Every production post-processor, per stream it reads, with whether it accepts ``value``."""
        views = []
        for rec, site, cls, group in self._post_processors():
            if rec.accept_all or rec.accepts_value(value):
                accepts = "yes"
            elif rec.filter_unknown:
                accepts = "unknown"
            else:
                accepts = "no"
            accepted = tuple(sorted(rec.accepts)) + tuple(f"{op}('{text}')" for op, text in rec.patterns)
            for stream in rec.streams or [""]:
                views.append(ConsumerView(site, cls, stream, group, accepts, accepted))
        return views

    # --- one flow ----------------------------------------------------------------------

    def resolve(self, target: str, kind: str | None = None, value: str | None = None) -> tuple[Match, ImpactResult]:
        impact = self.index.analyze_impact(target, depth=1, include_tests=True)
        candidates = [m for m in impact.matches if m.kind in VERIFIABLE_KINDS]
        if kind is not None:
            candidates = [m for m in candidates if m.kind == kind and (value is None or m.value == value)]
        if not candidates:
            if impact.matches:
                kinds = ", ".join(sorted({f"{m.kind} {m.name}" for m in impact.matches}))
                raise InvalidArgument(
                    f"'{target}' is not a job or event type ({kinds}); verify_flow checks job and event types "
                    "(analyze_impact shows what travels on a queue or stream)"
                )
            near = f" Closest names: {', '.join(impact.suggestions[:8])}." if impact.suggestions else ""
            raise NotFound(
                f"no job or event type matches '{target}'.{near} Pass a member name, a qualified name "
                "(JobMessagingType.X) or the string value."
            )
        distinct = {(m.kind, m.value): m for m in candidates}
        if len(distinct) > 1:
            options = "; ".join(f"{m.kind} {m.name} = '{m.value}'" for m in distinct.values())
            raise InvalidArgument(
                f"'{target}' is ambiguous: {options}. Pass the qualified name or the string value of the one to check."
            )
        return next(iter(distinct.values())), impact

    def confirm_direct_push(self, site: Site, value: str) -> Site | None:
        """A ``direct_queue`` site re-read: exact, with its queue, when the receiver is provably a BullMQ queue;
        None when it is provably a built-in collection (``Set.add``); else unchanged (heuristic)."""
        parsed = parse_file(self.workspace / site.file)
        if parsed is not None and norm_expr(site.detail.get("receiver", "")) in collection_receivers(parsed):
            return None
        calls = direct_queue_calls(parsed, self.conv) if parsed is not None else []
        for call in calls:
            if call.line != site.line:
                continue
            name = call.name_expr.strip("'\"`")
            resolved = self.resolve_qual(call.name_expr)
            if name != value and (resolved is None or resolved[1] != value):
                continue
            detail = dict(site.detail)
            queue = self.resolve_qual(call.queue_expr) if call.queue_expr else None
            if queue is not None and queue[0] == "queue":
                detail["queue"] = queue[1]
            elif call.queue_expr and call.queue_expr[:1] in "'\"`" and "${" not in call.queue_expr:
                detail["queue"] = call.queue_expr.strip("'\"`")
            elif call.queue_expr:
                detail["raw"] = call.queue_expr
            detail["via"] = f"{call.method}() on a BullMQ queue"
            return site.model_copy(update={"confidence": "exact", "detail": detail})
        return site

    def inputs(self, match: Match, impact: ImpactResult) -> FlowInputs:
        def about(site: Site) -> bool:
            return site.value is None or site.value == match.value

        producers = [s for s in impact.producers if about(s)]
        confirmed = [
            self.confirm_direct_push(s, match.value) if s.kind == "direct_queue" and s.confidence != "exact" else s
            for s in producers
        ]
        producers = [s for s in confirmed if s is not None]
        inp = FlowInputs(
            workspace=self.workspace,
            conv=self.conv,
            match=match,
            producers=producers,
            consumers=[s for s in impact.consumers if about(s)],
            routes=list(impact.routes),
            unresolved=list(impact.unresolved),
            package_dir_of=self.index.package_dir_of,
            modules=self.modules,
            outcome_types=self.outcome_types,
        )
        if match.kind == "job":
            inp.declared_queues = self.declared("queue")
            inp.registry = self.registry()
        else:
            inp.declared_streams = self.declared("stream")
            views = self.consumer_views(match.value)
            for view in views:
                inp.stream_consumers.setdefault(view.stream, []).append(view)
            inp.type_consumers = [v for v in views if v.accepts == "yes"]
            inp.dynamic_consumers = [v for v in views if v.accepts == "unknown"]
        return inp

    def verify(self, target: str, kind: str | None = None, value: str | None = None) -> FlowReport:
        match, impact = self.resolve(target, kind, value)
        inp = self.inputs(match, impact)
        checks = run_job_checks(inp) if match.kind == "job" else run_event_checks(inp)
        resolved = ResolvedTarget(
            kind=match.kind,  # type: ignore[arg-type]
            name=match.name,
            value=match.value,
            defined_at=evidence(match.defined_at, "declaration") if match.defined_at is not None else None,
            aliases=list(match.aliases),
        )
        return FlowReport.build(resolved, checks)


def _validate_target(target: str) -> str:
    target = (target or "").strip()
    if not target:
        raise InvalidArgument("target is empty: pass a job or event type (member name, qualified name or value)")
    if len(target) > MAX_TARGET:
        raise InvalidArgument(f"target is longer than {MAX_TARGET} characters: pass a job or event type name or value")
    return target


_SESSIONS: dict[int, _Session] = {}
_SESSIONS_LOCK = threading.Lock()
MAX_SESSIONS = 8


def _session_for(index: IndexServiceLike) -> _Session:
    """The session of ``index``'s current build: reused until the index relinks (any file changed)."""
    linked = index.linked()
    with _SESSIONS_LOCK:
        session = _SESSIONS.get(id(index))
        if session is not None and session.index is index and session.linked is linked:
            return session
    session = _Session(index)
    with _SESSIONS_LOCK:
        _SESSIONS[id(index)] = session
        while len(_SESSIONS) > MAX_SESSIONS:
            _SESSIONS.pop(next(iter(_SESSIONS)))
    return session


def verify_flow(index_service: IndexServiceLike, target: str) -> FlowReport:
    """The checklist of one job or event type (see docs/verify-flow.md for each check)."""
    target = _validate_target(target)
    return _session_for(index_service).verify(target)


def verify_all(index_service: IndexServiceLike, kinds: tuple[str, ...] = VERIFIABLE_KINDS) -> VerifyAllReport:
    """Every declared job and event type of the catalogue, each with its checklist (by kind, then name)."""
    session = _session_for(index_service)
    entries = sorted(
        (e for e in session.catalogue().entries if e.kind in kinds),
        key=lambda e: (VERIFIABLE_KINDS.index(e.kind), e.name),
    )
    flows = []
    seen: set[tuple[str, str]] = set()
    for entry in entries:
        if (entry.kind, entry.value) in seen:
            continue
        seen.add((entry.kind, entry.value))
        try:
            flows.append(session.verify(entry.value, kind=entry.kind, value=entry.value))
        except (NotFound, InvalidArgument) as exc:
            log.warning("verify --all: %s %s skipped: %s", entry.kind, entry.name, exc)
    return VerifyAllReport.build(flows)


def failing_checks_by_type(index_service: IndexServiceLike) -> dict[tuple[str, str], list[str]]:
    """(kind, value) -> failing check ids, for every job and event type in one pass.

    Computed once per index build (the session keeps it until the index relinks), so a
    catalogue listing can call it on every request.
    """
    session = _session_for(index_service)
    if session.failing_by_type is None:
        report = verify_all(index_service)
        session.failing_by_type = {(f.target.kind, f.target.value): f.failing for f in report.flows}
    return dict(session.failing_by_type)
