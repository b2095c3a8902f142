"""Terminal text of the runtime reports: the verdicts and next steps of the MCP text, the data as tables.

Tables go through :func:`server.cli_support.format_table` (server/tables.py): a cell is wrapped,
never cut, so ids, keys and error texts stay whole at any width.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from server.cli_support import format_table, use_colour
from server.tables import legend
from tools.runtime_cli import exits

if TYPE_CHECKING:
    from tools.outbox.model import HealthReport, QueryOutboxResult, TraceReport
    from tools.queues.bull import QueueReport
    from tools.streams.dlq import DeadLetterPage
    from tools.streams.inspect_models import StreamReport

HOP_MARKS = {
    "ok": "healthy",
    "broken": "the chain is broken or unhealthy here",
    "unknown": "not reached, or cannot be judged",
}
"""The state column of a trace's hops, with the legend printed under the table."""


def _table(headers: list[str], rows: list[list[Any]]) -> str:
    return format_table(headers, rows, colour=use_colour())


def _ms(value: int | None) -> str:
    if value is None:
        return "-"
    seconds = value / 1000
    if seconds < 120:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h"


def _s(value: float | None) -> str:
    return "-" if value is None else _ms(int(value * 1000))


def serious(findings: Iterable[Any]) -> bool:
    """Any finding of severity warning or error (info and ok are not problems)."""
    return any(getattr(f, "severity", "error") in ("warning", "error") for f in findings)


def hop_mark(healthy: bool | None) -> str:
    return "ok" if healthy else ("unknown" if healthy is None else "broken")


def trace_text(report: TraceReport) -> str:
    from tools.outbox.hop_ids import hop_ids_text

    v = report.verdict
    where = f" (service {report.service})" if report.service else ""
    lines = [f"{report.kind} {report.id}{where}: {v.code} ({v.severity}) — {v.sentence}", f"next: {v.next_step}"]
    if report.id_note:
        lines.insert(0, f"note: {report.id_note}")
    if report.hops:
        rows = [[hop_mark(h.healthy), h.name, h.ref, h.state or "-", h.detail + hop_ids_text(h, h.detail + h.ref)]
                for h in report.hops]
        lines += ["", _table(["state", "hop", "where", "observed", "detail"], rows), legend(HOP_MARKS)]
    for other in report.findings[1:]:
        lines.append(f"also: {other.code} ({other.severity}) — {other.sentence}")
        if other.next_step != v.next_step:
            lines.append(f"  next: {other.next_step}")
    lines += [f"unavailable: {p.service}: {p.error}" for p in report.unavailable]
    lines += [source.line() for source in report.redis_sources]
    return "\n".join(lines)


def trace_exit(report: TraceReport) -> int:
    if report.unavailable:
        return exits.UNAVAILABLE
    return exits.PROBLEM if report.verdict.severity in ("warning", "error") else exits.OK


def health_text(report: HealthReport) -> str:
    lines = ["outbox health: " + ("ok" if report.ok else "problems found")]
    rows: list[list[Any]] = []
    findings: list[list[Any]] = []
    for svc in report.services:
        if not svc.available:
            rows.append([svc.service, "-", f"UNAVAILABLE: {svc.error}", "-", "-", "-"])
            continue
        for t in svc.tables:
            counts = ", ".join(f"{k} {n}" for k, n in t.counts.items()) or ("missing" if not t.exists else "empty")
            failed = ", ".join(f"{k} {n}" for k, n in t.failed_by_type.items()) or "-"
            rows.append([svc.service, t.name, counts, _s(t.oldest_pending_age_s), _s(t.oldest_processing_age_s),
                         failed])
        seen: set[tuple[str, str]] = set()
        for v in [*svc.verdicts, *(v for t in svc.tables for v in t.verdicts)]:
            if (v.code, v.sentence) not in seen:
                seen.add((v.code, v.sentence))
                findings.append([svc.service, v.code, v.severity, v.sentence, v.next_step or "-"])
    lines += ["", _table(["service", "table", "rows by status", "oldest pending", "oldest processing",
                          "failed by type"], rows)]
    if findings:
        lines += ["", _table(["service", "verdict", "severity", "what", "next step"], findings)]
    return "\n".join(lines)


def stream_text(report: StreamReport) -> str:
    from tools.streams.anomalies import evidence_ids

    lines = [f"stream {report.stream}: {report.length} entries (first {report.first_id or '-'}, last "
             f"{report.last_id or '-'}, newest {_ms(report.last_entry_age_ms)} old), {len(report.groups)} group(s), "
             f"Redis {report.redis_version}"]
    if report.groups:
        rows = []
        for g in report.groups:
            lag = "?" if g.lag is None else f"{g.lag}{' (estimated)' if g.lag_source == 'estimated' else ''}"
            dead = ", ".join(c.name for c in g.consumer_list if c.dead) or "-"
            oldest = g.pending_summary.oldest
            rows.append([g.name, g.consumers, g.pending, lag, g.last_delivered_id,
                         f"{oldest.id} ({_ms(oldest.idle_ms)} idle)" if oldest else "-", dead])
        lines += ["", _table(["group", "consumers", "pending", "lag", "last delivered", "oldest pending",
                              "dead consumers"], rows)]
    if report.dlq is not None:
        lines.append(f"dead letters in {report.dlq.stream}: {report.dlq.length}")
    if report.anomalies:
        rows = [[a.severity, a.code, a.group or "-", a.message + _ids(evidence_ids(a.evidence), a.message),
                 a.next_step] for a in report.anomalies]
        lines += ["", _table(["severity", "anomaly", "group", "what", "next step"], rows)]
    else:
        lines.append("no anomaly")
    if report.redis_source is not None:
        lines.append(report.redis_source.line())
    return "\n".join(lines)


