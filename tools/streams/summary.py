"""The ``detail="summary"`` shape of inspect_stream (:mod:`tools.detail`).

Groups keep their counters, dead consumers and oldest pending id; anomalies keep code, severity,
group, consumer, sentence, next step and the ids of their evidence (``ids``); the per-consumer
lists, pending summaries and the figures of each rule are left out (``detail="full"``).
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from server.redis_routing import RedisSource
from tools.detail import Cutter, SummaryBase
from tools.streams.anomalies import evidence_ids
from tools.streams.inspect_models import DlqInfo, StreamReport


class GroupBrief(BaseModel):
    name: str
    consumers: int
    pending: int
    lag: int | None = None
    last_delivered_id: str
    dead_consumers: list[str] = Field(default_factory=list)
    oldest_pending_id: str | None = None


class AnomalyBrief(BaseModel):
    code: str
    severity: str
    group: str | None = None
    consumer: str | None = None
    message: str
    next_step: str
    ids: list[str] = Field(default_factory=list, description="entry, message and stream ids of the evidence")


class StreamSummary(SummaryBase):
    """inspect_stream, detail="summary"."""

    stream: str
    length: int
    first_id: str | None
    last_id: str | None
    groups: list[GroupBrief]
    dlq: DlqInfo | None = None
    anomalies: list[AnomalyBrief]
    redis_source: RedisSource | None = None


def summarise_stream(report: StreamReport, items: int) -> StreamSummary:
    cut = Cutter(items)
    groups = []
    for g in cut.first("groups", report.groups):
        oldest = g.pending_summary.oldest
        groups.append(GroupBrief(
            name=g.name, consumers=g.consumers, pending=g.pending, lag=g.lag, last_delivered_id=g.last_delivered_id,
            dead_consumers=cut.first("dead_consumers", [c.name for c in g.consumer_list if c.dead]),
            oldest_pending_id=oldest.id if oldest else None))
    anomalies = [
        AnomalyBrief(code=a.code, severity=a.severity, group=a.group, consumer=a.consumer, message=a.message,
                     next_step=a.next_step, ids=cut.first("anomaly_ids", evidence_ids(a.evidence)))
        for a in cut.first("anomalies", report.anomalies)
    ]
    cut.drop("group_details", len(groups))  # consumer lists, pending summaries, entries read
    cut.drop("anomaly_evidence", sum(bool(a.evidence) for a in report.anomalies[: len(anomalies)]))
    return StreamSummary(
        stream=report.stream, length=report.length, first_id=report.first_id, last_id=report.last_id,
        groups=groups, dlq=report.dlq, anomalies=anomalies, redis_source=report.redis_source,
        related_skills=cut.related(getattr(report, "related_skills", None)), omitted=cut.omitted(),
    )
