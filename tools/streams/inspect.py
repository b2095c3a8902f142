"""``inspect_stream``: one stream, its groups, consumers, pending entries and anomalies.

Five pipelined round trips at most, read commands only, each bounded:

1. ``TYPE`` of the stream and of its dead-letter stream, ``INFO server``, ``TIME``
   (ages are computed on the Redis clock, not ours);
2. ``XINFO STREAM`` (never ``FULL``), ``XINFO GROUPS``, ``XLEN`` and the newest entry of
   the dead-letter stream;
3. ``TIME`` again (when the consumers' idle times are measured: in the same pipeline on one
   server, right after it on a cluster, whose pipelines refuse ``TIME``), then per group (at
   most ``[limits] max_count`` groups): ``XINFO CONSUMERS`` (skipped above
   ``max_count`` consumers), the ``XPENDING`` summary, the oldest pending entry, and, with
   ``S = [limits] stream_sample``: the pending ids older than the first entry (at most
   ``S + 1``: a count above ``S`` is a lower bound), the oldest undelivered entry (``XRANGE``
   from after last-delivered-id, one entry), a sample of at most ``S`` entries idle beyond
   the thresholds (``XPENDING ... IDLE``) and the first ``S`` members of the group's retry
   queue;
4. one ``MGET`` per group of the idempotency locks of the sampled messages and, where
   Redis does not report the lag (6.2, or 7.x after deletions) and its estimate from the
   ids' timestamps is at most ``S``, an ``XRANGE`` of at most ``S + 1`` entries that counts
   it exactly;
5. only when locks were found: their ``PTTL``.

Anomaly rules live in :mod:`tools.streams.anomalies`; they are applied to the facts gathered here
by :mod:`tools.streams.inspect_anomalies`.
"""

from __future__ import annotations

from typing import Any

from server.config import Settings
from server.connections import Connections
from server.redis_clients import is_cluster
from server.redis_routing import redis_source
from tools.streams.ids import StreamId, try_parse
from tools.streams.inspect_anomalies import GroupProbe, report_anomalies
from tools.streams.inspect_models import (
    ConsumerInfo,
    DlqInfo,
    GroupInfo,
    LagSource,
    PendingEntryInfo,
    PendingSummary,
    StreamReport,
    Thresholds,
)
from tools.streams.keys import check_key_name, dlq_key, idempotency_key, is_bull_events, is_dlq, retry_queue_key
from tools.streams.node_reads import queue_get_each, server_facts, server_time
from tools.streams.server_features import RedisServer, require_stream, server_from_info
from tools.streams.values import as_int, redis_time_ms, reply_or_raise, text


def _age(now_ms: int, entry_id: str | None) -> int | None:
    parsed = try_parse(entry_id)
    return None if parsed is None else max(0, now_ms - parsed.ms)


async def inspect_stream(connections: Connections, settings: Settings, stream: str) -> StreamReport:
    """The state of ``stream`` with its anomalies; raises NotFound when it does not exist."""
    check_key_name(stream, "stream")
    conv, limits = settings.conventions, settings.limits
    cap = limits.max_count
    dlq = None if is_dlq(conv, stream) or is_bull_events(conv, stream) else dlq_key(conv, stream)
    instance = connections.redis_instance_for_stream(stream)
    redis = connections.redis_reader(instance)
    async with connections.redis_errors(instance):
        pipe = redis.pipeline(transaction=False)
        pipe.type(stream)
        pipe.type(dlq or stream)
        stream_type, dlq_type = await pipe.execute()
        require_stream(stream, stream_type)
        info, now_reply = await server_facts(redis, stream)
        server = server_from_info(info)
        now = redis_time_ms(now_reply)

        dlq_is_stream = dlq is not None and text(dlq_type) == "stream"
        pipe = redis.pipeline(transaction=False)
        pipe.xinfo_stream(stream)
        pipe.xinfo_groups(stream)
        if dlq_is_stream:
            pipe.xlen(dlq)
            pipe.xrevrange(dlq, "+", "-", count=1)
        replies = await pipe.execute()
        sinfo, raw_groups = replies[0], replies[1]
        dlq_info = None
        if dlq is not None:
            dlq_len = int(replies[2]) if dlq_is_stream else 0
            newest = text(replies[3][0][0]) if dlq_is_stream and replies[3] else None
            dlq_info = DlqInfo(stream=dlq, exists=dlq_is_stream, length=dlq_len, newest_id=newest,
                               newest_age_ms=_age(now, newest))

        first = sinfo.get("first-entry")
        last = sinfo.get("last-entry")
        first_id = text(first[0]) if first else None
        last_id = text(last[0]) if last else None
        length = int(sinfo.get("length", 0))
        groups_truncated = len(raw_groups) > cap
        probes = await _probe_groups(redis, settings, server, stream, raw_groups[:cap], sinfo, now)
        await _round_four(redis, settings, stream, probes, sinfo)

    report = StreamReport(
        redis_source=redis_source(settings, instance),
        stream=stream,
        redis_version=server.version,
        length=length,
        first_id=first_id,
        last_id=last_id,
        last_generated_id=text(sinfo.get("last-generated-id")) or "0-0",
        first_entry_age_ms=_age(now, first_id),
        last_entry_age_ms=_age(now, last_id),
        entries_added=as_int(sinfo.get("entries-added")),
        max_deleted_entry_id=text(sinfo.get("max-deleted-entry-id")),
        groups=[p.info for p in probes],
        groups_truncated=groups_truncated,
        dlq=dlq_info,
        anomalies=[],
        thresholds=Thresholds(
            dead_consumer_idle_ms=limits.dead_consumer_idle_ms,
            claim_interval_ms=conv.claim_interval_ms,
            lag_max_age_ms=limits.lag_max_age_ms,
            sample_size=limits.stream_sample,
        ),
    )
    report.anomalies = report_anomalies(settings, report, probes, sinfo)
    return report


