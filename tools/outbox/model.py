"""Result models of the runtime diagnosis tools (structured content of the MCP results)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from server.redis_routing import RedisSource
from tools.outbox.bull_state import BullJobState
from tools.outbox.delivery import GroupDelivery, MessageDeadLetter
from tools.skills.model import RelatedSkill
from tools.streams.trim_evidence import TrimEvidence

TableKind = Literal["jobs_outbox", "event_queue", "job_audit"]

VerdictCode = Literal[
    "ok",
    "pending_in_outbox",
    "stuck_processing",
    "pushed_not_consumed",
    "handler_failed",
    "success_not_cleaned",
    "audit_not_closed",
    "event_pending",
    "in_pel",
    "dead_consumer",
    "in_dlq",
    "trimmed",
    "idempotency_lock_stale",
    "purged",
    "not_found",
    "stalled",
    "scheduled",
    "running",
    "entry_not_found",
    "inconclusive",
]

HealthCode = Literal[
    "ok",
    "pending_in_outbox",
    "event_pending",
    "stuck_processing",
    "handler_failed",
    "push_failed",
    "table_missing",
    "slow",
    "unavailable",
]

Severity = Literal["ok", "info", "warning", "error"]


class ServiceProblem(BaseModel):
    """A service that could not answer; the other services' results are still returned."""

    service: str
    error: str


class OutboxRow(BaseModel):
    """One row of jobs_outbox, event_queue or job_audit."""

    service: str
    table: TableKind
    id: str = Field(description="the row's own id (on job_audit: the audit row id, not the job id)")
    job_id: str | None = Field(
        default=None, description="the id to pass to trace_job: jobs_outbox id, or job_audit.job_id"
    )
    status: str | None = None
    type: str | None = Field(default=None, description="type (job_type for job_audit)")
    created_at: str | None = None
    updated_at: str | None = None
    age_s: float | None = Field(default=None, description="seconds since created_at")
    updated_age_s: float | None = Field(default=None, description="seconds since updated_at (last status change)")
    since_s: float | None = Field(
        default=None, description="seconds in its current state, counted from since_column")
    since_column: str | None = Field(
        default=None, description="the column since_s comes from: updated_at (jobs_outbox, event_queue: the runner "
                                  "stamps it), job_audit started_at (the worker never writes its updated_at), else "
                                  "created_at")
    hint: str | None = Field(default=None, description="what this state means, from the trace runbook's table")
    columns: dict[str, Any] = Field(
        default_factory=dict, description="every column the table has, by its real name; JSON parsed unless cut"
    )
    truncated: bool = Field(default=False, description="a value was cut at [limits] payload_max_bytes")
    truncated_columns: list[str] = Field(default_factory=list)


class QueryOutboxResult(BaseModel):
    services: list[str] = Field(description="services queried")
    table: TableKind
    filters: dict[str, Any]
    rows: list[OutboxRow]
    next_cursor: str | None = Field(default=None, description="pass as cursor= for the next (older) page")
    unavailable: list[ServiceProblem] = Field(default_factory=list)
    missing_columns: dict[str, list[str]] = Field(
        default_factory=dict, description="per service: documented columns this table lacks (older schema)"
    )

    def summary_text(self) -> str:
        lines = [
            f"{len(self.rows)} row(s) of {self.table} from {', '.join(self.services) or 'no service'}"
            + (" (more: pass next_cursor)" if self.next_cursor else "")
        ]
        for row in self.rows[:20]:
            age = f"{row.age_s:.0f}s" if row.age_s is not None else "?"
            ident = row.id
            if row.table == "job_audit":
                ident = f"job_id={row.job_id} (trace_job id; audit row {row.id})"
            lines.append(f"- [{row.service}] {ident} {row.status} {row.type} age {age}: {row.hint or ''}".rstrip())
        if len(self.rows) > 20:
            lines.append(f"... {len(self.rows) - 20} more in the structured result")
        for problem in self.unavailable:
            lines.append(f"! {problem.service}: {problem.error}")
        return "\n".join(lines)


class HealthVerdict(BaseModel):
    code: HealthCode
    severity: Severity
    sentence: str
    next_step: str | None = None


class TableHealth(BaseModel):
    table: TableKind
    name: str = Field(description="real table name")
    exists: bool
    counts: dict[str, int] = Field(default_factory=dict, description="rows per status")
    total: int = 0
    oldest_pending_age_s: float | None = None
    oldest_processing_age_s: float | None = None
    processing_age_column: str | None = Field(
        default=None, description="the column oldest_processing_age_s is counted from (job_audit: started_at)")
    failed_by_type: dict[str, int] = Field(default_factory=dict)
    verdicts: list[HealthVerdict] = Field(default_factory=list)


class ServiceHealth(BaseModel):
    service: str
    available: bool
    error: str | None = None
    tables: list[TableHealth] = Field(default_factory=list)
    verdicts: list[HealthVerdict] = Field(default_factory=list, description="problems of this service, worst first")


