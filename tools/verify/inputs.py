"""What the checks of one flow read: the index's resolved facts, gathered once per target.

:class:`FlowInputs` is filled by :mod:`tools.verify.service` from the static index
(``analyze_impact`` for the target's producers and consumers, the catalogue for declared
queues); the checks never resolve a symbol themselves. Helpers here turn index sites into
evidence and parse the files a check needs to look into.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from server.config import StaticConventions
from tools.mesh_index.model import Match, Route, Site
from tools.verify.facts import RegistryEntry
from tools.verify.model import Evidence
from tools.verify.modules import ModuleScanner
from tools.verify.tsparse import ParsedFile, parse_file

JOB_PRODUCER_KINDS = frozenset({"create_job", "fallback", "direct_queue", "mapping"})
EVENT_PRODUCER_KINDS = frozenset({"create_event", "sql_trigger", "sql_insert", "mapping", "repository_create"})
OUTBOX_JOB_KINDS = frozenset({"create_job", "fallback"})
DIRECT_KINDS = frozenset({"direct_queue"})
SEEN_HEURISTIC_KINDS = frozenset({"sql_trigger", "sql_insert", "mapping", "repository_create"})


@dataclass(frozen=True)
class RegistryKey:
    """A registry entry with the job-type value the index resolves its key to (None: not resolved)."""

    file: str
    entry: RegistryEntry
    value: str | None


@dataclass
class Registry:
    """Registry keys by resolved value, and those the index could not resolve."""

    keys: list[RegistryKey]
    by_value: dict[str, list[RegistryKey]] = field(default_factory=dict)
    unresolved: list[RegistryKey] = field(default_factory=list)

    @classmethod
    def of(cls, keys: list[RegistryKey]) -> Registry:
        registry = cls(keys)
        for key in keys:
            if key.value is None:
                registry.unresolved.append(key)
            else:
                registry.by_value.setdefault(key.value, []).append(key)
        return registry


@dataclass(frozen=True)
class ConsumerView:
    """A post-processor as an event check sees it: where it reads and whether it lets the type through."""

    site: Site
    cls: str
    stream: str
    group: str
    accepts: str  # yes | no | unknown
    accepted: tuple[str, ...] = ()
    """What its filter accepts (values and patterns), for the evidence of a drop."""


@dataclass
class FlowInputs:
    """The resolved facts about one job or event type."""

    workspace: Path
    conv: StaticConventions
    match: Match
    producers: list[Site]
    consumers: list[Site]
    routes: list[Route] = field(default_factory=list)
    unresolved: list[Site] = field(default_factory=list)
    declared_queues: dict[str, Site] = field(default_factory=dict)
    declared_streams: dict[str, Site] = field(default_factory=dict)
    stream_consumers: dict[str, list[ConsumerView]] = field(default_factory=dict)
    """Post-processors reading each stream the event is sent to (production code only)."""
    type_consumers: list[ConsumerView] = field(default_factory=list)
    """Post-processors, on any stream, whose filter lets this event type through."""
    dynamic_consumers: list[ConsumerView] = field(default_factory=list)
    """Post-processors whose filter cannot be read statically."""
    package_dir_of: Callable[[str], str] | None = None
    modules: ModuleScanner | None = None
    outcome_types: list[str] = field(default_factory=list)
    """Job-outcome event type templates of the audit trigger (``{domain}:job:outbox:success``, ...)."""
    registry: Registry | None = None
    """The registry keys found in the contracts package; None when no registry interface exists."""

    # --- site selections ---------------------------------------------------------------

    def production(self, sites: list[Site]) -> list[Site]:
        return [s for s in sites if not s.test_only]

    def job_producers(self) -> list[Site]:
        return [s for s in self.producers if s.kind in JOB_PRODUCER_KINDS]

    def event_producers(self) -> list[Site]:
        return [s for s in self.producers if s.kind in EVENT_PRODUCER_KINDS]

    def handlers(self) -> list[Site]:
        return [s for s in self.consumers if s.kind == "handler" and not s.test_only]

    def workers(self) -> list[Site]:
        return [s for s in self.consumers if s.kind == "worker" and not s.test_only]

    # --- files -------------------------------------------------------------------------

    def parse(self, rel: str) -> ParsedFile | None:
        return parse_file(self.workspace / rel)

    def package_dir(self, rel: str) -> str:
        """The folder (relative) of the nearest ``package.json`` above ``rel``, or its repository."""
        if self.package_dir_of is not None:
            return self.package_dir_of(rel)
        parts = rel.split("/")[:-1]
        while parts:
            if (self.workspace.joinpath(*parts) / "package.json").is_file():
                return "/".join(parts)
            parts.pop()
        return rel.split("/", 1)[0]


def site_class(site: Site, key: str) -> str:
    """The class a handler/worker site is about: ``detail[key]`` or the first part of its symbol."""
    name = site.detail.get(key) or (site.symbol or "").split(".")[0]
    return name


def evidence(site: Site, note: str) -> Evidence:
    return Evidence(repo=site.repo, file=site.file, line=site.line, symbol=site.symbol, note=note)


def at(site: Site, line: int, note: str, symbol: str | None = None) -> Evidence:
    """Evidence in the same file as ``site`` at another line."""
    return Evidence(repo=site.repo, file=site.file, line=line, symbol=symbol or site.symbol, note=note)


def describe(site: Site) -> str:
    return f"{site.file}:{site.line}"


def matches_template(value: str, templates: list[str]) -> str | None:
    """The first template (``{domain}`` = one name without ``:``) that ``value`` matches, else None."""
    for template in templates:
        pattern = "".join(
            "[^:]+" if part == "{domain}" else re.escape(part) for part in re.split(r"(\{domain\})", template)
        )
        if re.fullmatch(pattern, value):
            return template
    return None


def is_seen_producer(site: Site) -> bool:
    """A producer the checks accept as evidence: exact, or heuristic only in how its value was reached.

    SQL triggers/inserts (the type is a literal handed to the configured event function) and
    mapping-table producers (``detail.via``: the table maps to this type) count; a site whose
    value was guessed from names does not.
    """
    return site.confidence == "exact" or site.kind in SEEN_HEURISTIC_KINDS or bool(site.detail.get("via"))


def producer_note(site: Site) -> str:
    """``create_job producer``, with how the index found it when that was a heuristic."""
    note = f"{site.kind} producer"
    if site.confidence != "exact":
        how = site.detail.get("via") or site.detail.get("reason") or "inferred"
        note += f" (heuristic: {how})"
    return note
