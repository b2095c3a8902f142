"""Runs the lint checks over one index, then dedupes, filters, baselines and sorts the findings.

Order is deterministic: severity (error first), code, file, line, subject, message.
Catalogue orphans (``info``) are grouped (:mod:`tools.lint.orphans`) after the other checks,
leaving out those another finding is about, so an orphan appears once. A check that raises
is reported in ``notes`` (the run goes on, and says which check could not be run), never
silently skipped.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from server.errors import InvalidArgument
from tools.lint import consumers, contracts, migrations, options, orphans, payload, queues, status
from tools.lint.baseline import Baseline
from tools.lint.context import LintContext
from tools.lint.model import SEVERITIES, Finding, LintReport, LintSummary, severity_rank
from tools.lint.rules import BY_CODE, CODES, codes_of
from tools.mesh_index.service import IndexService

log = logging.getLogger("mesh.lint")

Check = Callable[[LintContext], list[Finding]]
CHECKS: tuple[tuple[str, Check], ...] = (
    ("consumers", consumers.check),
    ("queues", queues.check),
    ("payload", payload.check),
    ("migrations", migrations.check),
    ("options", options.check),
    ("status", status.check),
    ("contracts", contracts.check),
)
"""Run in this order; the codes each produces come from :data:`tools.lint.rules.RULES` (``check``)."""
ORPHAN_CODES = frozenset(codes_of("orphans"))


def validate_codes(codes: Iterable[str] | None) -> list[str]:
    if codes is None:
        return list(CODES)
    wanted = [c.strip() for c in codes if c and c.strip()]
    unknown = sorted({c for c in wanted if c not in BY_CODE})
    if unknown:
        raise InvalidArgument(f"unknown lint code(s) {', '.join(unknown)}; known codes: {', '.join(CODES)}")
    if not wanted:
        raise InvalidArgument(f"codes is empty: pass null for every code, or some of {', '.join(CODES)}")
    return list(dict.fromkeys(wanted))


def validate_severity(severity: str) -> str:
    if severity not in SEVERITIES:
        raise InvalidArgument(f"min_severity must be one of {', '.join(SEVERITIES)} (got {severity!r})")
    return severity


def collect(ctx: LintContext, codes: list[str]) -> list[Finding]:
    """Every finding of the wanted codes, deduplicated and sorted (no severity filter, no baseline)."""
    found: list[Finding] = []
    for name, check in CHECKS:
        produces = codes_of(name)
        if not set(produces) & set(codes):
            continue
        try:
            found.extend(check(ctx))
        except Exception as exc:  # a broken check must not hide the others; the report says it did not run
            log.exception("lint check %s failed", name)
            ctx.notes.append(f"check '{name}' ({', '.join(produces)}) could not run: {type(exc).__name__}: {exc}")
    if ORPHAN_CODES & set(codes):  # last: an orphan another finding explains is not repeated
        covered = {s for f in found for s in (f.subject, *f.also_about)}
        try:
            found.extend(orphans.check(ctx, covered))
        except Exception as exc:
            log.exception("lint check orphans failed")
            ctx.notes.append(f"check 'orphans' ({', '.join(sorted(ORPHAN_CODES))}) could not run: "
                             f"{type(exc).__name__}: {exc}")
    found = [f.finish() for f in found if f.code in codes]
    unique: dict[str, Finding] = {}
    for f in sorted(found, key=Finding.sort_key):
        unique.setdefault(f.fingerprint, f)
    return sorted(unique.values(), key=Finding.sort_key)


def lint(service: IndexService, codes: Iterable[str] | None = None, min_severity: str = "warning",
         baseline: Baseline | None = None) -> LintReport:
    """The findings of ``codes`` (all by default) at or above ``min_severity``, less those ``baseline`` accepts."""
    wanted = validate_codes(codes)
    validate_severity(min_severity)
    ctx = LintContext(service)
    every = collect(ctx, wanted)
    notes = list(ctx.notes)
    info = service.info()
    if info.parse_errors:
        notes.append(f"{info.parse_errors} file(s) have syntax errors; findings in them may be missing")
    full = LintReport(findings=every, summary=_summary(every, 0, 0), codes=wanted, min_severity="info",
                      notes=notes, index=info)
    return narrow(full, min_severity, baseline)


def _summary(kept: list[Finding], baselined: int, below: int) -> LintSummary:
    by_severity = {s: sum(1 for f in kept if f.severity == s) for s in reversed(SEVERITIES)}
    by_code: dict[str, int] = {}
    for f in kept:
        by_code[f.code] = by_code.get(f.code, 0) + 1
    return LintSummary(total=len(kept), by_severity=by_severity, by_code=dict(sorted(by_code.items())),
                       baselined=baselined, below_min_severity=below)


def narrow(report: LintReport, min_severity: str, baseline: Baseline | None = None) -> LintReport:
    """The report with only the findings at or above ``min_severity`` that ``baseline`` does not accept."""
    floor = severity_rank(validate_severity(min_severity))
    kept, baselined, below = [], report.summary.baselined, report.summary.below_min_severity
    for f in report.findings:
        if baseline is not None and baseline.accepts(f):
            baselined += 1
        elif severity_rank(f.severity) < floor:
            below += 1
        else:
            kept.append(f)
    return report.model_copy(update={"findings": kept, "summary": _summary(kept, baselined, below),
                                     "min_severity": min_severity})