class HealthReport(BaseModel):
    services: list[ServiceHealth]
    ok: bool = Field(description="no verdict of severity warning or error anywhere")
    thresholds: dict[str, float]

    def summary_text(self) -> str:
        lines = ["outbox health: " + ("ok" if self.ok else "problems found")]
        for svc in self.services:
            if not svc.available:
                lines.append(f"- {svc.service}: UNAVAILABLE: {svc.error}")
                continue
            parts = []
            for t in svc.tables:
                if any(v.code == "slow" for v in t.verdicts):
                    parts.append(f"{t.table}: SLOW (statement timeout)")
                    continue
                if not t.exists:
                    parts.append(f"{t.table}: missing")
                    continue
                counts = ", ".join(f"{k} {v}" for k, v in t.counts.items()) or "empty"
                parts.append(f"{t.table}: {counts}")
            lines.append(f"- {svc.service}: " + "; ".join(parts))
            seen = set()
            for v in [*svc.verdicts, *(v for t in svc.tables for v in t.verdicts)]:
                if (v.code, v.sentence) in seen:
                    continue
                seen.add((v.code, v.sentence))
                lines.append(f"  * {v.code} ({v.severity}): {v.sentence}")
                if v.next_step:
                    lines.append(f"    next: {v.next_step}")
        return "\n".join(lines)


class Verdict(BaseModel):
    code: VerdictCode
    severity: Severity
    sentence: str = Field(description="what was observed and which link is broken")
    next_step: str
    hop: str | None = Field(default=None, description="name of the hop where the chain breaks")


class StreamEntryRef(BaseModel):
    stream: str
    entry_id: str | None = None
    searched_from_ms: int | None = None
    searched_to_ms: int | None = None
    scanned: int = 0
    first_entry_id: str | None = Field(default=None, description="oldest entry still in the stream")
    fields: dict[str, str] = Field(default_factory=dict, description="entry fields, cut at the byte cap")
    truncated: bool = False
    windows: list[list[int]] = Field(
        default_factory=list, description="every [from_ms, to_ms] band searched, widened step by step on a miss"
    )
    read_whole: bool = Field(default=False, description="the stream was short enough to be read whole")
    whole_complete: bool = Field(default=False, description="the whole read reached the end (within the budget)")
    length: int | None = Field(default=None, description="XLEN when the entry was not in the first window")
    clock_offset_ms: int | None = Field(
        default=None, description="Redis TIME minus the database's now(): the window was shifted by it"
    )
    trim: TrimEvidence | None = Field(default=None, description="what XINFO STREAM proves when the entry is missing")


class Hop(BaseModel):
    """One link of the chain with what was observed there."""

    name: str = Field(description="jobs_outbox, bullmq_job, completion_guard, job_audit, outcome_event, "
                      "event_queue, stream_entry, group")
    ref: str = Field(description="table and id, Redis key, or stream and group")
    found: bool
    state: str | None = Field(default=None, description="observed state (row status, BullMQ state, delivery)")
    healthy: bool | None = Field(default=None, description="None when the hop was not reached or cannot be judged")
    detail: str
    row: OutboxRow | None = None
    bull: BullJobState | None = None
    entry: StreamEntryRef | None = None
    delivery: GroupDelivery | None = None
    dead_letters: list[MessageDeadLetter] = Field(default_factory=list)
    redis_key: dict[str, Any] | None = Field(
        default=None, description="key, exists, value (cut at the byte cap), truncated, ttl_s for key hops"
    )


class TraceReport(BaseModel):
    kind: Literal["job", "event"]
    id: str
    service: str | None = Field(default=None, description="service where the row was found (or was searched)")
    searched_services: list[str] = Field(default_factory=list)
    verdict: Verdict
    findings: list[Verdict] = Field(default_factory=list, description="every problem found, worst first")
    hops: list[Hop]
    unavailable: list[ServiceProblem] = Field(default_factory=list)
    id_note: str | None = Field(default=None, description="the id given was not the item's own id: what was traced")
    clock_offsets_ms: dict[str, int] = Field(
        default_factory=dict,
        description="per service: Redis TIME minus the database's now(), measured during this call",
    )
    mermaid: str | None = Field(
        default=None, description="the hops walked as a Mermaid flowchart, the verdict's hop marked broken"
    )
    redis_sources: list[RedisSource] = Field(default_factory=list, description="the Redis instances read")
    related_skills: list[RelatedSkill] = Field(
        default_factory=list, description="runbooks (workspace and bundled) about what was traced: URI and why"
    )
    related_skills_more: int = Field(default=0, description="related skills found beyond related_skills (capped)")
    related_skills_note: str | None = Field(
        default=None, description="what the links could not look at (the static index not ready, ...)"
    )

    def summary_text(self) -> str:
        v = self.verdict
        lines = [f"{self.kind} {self.id}: {v.code} — {v.sentence}", f"next: {v.next_step}"]
        if self.id_note:
            lines.insert(0, f"note: {self.id_note}")
        from tools.outbox.hop_ids import hop_ids_text

        for hop in self.hops:
            mark = "ok" if hop.healthy else ("unknown" if hop.healthy is None else "broken")  # words, not [XX]/[??]
            line = f"  [{mark}] {hop.name} {hop.ref}: {hop.state or '-'} — {hop.detail}"
            lines.append(line + hop_ids_text(hop, line))
        for other in self.findings[1:]:
            lines.append(f"also: {other.code} — {other.sentence}")
            if other.next_step != v.next_step:
                lines.append(f"  next: {other.next_step}")
        for problem in self.unavailable:
            lines.append(f"! {problem.service}: {problem.error}")
        lines.extend(source.line() for source in self.redis_sources)
        return "\n".join(lines)
