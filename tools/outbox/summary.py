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
from tools.outbox.hop_ids import hop_ids, hop_ids_text  # noqa: F401 (hop_ids_text: re-exported)
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
    findings: list[Verdict] = Field(default_factory=list, description="first problems found besides the verdict "
                                    "(not repeated here), worst first")
    hops: list[HopBrief] = Field(description="the chain, hop by hop (first ones)")
    unavailable: list[ServiceProblem] = Field(default_factory=list)
    id_note: str | None = None
    redis_sources: list[RedisSource] = Field(default_factory=list)


def _leaves_out(hop: Hop) -> int:
    """1 when the full hop has data the brief drops (row, BullMQ state, entry, delivery, key)."""
    return int(any(x is not None for x in (hop.row, hop.bull, hop.entry, hop.delivery, hop.redis_key)))


def latest_outcomes_only(hops: list[Hop]) -> tuple[list[Hop], int]:
    """The hops with, per outcome type, only the latest outcome event's hops (a failed job writes one
    failure event per attempt, all on the same streams); and how many hops were left out."""
    groups: list[list[Hop]] = [[]]
    for hop in hops:
        if hop.name == "outcome_event":
            groups.append([])
        groups[-1].append(hop)
    latest: dict[str, int] = {}
    for n, group in enumerate(groups[1:], 1):
        latest[str(group[0].row.type if group[0].row is not None else group[0].ref)] = n
    kept = [*groups[0], *(h for n, g in enumerate(groups[1:], 1) if n in latest.values() for h in g)]
    return kept, len(hops) - len(kept)


def summarise_trace(report: TraceReport, items: int) -> TraceSummary:
    """The summary of a trace: verdict, findings, brief hops with their ids (per outcome type, the latest
    outcome event's), what was left out."""
    cut = Cutter(items)
    shown, earlier = latest_outcomes_only(report.hops)
    if earlier:
        cut.drop("earlier_outcome_hops", earlier)
    hops = cut.first("hops", shown, max(items, 10))
    cut.drop("hop_details", sum(_leaves_out(h) for h in hops))
    if report.mermaid:
        cut.drop("mermaid_chars", len(report.mermaid))
    return TraceSummary(
        kind=report.kind, id=report.id, service=report.service, searched_services=report.searched_services,
        verdict=report.verdict, findings=cut.first("findings", [f for f in report.findings if f != report.verdict]),
        hops=[HopBrief(name=h.name, ref=h.ref, found=h.found, state=h.state, healthy=h.healthy,
                       detail=cut.text("hop_detail_chars", h.detail) or "", ids=hop_ids(h)) for h in hops],
        unavailable=report.unavailable, id_note=report.id_note, redis_sources=report.redis_sources,
        related_skills=cut.related(getattr(report, "related_skills", None)),
        omitted=cut.omitted(),
    )
