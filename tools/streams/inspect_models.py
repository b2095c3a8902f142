"""Result models of ``inspect_stream`` (structured content of the tool)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from server.redis_routing import RedisSource
from tools.streams.anomalies import Anomaly, evidence_ids

LagSource = Literal["reported", "derived", "counted", "estimated"]


class ConsumerInfo(BaseModel):
    name: str
    pending: int
    idle_ms: int = Field(description="ms since the consumer last read or claimed (XINFO CONSUMERS idle)")
    inactive_ms: int | None = Field(
        default=None, description="ms since its last successful read or claim (Redis 7.2+; None when not reported)"
    )
    dead: bool = Field(description="holds pending entries and idle_ms >= [limits] dead_consumer_idle_ms")


class PendingEntryInfo(BaseModel):
    id: str
    consumer: str
    idle_ms: int = Field(description="ms since the entry was last delivered")
    deliveries: int
    message_trimmed: bool = Field(description="the id is older than the stream's first entry: the message is gone")


class PendingSummary(BaseModel):
    count: int
    min_id: str | None
    max_id: str | None
    per_consumer: dict[str, int] = Field(default_factory=dict)
    oldest: PendingEntryInfo | None = Field(default=None, description="the pending entry with the smallest id")


class GroupInfo(BaseModel):
    name: str
    consumers: int
    pending: int
    last_delivered_id: str
    entries_read: int | None = Field(default=None, description="Redis 7.0+; None when not reported")
    lag: int | None = Field(description="entries added after last_delivered_id and not yet delivered to the group")
    lag_source: LagSource = Field(
        description="reported: Redis 7 XINFO GROUPS lag; derived: last_delivered_id is the last id (lag 0); "
        "when Redis does not report it: estimated from the ids' timestamps, or counted (exact, bounded XRANGE) "
        "when that estimate is at most [limits] stream_sample"
    )
    oldest_undelivered_id: str | None = None
    oldest_undelivered_age_ms: int | None = Field(default=None, description="how long that entry has waited")
    consumer_list: list[ConsumerInfo] = Field(default_factory=list)
    consumers_truncated: bool = Field(default=False, description="more consumers than [limits] max_count: not listed")
    pending_summary: PendingSummary


class DlqInfo(BaseModel):
    stream: str
    exists: bool
    length: int
    newest_id: str | None = None
    newest_age_ms: int | None = None


class Thresholds(BaseModel):
    dead_consumer_idle_ms: int
    claim_interval_ms: int
    lag_max_age_ms: int
    sample_size: int = Field(description="pending entries per group checked for stale locks and stuck entries")


class StreamReport(BaseModel):
    stream: str
    redis_version: str
    length: int
    first_id: str | None
    last_id: str | None
    last_generated_id: str
    first_entry_age_ms: int | None = None
    last_entry_age_ms: int | None = None
    entries_added: int | None = Field(default=None, description="Redis 7.0+; None when not reported")
    max_deleted_entry_id: str | None = Field(default=None, description="Redis 7.0+; None when not reported")
    groups: list[GroupInfo]
    groups_truncated: bool = Field(default=False, description="more groups than [limits] max_count: not listed")
    dlq: DlqInfo | None = Field(
        description="the dead-letter stream; None when the stream is itself one, or is BullMQ's own events stream"
    )
    anomalies: list[Anomaly]
    thresholds: Thresholds

    redis_source: RedisSource | None = Field(default=None, description="the Redis instance this was read from")

    def summary_text(self) -> str:
        lines = [
            f"{self.stream}: {self.length} entries (first {self.first_id or '-'}, last {self.last_id or '-'}), "
            f"{len(self.groups)} group(s), Redis {self.redis_version}"
        ]
        for g in self.groups:
            lag = "?" if g.lag is None else f"{g.lag}{'~' if g.lag_source == 'estimated' else ''}"
            dead = [c.name for c in g.consumer_list if c.dead]
            lines.append(
                f"  group {g.name}: {g.consumers} consumer(s), {g.pending} pending, lag {lag}, "
                f"last delivered {g.last_delivered_id}" + (f", dead: {', '.join(dead)}" if dead else "")
            )
        if self.dlq is not None:
            lines.append(f"  dead letters in {self.dlq.stream}: {self.dlq.length}")
        if self.anomalies:
            lines.append(f"{len(self.anomalies)} anomal{'y' if len(self.anomalies) == 1 else 'ies'}:")
            for a in self.anomalies:
                lines.append(f"  [{a.code}] {a.message}")
                ids = [i for i in evidence_ids(a.evidence) if i not in a.message]
                if ids:
                    lines.append(f"    ids: {', '.join(ids)}")
                lines.append(f"    next: {a.next_step}")
        else:
            lines.append("no anomaly")
        if self.redis_source is not None:
            lines.append(self.redis_source.line())
        return "\n".join(lines)