def _lag_plan(ginfo: dict[str, Any], last_generated: StreamId | None) -> tuple[int | None, LagSource, bool]:
    """(lag, source, whether to read the oldest undelivered entry) before round 3."""
    reported = as_int(ginfo.get("lag"))
    if reported is not None:
        return reported, "reported", reported > 0
    delivered = try_parse(ginfo.get("last-delivered-id")) or StreamId(0, 0)
    if last_generated is None or delivered >= last_generated:
        return 0, "derived", False
    return None, "counted", True


async def _probe_groups(
    redis: Any,
    settings: Settings,
    server: RedisServer,
    stream: str,
    raw_groups: list[dict[str, Any]],
    sinfo: dict[str, Any],
    now: int,
) -> list[GroupProbe]:
    limits, conv = settings.limits, settings.conventions
    cap = limits.max_count
    sample = limits.stream_sample
    first = sinfo.get("first-entry")
    first_id = try_parse(first[0]) if first else None
    last = sinfo.get("last-entry")
    last_id = try_parse(last[0]) if last else None
    length = int(sinfo.get("length", 0))
    last_generated = try_parse(sinfo.get("last-generated-id"))
    idle_floor = min(conv.claim_interval_ms, limits.dead_consumer_idle_ms)

    # idle times below are measured now, not at round 1's TIME: in the same pipeline on one server (exact),
    # right after it on a cluster (a cluster pipeline refuses TIME). After, not before: the instant a
    # consumer was last seen (this TIME minus its idle) is then never earlier than the true one, so a load
    # delay between the two round trips can only make a quiet stream look quiet (idle_ambiguous, the
    # cautious answer), never make a dead consumer's verdict look surer than the evidence.
    clustered = is_cluster(redis)
    pipe = redis.pipeline(transaction=False)
    if not clustered:
        pipe.time()
    plans = []
    for ginfo in raw_groups:
        name = text(ginfo["name"]) or ""
        consumers = int(ginfo.get("consumers", 0))
        list_consumers = consumers <= cap
        if list_consumers:
            pipe.xinfo_consumers(stream, name)
        pipe.xpending(stream, name)
        pipe.xpending_range(stream, name, "-", "+", 1)
        before_first = first_id.predecessor() if first_id is not None else None
        if first_id is None:
            pipe.xpending_range(stream, name, "-", "+", sample + 1)
        elif before_first is not None:
            pipe.xpending_range(stream, name, "-", str(before_first), sample + 1)
        lag, source, read_oldest = _lag_plan(ginfo, last_generated)
        delivered = try_parse(ginfo.get("last-delivered-id")) or StreamId(0, 0)
        if read_oldest:
            pipe.xrange(stream, str(delivered.successor()), "+", count=1)
        if server.has_pending_idle_filter:
            pipe.xpending_range(stream, name, "-", "+", sample, idle=idle_floor)
        pipe.zrange(retry_queue_key(conv, name), 0, sample - 1)
        plans.append((ginfo, name, consumers, list_consumers, first_id is None or before_first is not None,
                      lag, source, read_oldest))
    replies = iter(await pipe.execute(raise_on_error=False))
    read_at = redis_time_ms(await server_time(redis, stream) if clustered else reply_or_raise(next(replies)))

    probes = []
    for ginfo, name, consumers, list_consumers, probe_trimmed, lag, source, read_oldest in plans:
        consumer_rows = reply_or_raise(next(replies)) if list_consumers else []
        summary = reply_or_raise(next(replies))
        oldest_rows = reply_or_raise(next(replies))
        trimmed = [text(r["message_id"]) or "" for r in reply_or_raise(next(replies))] if probe_trimmed else []
        undelivered = reply_or_raise(next(replies)) if read_oldest else []
        idle_rows = reply_or_raise(next(replies)) if server.has_pending_idle_filter else []
        retry_reply = next(replies)
        retry_members = [] if isinstance(retry_reply, Exception) else [text(m) or "" for m in retry_reply]

        oldest_undelivered = text(undelivered[0][0]) if undelivered else None
        needs_count = False
        if source == "counted":
            if oldest_undelivered is None:
                lag = 0
            else:
                # Redis did not report the lag: estimate it from the ids' timestamps, count it when small
                lag = _estimate_lag(length, first_id, last_id, try_parse(oldest_undelivered), 1)
                needs_count = lag <= sample
                source = "counted" if needs_count else "estimated"
        trimmed_set = set(trimmed)
        oldest = None
        if oldest_rows:
            row = oldest_rows[0]
            oid = text(row["message_id"]) or ""
            oldest = PendingEntryInfo(
                id=oid, consumer=text(row["consumer"]) or "", idle_ms=int(row["time_since_delivered"]),
                deliveries=int(row["times_delivered"]), message_trimmed=oid in trimmed_set,
            )
        info = GroupInfo(
            name=name,
            consumers=consumers,
            pending=int(ginfo.get("pending", 0)),
            last_delivered_id=text(ginfo.get("last-delivered-id")) or "0-0",
            entries_read=as_int(ginfo.get("entries-read")),
            lag=lag,
            lag_source=source,
            oldest_undelivered_id=oldest_undelivered,
            oldest_undelivered_age_ms=_age(now, oldest_undelivered),
            consumer_list=[_consumer(c, limits.dead_consumer_idle_ms) for c in consumer_rows],
            consumers_truncated=not list_consumers,
            pending_summary=PendingSummary(
                count=int(summary.get("pending", 0)),
                min_id=text(summary.get("min")),
                max_id=text(summary.get("max")),
                per_consumer={text(c["name"]) or "": int(c["pending"]) for c in (summary.get("consumers") or [])[:cap]},
                oldest=oldest,
            ),
        )
        sample_rows = [
            {"message_id": text(r["message_id"]) or "", "consumer": text(r["consumer"]) or "",
             "idle_ms": int(r["time_since_delivered"]), "deliveries": int(r["times_delivered"])}
            for r in idle_rows
        ]
        probes.append(GroupProbe(info=info, trimmed_ids=trimmed, idle_sample=sample_rows,
                                  retry_members=retry_members, count_from=oldest_undelivered if needs_count else None,
                                  consumers_read_at_ms=read_at))
    return probes