def _ids(ids: list[str], shown: str) -> str:
    extra = [i for i in ids if i not in shown]
    return f" (ids: {', '.join(extra)})" if extra else ""


def dlq_text(page: DeadLetterPage) -> str:
    where = page.stream or f"{len(page.dlq_streams)} dead-letter stream(s)"
    lines = [f"{len(page.entries)} dead letter(s) from {where} on this page ({page.examined} read)"]
    if not page.scan_complete:
        lines.append("the SCAN for dead-letter streams stopped at its iteration cap: some may be missing")
    rows = []
    for d in page.entries:
        original = "-"
        if d.original is not None:
            held = ", ".join(f"{p.group}/{p.consumer}" for p in d.original.pending_in)
            original = ("in stream" if d.original.in_stream else "gone") + (f", pending in {held}" if held else "")
        attempts = [b.retry.attempt for b in d.bookkeeping if b.retry.attempt is not None]
        rows.append([f"{d.dlq_stream} {d.dlq_id}", d.message_id or "-", d.event_type or "-", d.event_id or "-",
                     max(attempts) if attempts else "-", original, (d.error or "-") + (" [cut]" if d.error_truncated
                                                                                       else "")])
    if rows:
        lines += ["", _table(["dead letter", "message id", "type", "event id", "attempts", "original", "error"],
                             rows)]
    lines.append(f"more: --cursor {page.next_cursor}" if page.next_cursor else "no more")
    if page.entries:
        lines.append("next: export these (--json) before any replay; mesh-mcp trace event EVENT_ID follows one")
    if page.redis_source is not None:
        lines.append(page.redis_source.line())
    return "\n".join(lines)


def queue_text(report: QueueReport) -> str:
    counts = ", ".join(f"{k} {v}" for k, v in report.counts.items())
    lines = [f"queue {report.queue}{' (paused)' if report.paused else ''}: {counts}"]
    if report.oldest_waiting is not None:
        o = report.oldest_waiting
        where = f" in {report.oldest_waiting_in}" if report.oldest_waiting_in not in (None, "wait") else ""
        lines.append(f"oldest waiting{where}: {o.job_id} ({o.name}), {_ms(o.age_ms)} old")
    if report.recent_failures:
        rows = [[f.job_id, f.name or "-", f.attempts_made if f.attempts_made is not None else "-",
                 (f.failed_reason or "-") + (" [cut]" if f.failed_reason_truncated else "")]
                for f in report.recent_failures]
        lines += ["", "newest failures:", _table(["job id", "name", "attempts", "failed reason"], rows)]
    if report.job is not None:
        j = report.job
        lines += ["", f"job {j.job_id}: {j.state}, {j.attempts_made} attempt(s)"
                  + (f", failed: {j.failed_reason}" if j.failed_reason else "")]
    elif report.job_found is False:
        lines.append("the job asked for was not found in this queue")
    if report.anomalies:
        rows = [[a.severity, a.code, a.message, ", ".join(a.job_ids), a.next_step] for a in report.anomalies]
        lines += ["", _table(["severity", "anomaly", "what", "jobs", "next step"], rows)]
    lines += [f"note: {n}" for n in report.notes]
    if report.redis_source is not None:
        lines.append(report.redis_source.line())
    return "\n".join(lines)


def queue_exit(report: QueueReport) -> int:
    if serious(report.anomalies) or report.job_found is False:
        return exits.PROBLEM
    job = report.job
    return exits.PROBLEM if job is not None and job.state == "failed" else exits.OK


def rows_text(result: QueryOutboxResult) -> str:
    lines = [f"{len(result.rows)} row(s) of {result.table} from {', '.join(result.services) or 'no service'}"]
    rows = []
    for row in result.rows:
        ident = row.id if row.table != "job_audit" else f"job_id {row.job_id} (audit row {row.id})"
        rows.append([row.service, ident, row.status or "-", row.type or "-", _s(row.age_s), row.hint or "-"])
    if rows:
        lines += ["", _table(["service", "id", "status", "type", "age", "what it means"], rows)]
    for service, columns in result.missing_columns.items():
        lines.append(f"{service}: this table lacks documented columns {', '.join(columns)} (older schema)")
    lines += [f"unavailable: {p.service}: {p.error}" for p in result.unavailable]
    if result.next_cursor:
        lines.append(f"more: --cursor {result.next_cursor}")
    return "\n".join(lines)
