"""verify_flow: the implementation checklist of a job or event type, on top of the static index.

:func:`verify_flow` resolves the target through the index (``analyze_impact``: same
target syntax, same matching by string value), gathers the facts the checks read into a
:class:`~tools.verify.inputs.FlowInputs`, runs the job or event checklist and returns a
:class:`~tools.verify.model.FlowReport`. :func:`verify_all` does it for every job and
event type of the catalogue, sharing parsed files and lookups between flows;
:func:`failing_checks` is the short form ``list_catalogue`` uses.

Everything here is synchronous and CPU-bound: MCP adapters call it in a worker thread.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any, Protocol

from server.config import StaticConventions
from server.errors import InvalidArgument, NotFound
from tools.mesh_index.model import Catalogue, ImpactResult, Match, Site
from tools.verify.checks_event import run_event_checks
from tools.verify.checks_job import run_job_checks
from tools.verify.facts import RegistryEntry, registry_entries
from tools.verify.inputs import FlowInputs, evidence
from tools.verify.model import FlowReport, ResolvedTarget, VerifyAllReport
from tools.verify.modules import ModuleScanner
from tools.verify.tsparse import parse_file

log = logging.getLogger("mesh.verify")

VERIFIABLE_KINDS = ("job", "event")
MAX_REGISTRY_FILES = 5_000


class IndexServiceLike(Protocol):
    """What verify_flow uses of :class:`tools.mesh_index.service.IndexService`."""

    workspace: Path
    conventions: StaticConventions

    def analyze_impact(self, target: str, depth: int = 1, include_tests: bool = False) -> ImpactResult: ...

    def catalogue(self, kind: str | None = None, orphans_only: bool = False) -> Catalogue: ...


class _Session:
    """Lookups shared by the flows of one run: catalogue, registry, modules, stream consumers."""

    def __init__(self, index: IndexServiceLike) -> None:
        self.index = index
        self.workspace = Path(index.workspace)
        self.conv: StaticConventions = index.conventions
        self.modules = ModuleScanner(self.workspace, self.conv)
        self._catalogue: Catalogue | None = None
        self._registry_scanned = False
        self._registry: list[tuple[str, RegistryEntry]] | None = None
        self._stream_consumers: dict[str, list[Site]] = {}

    # --- shared lookups ----------------------------------------------------------------

    def catalogue(self) -> Catalogue:
        if self._catalogue is None:
            self._catalogue = self.index.catalogue()
        return self._catalogue

    def declared(self, kind: str) -> dict[str, Site]:
        return {e.value: e.defined_at for e in self.catalogue().entries if e.kind == kind and e.defined_at is not None}

    def registry(self) -> list[tuple[str, RegistryEntry]] | None:
        """Registry keys of the contracts package; None when no registry interface is declared there."""
        if not self._registry_scanned:
            self._registry = self._scan_registry()
            self._registry_scanned = True
        return self._registry

    def _scan_registry(self) -> list[tuple[str, RegistryEntry]] | None:
        root = self.workspace / self.conv.messaging_package
        markers = [name.encode() for name in self.conv.job_registry]
        skip = set(self.conv.skip_dirs)
        found: list[tuple[str, RegistryEntry]] = []
        any_registry = False
        seen = 0
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if d not in skip and not d.startswith("."))
            for name in sorted(filenames):
                if not name.endswith((".ts", ".mts", ".cts")) or name.endswith(".d.ts"):
                    continue
                seen += 1
                if seen > MAX_REGISTRY_FILES:
                    break
                path = Path(dirpath) / name
                try:
                    if not any(m in path.read_bytes() for m in markers):
                        continue
                except OSError:
                    continue
                parsed = parse_file(path)
                entries = registry_entries(parsed, self.conv) if parsed is not None else []
                declares = parsed is not None and any(
                    f"interface {r}".encode() in parsed.source or f"type {r}".encode() in parsed.source
                    for r in self.conv.job_registry
                )
                any_registry = any_registry or declares or bool(entries)
                rel = path.relative_to(self.workspace).as_posix()
                found.extend((rel, e) for e in entries)
        return found if any_registry else None

    def stream_consumers(self, streams: set[str]) -> dict[str, list[Site]]:
        for stream in streams:
            if stream not in self._stream_consumers:
                try:
                    impact = self.index.analyze_impact(stream, depth=1, include_tests=True)
                except NotFound:
                    self._stream_consumers[stream] = []
                    continue
                self._stream_consumers[stream] = [c for c in impact.consumers if c.kind == "post_processor"]
        return {s: self._stream_consumers[s] for s in streams}

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
                    f"'{target}' is not a job or event type ({kinds}); verify_flow checks job and event types: "
                    "pass one of those (analyze_impact shows what travels on a queue or stream)"
                )
            near = f" Closest names: {', '.join(impact.suggestions[:8])}." if impact.suggestions else ""
            raise NotFound(f"no job or event type matches '{target}'.{near} Pass a member name, a qualified name "
                           "(JobMessagingType.X) or the string value.")
        distinct = {(m.kind, m.value): m for m in candidates}
        if len(distinct) > 1:
            options = "; ".join(f"{m.kind} {m.name} = '{m.value}'" for m in distinct.values())
            raise InvalidArgument(
                f"'{target}' is ambiguous: {options}. Pass the qualified name or the string value of the one to check."
            )
        return next(iter(distinct.values())), impact

    def inputs(self, match: Match, impact: ImpactResult) -> FlowInputs:
        def about(site: Site) -> bool:
            return site.value is None or site.value == match.value

        producers = [s for s in impact.producers if about(s)]
        consumers = [s for s in impact.consumers if about(s)]
        inp = FlowInputs(
            workspace=self.workspace,
            conv=self.conv,
            match=match,
            producers=producers,
            consumers=consumers,
            routes=list(impact.routes),
            unresolved=list(impact.unresolved),
            declared_queues=self.declared("queue") if match.kind == "job" else {},
            declared_streams=self.declared("stream") if match.kind == "event" else {},
            package_dir_of=_package_dir_function(self.index),
            modules=self.modules,
            registry=self.registry() if match.kind == "job" else None,
        )
        if match.kind == "event":
            streams = {r.name for r in impact.routes if r.kind == "stream"}
            for site in producers:
                streams.update(s.strip() for s in (site.detail.get("stream") or "").split(",") if s.strip())
            inp.stream_consumers = self.stream_consumers(streams)
        return inp

    def verify(self, target: str, kind: str | None = None, value: str | None = None) -> FlowReport:
        match, impact = self.resolve(target, kind, value)
        inp = self.inputs(match, impact)
        checks = run_job_checks(inp) if match.kind == "job" else run_event_checks(inp)
        resolved = ResolvedTarget(
            kind=match.kind,  # type: ignore[arg-type]
            name=match.name,
            value=match.value,
            defined_at=_evidence_of(match.defined_at),
            aliases=list(match.aliases),
        )
        return FlowReport.build(resolved, checks)


def _evidence_of(site: Site | None) -> Any:
    return evidence(site, "declaration") if site is not None else None


def _package_dir_function(index: Any) -> Any:
    """The index's ``package_dir_of`` when it exposes its workspace layout, else None (walk up instead)."""
    layout = getattr(index, "layout", None)
    fn = getattr(layout, "package_dir_of", None) if layout is not None else None
    return fn if callable(fn) else None


