"""The text of a lint report: one block per finding (code, where, message, evidence, fix), then totals."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tools.lint.model import LintReport

MAX_EVIDENCE = 8


def report_text(report: LintReport) -> str:
    lines: list[str] = []
    for f in report.findings:
        mark = " (heuristic)" if f.heuristic else ""
        lines.append(f"{f.severity.upper()} {f.code}{mark} {f.file}:{f.line}")
        lines.append(f"  {f.message}")
        for e in f.evidence[:MAX_EVIDENCE]:
            lines.append(f"  at {e.file}:{e.line}  {e.note}")
        if len(f.evidence) > MAX_EVIDENCE:
            lines.append(f"  ... and {len(f.evidence) - MAX_EVIDENCE} more site(s) in the structured content")
        lines.append(f"  fix: {f.fix}")
        lines.append("")
    s = report.summary
    counts = ", ".join(f"{n} {sev}" for sev, n in s.by_severity.items() if n) or "no finding"
    tail = f"{s.total} finding(s) at or above {report.min_severity}: {counts}"
    if s.below_min_severity:
        tail += f"; {s.below_min_severity} below {report.min_severity} not shown (catalogue orphans are info)"
    if s.baselined:
        tail += f"; {s.baselined} accepted by the baseline"
    lines.append(tail)
    if report.page is not None and (cut := report.page.text("findings")):
        lines.append(cut)
    lines.extend(f"note: {n}" for n in report.notes)
    i = report.index
    lines.append(f"index: {i.files} files, {i.parse_errors} with parse errors, built {i.indexed_at}")
    return "\n".join(lines)
