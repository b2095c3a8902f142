"""The ``detail="summary"`` shape of trace_job and trace_event (:mod:`tools.detail`).

A hop keeps its name, reference, state, health and sentence, and the ids the next call takes
(``ids``: queue and job id, stream, group, entry id, consumer, dead-letter ids, lock key); raw
row columns, BullMQ data and stack traces, stream entry fields and the Mermaid text are left out
(counted in ``omitted``; ``detail="full"`` has them).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from server.redis_routing import RedisSource
from tools.detail import Cutter, SummaryBase
from tools.outbox.model import Hop, ServiceProblem, TraceReport, Verdict


class HopBrief(BaseModel):
    name: str
    ref: str
    found: bool
    state: str | None = None
    healthy: bool | None = None
    detail: str
    ids: dict[str, str] = Field(
        default_factory=dict, description="ids of this hop for the next call (queue, job_id, stream, group, "
        "entry_id, consumer, dlq_stream, dlq_entry_id, message_id, row_id, lock_key, key)")


class TraceSummary(SummaryBase):
    """trace_job / trace_event, detail="summary"."""

    kind: Literal["job", "event"]
    id: str
    service: str | None = None
    searched_services: list[str] = Field(default_factory=list)
    verdict: Verdict
    findings: list[Verdict] = Field(default_factory=list, description="first problems found, worst first")
    hops: list[HopBrief] = Field(description="the chain, hop by hop (first ones)")
    unavailable: list[ServiceProblem] = Field(default_factory=list)
    id_note: str | None = None
    redis_sources: list[RedisSource] = Field(default_factory=list)


def hop_ids(hop: Hop) -> dict[str, str]:
    """The identifiers a hop carries that another tool takes as arguments."""
    ids: dict[str, str] = {}

    def put(key: str, value: object) -> None:
        if value not in (None, "") and key not in ids:
            ids[key] = str(value)

    if hop.row is not None:
        put("service", hop.row.service)
        put("table", hop.row.table)
        put("row_id", hop.row.id)
        put("job_id", hop.row.job_id)
    if hop.bull is not None:
        put("queue", hop.bull.queue)
        put("job_id", hop.bull.job_id)
    if hop.entry is not None:
        put("stream", hop.entry.stream)
        put("entry_id", hop.entry.entry_id)
    if hop.delivery is not None:
        put("stream", hop.delivery.stream)
        put("group", hop.delivery.group)
        put("entry_id", hop.delivery.entry_id)
        if hop.delivery.pending is not None:
            put("consumer", hop.delivery.pending.consumer)
        if hop.delivery.lock_stale or hop.delivery.idempotency.exists:
            put("lock_key", hop.delivery.idempotency.key)
    letters = hop.dead_letters or (hop.delivery.dead_letters if hop.delivery is not None else [])
    if letters:
        put("dlq_stream", letters[0].dlq_stream)
        put("dlq_entry_id", letters[0].dlq_entry_id)
        put("message_id", letters[0].message_id)
    if hop.redis_key is not None:
        put("key", hop.redis_key.get("key"))
    return ids


def hop_ids_text(hop: Hop, shown: str) -> str:
    """`` (ids: key=value, ...)`` for the hop's ids not already in ``shown`` ('' when all are)."""
    extra = [f"{key}={value}" for key, value in hop_ids(hop).items()
             if key not in ("service", "table") and value not in shown]
    return f" (ids: {', '.join(extra)})" if extra else ""


def _leaves_out(hop: Hop) -> int:
    """1 when the full hop has data the brief drops (row, BullMQ state, entry, delivery, key)."""
    return int(any(x is not None for x in (hop.row, hop.bull, hop.entry, hop.delivery, hop.redis_key)))


def summarise_trace(report: TraceReport, items: int) -> TraceSummary:
    """The summary of a trace: verdict, findings, brief hops with their ids, what was left out."""
    cut = Cutter(items)
    hops = cut.first("hops", report.hops, max(items, 10))
    cut.drop("hop_details", sum(_leaves_out(h) for h in hops))
    if report.mermaid:
        cut.drop("mermaid_chars", len(report.mermaid))
    return TraceSummary(
        kind=report.kind, id=report.id, service=report.service, searched_services=report.searched_services,
        verdict=report.verdict, findings=cut.first("findings", report.findings),
        hops=[HopBrief(name=h.name, ref=h.ref, found=h.found, state=h.state, healthy=h.healthy,
                       detail=cut.text("hop_detail_chars", h.detail) or "", ids=hop_ids(h)) for h in hops],
        unavailable=report.unavailable, id_note=report.id_note, redis_sources=report.redis_sources,
        related_skills=cut.related(getattr(report, "related_skills", None)),
        omitted=cut.omitted(),
    )