def _estimate_lag(length: int, first: StreamId | None, last: StreamId | None, oldest: StreamId | None,
                  floor: int) -> int:
    """Undelivered entries estimated from timestamps: the share of the stream's time span not yet delivered."""
    if first is None or last is None or oldest is None:
        return floor
    span = last.ms - first.ms
    behind = last.ms - oldest.ms
    estimate = length if span <= 0 else round(length * behind / span)
    return max(floor, min(length, estimate))


def _consumer(row: dict[str, Any], dead_ms: int) -> ConsumerInfo:
    pending = int(row.get("pending", 0))
    idle = int(row.get("idle", 0))
    inactive = as_int(row.get("inactive")) if "inactive" in row else None
    return ConsumerInfo(name=text(row["name"]) or "", pending=pending, idle_ms=idle,
                        inactive_ms=inactive if inactive is None or inactive >= 0 else None,
                        dead=pending > 0 and idle >= dead_ms)


async def _round_four(
    redis: Any, settings: Settings, stream: str, probes: list[GroupProbe], sinfo: dict[str, Any]
) -> None:
    """Which sampled messages (pending long enough, or in the retry queue) hold an idempotency lock,
    and the exact lag of the groups whose estimated lag is small (a bounded XRANGE each)."""
    conv, sample = settings.conventions, settings.limits.stream_sample
    wanted: list[tuple[GroupProbe, list[str]]] = []
    for probe in probes:
        ids = {row["message_id"] for row in probe.idle_sample if row["idle_ms"] >= conv.claim_interval_ms}
        ids.update(probe.retry_members)
        if ids:
            wanted.append((probe, sorted(ids)))
    counting = [p for p in probes if p.count_from is not None]
    if not wanted and not counting:
        return
    pipe = redis.pipeline(transaction=False)
    for probe, ids in wanted:
        queue_get_each(pipe, [idempotency_key(conv, probe.info.name, mid) for mid in ids])
    for probe in counting:
        pipe.xrange(stream, probe.count_from, "+", count=sample + 1)
    replies = iter(await pipe.execute())
    found: list[tuple[GroupProbe, str]] = []
    for probe, ids in wanted:
        found.extend((probe, mid) for mid in ids if next(replies) is not None)
    for probe in counting:
        entries = next(replies)
        if len(entries) <= sample:
            probe.info.lag = len(entries)
        else:
            first, last = sinfo.get("first-entry"), sinfo.get("last-entry")
            probe.info.lag_source = "estimated"
            probe.info.lag = _estimate_lag(int(sinfo.get("length", 0)), try_parse(first[0]) if first else None,
                                           try_parse(last[0]) if last else None, try_parse(probe.count_from),
                                           sample + 1)
    if not found:
        return
    pipe = redis.pipeline(transaction=False)
    for probe, mid in found:
        pipe.pttl(idempotency_key(conv, probe.info.name, mid))
    for (probe, mid), ttl in zip(found, await pipe.execute(), strict=True):
        if int(ttl) != -2:
            probe.lock_ttls[mid] = int(ttl)