def _validate_target(target: str) -> str:
    target = (target or "").strip()
    if not target:
        raise InvalidArgument("target is empty: pass a job or event type (member name, qualified name or value)")
    if len(target) > 300:
        raise InvalidArgument("target is longer than 300 characters: pass a job or event type name or value")
    return target


def verify_flow(index_service: IndexServiceLike, target: str) -> FlowReport:
    """The checklist of one job or event type (see docs/verify-flow.md for each check)."""
    return _Session(index_service).verify(_validate_target(target))


def verify_all(index_service: IndexServiceLike, kinds: tuple[str, ...] = VERIFIABLE_KINDS) -> VerifyAllReport:
    """Every job and event type of the catalogue, each with its checklist (sorted by kind then name)."""
    session = _Session(index_service)
    flows = []
    entries = sorted(
        (e for e in session.catalogue().entries if e.kind in kinds),
        key=lambda e: (VERIFIABLE_KINDS.index(e.kind), e.name),
    )
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


def failing_checks(index_service: IndexServiceLike, value: str, kind: str | None = None) -> list[str]:
    """Ids of the failing checks of the job or event type ``value`` ([] when it cannot be verified).

    For ``list_catalogue``: call it per job/event entry with the entry's value and kind.
    """
    try:
        return _Session(index_service).verify(value, kind=kind, value=value if kind else None).failing
    except (NotFound, InvalidArgument):
        return []


def failing_checks_by_type(index_service: IndexServiceLike) -> dict[tuple[str, str], list[str]]:
    """(kind, value) -> failing check ids, for every job and event type in one pass (cheaper than per entry)."""
    return {(f.target.kind, f.target.value): f.failing for f in verify_all(index_service).flows}
