"""The anomalies of one ``inspect_stream`` report, from the facts its Redis rounds gathered.

No Redis call here: :mod:`tools.streams.inspect` reads the stream and fills a
:class:`GroupProbe` per group (its :class:`~tools.streams.inspect_models.GroupInfo`, the
pending ids older than the first entry, the sample of idle pending entries, the retry queue
members, the idempotency locks found and their TTL, the Redis time the consumers' idle times
were measured at); :func:`report_anomalies` applies the rules of
:mod:`tools.streams.anomalies` to them: dead consumers (idle_ambiguous when Redis has no
``inactive`` field and nothing arrived since the consumer's last read), stuck pending entries
of live consumers, pending entries trimmed from the stream (with the trim evidence), a growing
lag, stale idempotency locks, a non-empty dead-letter stream, and a stream with a dead-letter
stream but no group.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from server.config import Settings
from tools.streams import anomalies as rules
from tools.streams.anomalies import Anomaly
from tools.streams.ids import try_parse
from tools.streams.inspect_models import GroupInfo, StreamReport
from tools.streams.trim_evidence import trim_evidence


@dataclass
class GroupProbe:
    """What rounds 3 and 4 of ``inspect_stream`` learnt about one group (filled in by :mod:`tools.streams.inspect`)."""

    info: GroupInfo
    trimmed_ids: list[str] = field(default_factory=list)
    idle_sample: list[dict[str, Any]] = field(default_factory=list)
    retry_members: list[str] = field(default_factory=list)
    lock_ttls: dict[str, int] = field(default_factory=dict)
    count_from: str | None = None
    """Oldest undelivered id when the lag must still be counted (round 4)."""
    consumers_read_at_ms: int = 0
    """Redis time of round 3, when XINFO CONSUMERS measured the consumers' idle times (on a cluster: read
    just after them, an upper bound)."""



def report_anomalies(
    settings: Settings, report: StreamReport, probes: list[GroupProbe], sinfo: dict[str, Any] | None = None
) -> list[Anomaly]:
    """The anomalies of ``report`` (rules of :mod:`tools.streams.anomalies`), from the facts in ``probes``
    and, for the trim evidence of trimmed pending entries, the ``XINFO STREAM`` reply ``sinfo``."""
    limits, conv = settings.limits, settings.conventions
    stream = report.stream
    found: list[Anomaly | None] = []
    if not report.groups and report.dlq is not None:
        found.append(rules.no_group(stream, report.length))
    last_entry = try_parse(report.last_id)
    for probe in probes:
        g = probe.info
        dead_names = set()
        for c in g.consumer_list:
            # before Redis 7.2 (no `inactive`), an empty read or claim leaves idle growing: on a stream where
            # nothing arrived since the consumer's last read, a live consumer looks as idle as a dead one
            last_seen_ms = probe.consumers_read_at_ms - c.idle_ms
            quiet = last_entry is None or last_entry.ms <= last_seen_ms + 1  # idle is rounded to the ms
            hit = rules.dead_consumer(stream, g.name, c.name, c.pending, c.idle_ms, limits.dead_consumer_idle_ms,
                                      idle_ambiguous=c.inactive_ms is None and quiet)
            if hit is not None:
                dead_names.add(c.name)
            found.append(hit)
        found.extend(_stuck(stream, g, probe, dead_names, limits.dead_consumer_idle_ms, limits.stream_sample))
        trimmed = probe.trimmed_ids[: limits.stream_sample]
        proof = None
        if trimmed and sinfo is not None:
            oldest = min((i for i in (try_parse(t) for t in trimmed) if i is not None), default=None)
            proof = trim_evidence(sinfo, conv.stream_maxlen, oldest)
        found.append(rules.trimmed_pending(stream, g.name, len(trimmed), len(probe.trimmed_ids) > len(trimmed),
                                           report.first_id, trimmed[:10], proof))
        found.append(rules.lag_growing(stream, g.name, g.lag, g.lag_source, g.oldest_undelivered_id,
                                       g.oldest_undelivered_age_ms, limits.lag_max_age_ms, g.consumers))
        found.append(rules.stale_idempotency_lock(stream, g.name, _stale_locks(probe, conv.claim_interval_ms),
                                                  len(probe.idle_sample) + len(probe.retry_members)))
    if report.dlq is not None:
        found.append(rules.dlq_not_empty(stream, report.dlq.stream, report.dlq.length, report.dlq.newest_id,
                                         report.dlq.newest_age_ms))
    return [a for a in found if a is not None]


def _stuck(stream: str, g: GroupInfo, probe: GroupProbe, dead: set[str], threshold: int,
           sampled: int) -> list[Anomaly]:
    """stuck_pending per live consumer (listed, not dead) holding sampled entries idle beyond ``threshold``."""
    if g.consumers_truncated:
        return []
    live = {c.name for c in g.consumer_list} - dead
    by_consumer: dict[str, list[dict[str, Any]]] = {}
    for row in probe.idle_sample:
        if row["idle_ms"] >= threshold and row["consumer"] in live:
            by_consumer.setdefault(row["consumer"], []).append(row)
    return [
        rules.stuck_pending(stream, g.name, consumer, len(rows), rows[0]["message_id"],
                           max(r["idle_ms"] for r in rows), threshold, min(sampled, len(probe.idle_sample)))
        for consumer, rows in sorted(by_consumer.items())
    ]


def _stale_locks(probe: GroupProbe, claim_interval_ms: int) -> list[dict[str, Any]]:
    """Sampled messages holding an idempotency lock while pending beyond the claim interval, or in the retry
    queue."""
    out = []
    pending = {row["message_id"]: row for row in probe.idle_sample}
    retrying = set(probe.retry_members)
    for mid, ttl in sorted(probe.lock_ttls.items()):
        row = pending.get(mid)
        if row is not None and row["idle_ms"] >= claim_interval_ms:
            out.append({"message_id": mid, "reason": "pending", "consumer": row["consumer"],
                        "idle_ms": row["idle_ms"], "lock_ttl_ms": ttl if ttl >= 0 else None})
        elif mid in retrying:
            out.append({"message_id": mid, "reason": "retry_queue", "lock_ttl_ms": ttl if ttl >= 0 else None})
    return out
