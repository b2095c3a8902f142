"""``mesh-mcp verify TARGET`` and ``mesh-mcp verify --all``: the checklist for humans and CI.

Exit status: 0 when no check fails (``unknown`` does not fail a run), 1 when a check
fails, 2 on a usage or configuration error. ``--json`` prints the report model.
"""

from __future__ import annotations

import argparse

from server.cli_support import fail, format_table, print_json, print_text, use_colour
from tools.mesh_index.commands import ProgressBar, make_service
from tools.verify.model import EVENT_CHECKS, JOB_CHECKS, FlowReport, VerifyAllReport
from tools.verify.service import verify_all, verify_flow

SHORT_LABELS: dict[str, str] = {
    "declared": "decl",
    "merged": "merged",
    "in_registry": "registry",
    "queue_declared": "queue",
    "has_producer": "producer",
    "producer_uses_outbox": "outbox",
    "has_handler": "handler",
    "handler_routed": "routed",
    "queue_matches_target": "q-match",
    "returns_original_payload": "returns",
    "reads_envelope": "envelope",
    "typed_errors": "errors",
    "provided_in_module": "provided",
    "producer_in_transaction": "in_tx",
    "stream_has_consumer": "consumer",
    "consumer_accepts_type": "accepts",
}
CELL = {"pass": "ok", "fail": "FAIL", "unknown": "?"}


def render_flow(report: FlowReport) -> str:
    """The checks of one flow as a table, then the fix of each check that did not pass."""
    t = report.target
    where = f" (declared at {t.defined_at.file}:{t.defined_at.line})" if t.defined_at else ""
    rows = []
    for check in report.checks:
        ev = check.evidence[0] if check.evidence else None
        rows.append([check.id, CELL[check.status], check.detail, f"{ev.file}:{ev.line}" if ev else ""])
    s = report.summary
    lines = [
        f"{t.kind} {t.name} = '{t.value}'{where}",
        "",
        format_table(["check", "status", "detail", "where"], rows, max_width=90, colour=use_colour()),
        "",
        f"{s.verdict}: {s.passed} pass, {s.failed} fail, {s.unknown} unknown of {s.total}",
    ]
    for check in (c for c in report.checks if c.status != "pass"):
        lines.append("")
        lines.append(f"{CELL[check.status]} {check.id}: {check.detail}")
        lines.extend(f"  at {ev.file}:{ev.line}  {ev.note}" for ev in check.evidence[:8])
        if len(check.evidence) > 8:
            lines.append(f"  ... and {len(check.evidence) - 8} more (--json has them all)")
        if check.hint:
            lines.append(f"  fix: {check.hint}")
    return "\n".join(lines)


def render_all(report: VerifyAllReport) -> str:
    """One table per kind: a row per type, a column per check; then a legend and the totals."""
    out: list[str] = []
    for kind, ids in (("job", JOB_CHECKS), ("event", EVENT_CHECKS)):
        flows = [f for f in report.flows if f.target.kind == kind]
        if not flows:
            continue
        rows = []
        for flow in flows:
            status = {c.id: c.status for c in flow.checks}
            rows.append([flow.target.name, *(CELL.get(status.get(i, ""), "-") for i in ids)])
        out.append(f"{kind.upper()}S ({len(flows)})")
        out.append(format_table([f"{kind} type", *(SHORT_LABELS[i] for i in ids)], rows, max_width=70,
                                colour=use_colour()))
        out.append("columns: " + ", ".join(f"{SHORT_LABELS[i]}={i}" for i in ids))
        out.append("")
    total = len(report.flows)
    out.append(
        f"{total} flow(s): {report.failed_flows} with a failing check, {report.unknown_flows} incomplete (?), "
        f"{total - report.failed_flows - report.unknown_flows} ok. "
        "Run `mesh-mcp verify TYPE` for the evidence and the fix of each check."
    )
    return "\n".join(out)


def cmd_verify(args: argparse.Namespace) -> int:
    if bool(args.target) == bool(args.all):
        return fail("pass a job or event type as TARGET, or --all (not both)")
    index = make_service(args)
    try:
        index.refresh(ProgressBar())
        if args.all:
            report = verify_all(index)
            if args.json:
                print_json(report)
            else:
                print_text(render_all(report))
            return 1 if report.failed_flows else 0
        flow = verify_flow(index, args.target)
        if args.json:
            print_json(flow)
        else:
            print_text(render_flow(flow))
        return 1 if flow.summary.failed else 0
    finally:
        index.close()
