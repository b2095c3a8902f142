"""Catalogue orphans as ``info``: each orphan appears once, grouped so that they never make a wall.

Events no post-processor accepts on the streams they travel on are listed by one
``type-never-consumed`` finding, streams no group reads by one ``stream-without-group`` finding
(both read from ``list_catalogue``, so they follow the index's rules of which stream an event
travels on); the other orphans (jobs, queues, websocket types, streams nothing writes to) by one
``catalogue-orphan`` finding per kind. Each orphan is one evidence site (its declaration, else
its first producer, else its first consumer) with the catalogue's reasons. An orphan that
another finding already explains (its ``kind:value`` is that finding's subject) is left out.
"""

from __future__ import annotations

from tools.lint.context import LintContext
from tools.lint.model import Evidence, Finding
from tools.mesh_index.model import CatalogueEntry

MAX_NAMED = 6


def _site(ctx: LintContext, entry: CatalogueEntry) -> tuple[str, int]:
    if entry.defined_at is not None:
        return entry.defined_at.file, entry.defined_at.line
    key = (entry.kind, entry.value)
    for sites in (ctx.engine.producers(key), ctx.engine.consumers(key)):
        live = sorted((s for s in sites if not s.test_only), key=lambda s: (s.file, s.line))
        if live:
            return live[0].file, live[0].line
    return "(catalogue)", 0


def _group(entry: CatalogueEntry) -> tuple[str, str]:
    if entry.kind == "event" and any(r.startswith("no consumer") for r in entry.reasons):
        return "type-never-consumed", "event"
    if entry.kind == "stream" and any(r.startswith("no consumer group") for r in entry.reasons):
        return "stream-without-group", "stream"
    return "catalogue-orphan", entry.kind


GROUP_TEXT = {
    "type-never-consumed": ("event type(s) are produced but no started post-processor accepts them on the streams "
                            "they travel on", "add a consumer for each (or stop producing it); see verify_flow"),
    "stream-without-group": ("stream(s) are written to but no started post-processor reads them",
                             "start a post-processor on each stream (or stop writing to it)"),
    "catalogue-orphan": ("{kind}(s) are catalogue orphans", "see list_catalogue(orphans_only=true) and verify_flow"),
}


def check(ctx: LintContext, covered: set[str]) -> list[Finding]:
    groups: dict[tuple[str, str], list[tuple[CatalogueEntry, str, int]]] = {}
    for entry in ctx.service.catalogue(orphans_only=True, with_checks=False).entries:
        if f"{entry.kind}:{entry.value}" in covered:
            continue
        file, line = _site(ctx, entry)
        groups.setdefault(_group(entry), []).append((entry, file, line))
    findings = []
    for (code, kind), items in sorted(groups.items()):
        what, fix = GROUP_TEXT[code]
        names = ", ".join(f"'{e.value}'" for e, _f, _l in items[:MAX_NAMED])
        more = f" (+{len(items) - MAX_NAMED} more in the evidence)" if len(items) > MAX_NAMED else ""
        evidence = [Evidence(file=f, line=ln, note=f"{e.kind} {e.name} ('{e.value}'): {'; '.join(e.reasons)}")
                    for e, f, ln in items]
        first = next(((f, ln) for _e, f, ln in items if not f.startswith("(")), ("(catalogue)", 0))
        findings.append(Finding(
            code=code, severity="info", file=first[0], line=first[1],
            message=f"{len(items)} {what.format(kind=kind)}: {names}{more}", fix=fix, evidence=evidence,
            subject=f"orphans:{code}:{kind}",
        ))
    return findings
