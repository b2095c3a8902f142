"""Catalogue orphans as ``info`` findings, each exactly once.

Events no post-processor accepts are ``type-never-consumed``, streams no group reads are
``stream-without-group`` (both read from ``list_catalogue``, so they follow the index's rules
of which stream an event travels on); other orphans (jobs, queues, websocket types) are
``catalogue-orphan``. An orphan that another finding is about (same ``kind:value`` subject)
is not repeated: the engine drops it.
"""

from __future__ import annotations

from tools.lint.context import LintContext, ev
from tools.lint.model import Evidence, Finding
from tools.mesh_index.model import CatalogueEntry


def _where(ctx: LintContext, entry: CatalogueEntry) -> tuple[str, int, list[Evidence]]:
    evidence: list[Evidence] = []
    if entry.defined_at is not None:
        evidence.append(Evidence(file=entry.defined_at.file, line=entry.defined_at.line,
                                 note=f"{entry.kind} {entry.name} = '{entry.value}' is declared here"))
    for site in sorted(ctx.engine.producers((entry.kind, entry.value)), key=lambda s: (s.file, s.line))[:3]:
        if not site.test_only:
            evidence.append(ev(site, f"produced here ({site.kind}"
                                     + (f", onto {site.detail['stream']})" if site.detail.get("stream") else ")")))
    if not evidence:
        for site in sorted(ctx.engine.consumers((entry.kind, entry.value)), key=lambda s: (s.file, s.line))[:3]:
            evidence.append(ev(site, f"consumed here ({site.kind})"))
    if not evidence:
        return "(catalogue)", 0, evidence
    return evidence[0].file, evidence[0].line, evidence


def check(ctx: LintContext) -> list[Finding]:
    findings = []
    for entry in ctx.service.catalogue(orphans_only=True, with_checks=False).entries:
        reasons = "; ".join(entry.reasons)
        if entry.kind == "event" and any(r.startswith("no consumer") for r in entry.reasons):
            code, fix = "type-never-consumed", "add a post-processor accepting it on a stream it is written to, " \
                                               "or stop producing it"
        elif entry.kind == "stream" and any(r.startswith("no consumer group") for r in entry.reasons):
            code, fix = "stream-without-group", "start a post-processor on this stream, or stop writing to it"
        else:
            code, fix = "catalogue-orphan", "see list_catalogue(orphans_only=true) and verify_flow for this entry"
        file, line, evidence = _where(ctx, entry)
        findings.append(Finding(code=code, severity="info", file=file, line=line,
                                message=f"{entry.kind} {entry.name} ('{entry.value}'): {reasons}", fix=fix,
                                evidence=evidence, subject=f"{entry.kind}:{entry.value}"))
    return findings
