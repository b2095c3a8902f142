"""related_skills of the traces: what trace_job, trace_event and trace_request results are about.

A trace is about:

- the types of the rows it followed (the ``jobs_outbox`` / ``event_queue`` row's type, the
  ``job_audit`` row's job type, the BullMQ job's name; not the outcome events every job writes);
- the queue its job was pushed to and the streams its event was read on;
- the tables it read rows of (by their configured names);
- the files of the static sites (producers and consumers, tests left out) of those types, read
  from the static index when a workspace is configured: a skill whose ``paths`` globs match one
  of them is linked first.

The index may still be building when a trace is called on a fresh server: the trace waits
``[limits] related_skills_index_wait_s`` for it, then links by names only and says so in
``related_skills_note`` (the index build goes on; the next call uses it).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

import anyio
import anyio.to_thread

from server.errors import MeshError
from tools.outbox.model import Hop
from tools.skills.model import RelatedPage
from tools.skills.related import TargetFacts
from tools.skills.service import get_skill_links

log = logging.getLogger("mesh.skills")

OWN_HOPS = ("jobs_outbox", "job_audit", "event_queue", "bullmq_job", "stream_entry")
"""Hops of the traced item itself; the outcome events' hops (``outcome_event...``) are not its subject."""
MAX_TYPES = 8
"""Types looked up in the index per trace (a request can hold many items)."""


def facts_of_hops(hops: Iterable[Hop], settings: Any, facts: TargetFacts, types: list[str]) -> None:
    """Add the names and tables of ``hops`` to ``facts``; the types found go to ``types`` (in order)."""
    conv = settings.conventions
    real_tables = conv.tables.model_dump()
    for hop in hops:
        if hop.row is not None:
            table = real_tables.get(hop.row.table, hop.row.table)
            if table not in facts.tables:
                facts.tables.append(table)
        if hop.name not in OWN_HOPS:
            continue
        if hop.row is not None:
            _add(types, hop.row.type)
            if hop.row.table == "jobs_outbox":
                _add(facts.names, _text(hop.row.columns.get(conv.columns.target)))
        if hop.bull is not None:
            _add(types, hop.bull.name)
            _add(facts.names, hop.bull.queue)
        if hop.entry is not None:
            _add(facts.names, hop.entry.stream)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _add(into: list[str], value: str | None) -> None:
    if value and value not in into:
        into.append(value)


def _static_sites(runtime: Any, types: list[str]) -> tuple[list[str], dict[str, str], list[str]]:
    """(names of the matches, file -> 'a site of <type>', files) from the index for ``types``."""
    from tools.mesh_index.service import get_index_service

    service = get_index_service(runtime)
    service.refresh()
    names: list[str] = []
    notes: dict[str, str] = {}
    for value in types[:MAX_TYPES]:
        result = service.analyze_impact(value, depth=0)
        for match in result.matches:
            for name in (match.name, match.name.rsplit(".", 1)[-1], *match.aliases):
                _add(names, name)
        for site in [*result.producers, *result.consumers]:
            if not site.test_only:
                notes.setdefault(site.file, f"a {site.kind} site of {value}")
    return names, notes, sorted(notes)


async def link_trace(runtime: Any, facts: TargetFacts, types: list[str]) -> RelatedPage:
    """The related skills of a trace whose names and tables are in ``facts`` and types in ``types``."""
    facts.names = [*types, *facts.names]
    note = None
    wait = runtime.settings.limits.related_skills_index_wait_s
    if types and runtime.settings.workspace is not None:
        if wait <= 0:
            note = "static sites not looked up ([limits] related_skills_index_wait_s = 0): linked by names only"
        else:
            sites = None
            try:
                with anyio.move_on_after(wait):
                    sites = await anyio.to_thread.run_sync(_static_sites, runtime, types, abandon_on_cancel=True)
            except MeshError as exc:
                note = f"static sites not looked up ({exc}): linked by names only"
            except Exception as exc:  # the links are an aid: never the reason a trace fails
                log.exception("static sites of %s for related_skills", types)
                note = f"static sites not looked up (index error: {type(exc).__name__}: {exc}): linked by names only"
            else:
                if sites is None:
                    note = (f"static sites not looked up: the index was not ready within {wait:g}s "
                            "([limits] related_skills_index_wait_s); linked by names only, call again for paths")
                else:
                    names, facts.file_notes, facts.files = sites
                    facts.names.extend(n for n in names if n not in facts.names)
    links = get_skill_links(runtime)
    return await anyio.to_thread.run_sync(links.related, facts, note)


async def related_to_trace(runtime: Any, report: Any) -> RelatedPage:
    """related_skills of a trace_job / trace_event ``TraceReport``."""
    facts = TargetFacts()
    types: list[str] = []
    facts_of_hops(report.hops, runtime.settings, facts, types)
    return await link_trace(runtime, facts, types)


async def related_to_request(runtime: Any, report: Any) -> RelatedPage:
    """related_skills of a trace_request ``RequestReport``: every item's type, table and hops."""
    facts = TargetFacts()
    types: list[str] = []
    real_tables = runtime.settings.conventions.tables.model_dump()
    for item in report.items:
        _add(types, item.type)
        _add(facts.tables, real_tables.get(item.table, item.table))
        facts_of_hops(item.hops, runtime.settings, facts, types)
    return await link_trace(runtime, facts, types)
