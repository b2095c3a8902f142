"""The Redis Streams part of a trace: find an event's entry, then its delivery per group.

The outbox runner XADDs one entry per target service with an auto id (the push time in
milliseconds) and the event_queue id in the ``id`` field. The entry is searched with
XRANGE in a bounded window around the row's times (``created_at``, ``processed_at``,
``updated_at`` +- ``[limits] stream_window_ms``), in pages of ``max_count`` entries, at
most ``scan_max_iterations`` pages. When it is not there and the stream's oldest entry
is newer than the searched window, the stream was trimmed, MAXLEN trimming removed it (``trimmed``).
"""

from __future__ import annotations

from typing import Any

import redis.exceptions as redis_exceptions

from server.config import Settings
from tools.outbox.delivery import GroupDelivery, message_delivery, stream_groups
from tools.outbox.model import Hop, StreamEntryRef, Verdict
from tools.outbox.verdicts import GROUP_PRIORITY, verdict
from tools.streams.ids import StreamId
from tools.streams.node_reads import server_time
from tools.streams.values import capped, redis_time_ms, reply_or_raise, text


def _text(value: Any) -> str:
    return text(value) or ""


FIRST_PAGE = 50
"""Entries read by the first page in each direction; pages then double up to ``[limits] max_count``."""


def _keep(ref: StreamEntryRef, raw_id: Any, fields: dict[bytes, bytes], max_bytes: int) -> None:
    ref.entry_id = _text(raw_id)
    for key, value in fields.items():
        shown, was_cut = capped(_text(value), max_bytes)
        ref.fields[_text(key)] = shown or ""
        ref.truncated = ref.truncated or was_cut


async def locate_entry(
    redis: Any, settings: Settings, stream: str, event_id: str, around_ms: list[int], expected_ms: int | None = None
) -> tuple[StreamEntryRef, bool]:
    """The entry of ``stream`` whose ``id`` field is ``event_id``; second value: the stream exists.

    The entry's id field is ``conventions.event_id_field``. The search is bounded to
    ``[min(around_ms) - window, max(around_ms) + window]`` and starts
    where the entry most likely is: at ``expected_ms`` (the push time, i.e. ``processed_at``;
    the runner XADDs, then marks the row), reading backwards then forwards in alternating
    pages of 50, 100, 200, ... entries (at most ``max_count`` each, ``scan_max_iterations``
    pages in all). Parsing entries is the cost, so the usual case reads one small page.
    """
    limits = settings.limits
    window = limits.stream_window_ms
    start_ms = max(0, min(around_ms) - window)
    end_ms = max(around_ms) + window
    center = min(max(expected_ms if expected_ms is not None else max(around_ms), start_ms), end_ms)
    ref = StreamEntryRef(stream=stream, searched_from_ms=start_ms, searched_to_ms=end_ms)
    first = await redis.xrange(stream, min="-", max="+", count=1)
    if not first:
        return ref, bool(await redis.exists(stream))
    ref.first_entry_id = _text(first[0][0])
    wanted = event_id.encode()
    id_field = settings.conventions.event_id_field.encode()
    back: str | None = str(center)  # XREVRANGE max (inclusive of every entry of that millisecond)
    forward: str | None = f"{center + 1}-0"  # XRANGE min
    size = {"back": FIRST_PAGE, "forward": FIRST_PAGE}
    for _ in range(limits.scan_max_iterations):
        if back is None and forward is None:
            break
        direction = "back" if back is not None and (forward is None or size["back"] <= size["forward"]) else "forward"
        count = min(size[direction], limits.max_count)
        if direction == "back":
            page = await redis.xrevrange(stream, max=back, min=f"{start_ms}-0", count=count)
        else:
            page = await redis.xrange(stream, min=forward, max=str(end_ms), count=count)
        ref.scanned += len(page)
        for raw_id, fields in page:
            if fields.get(id_field) == wanted:
                _keep(ref, raw_id, fields, limits.payload_max_bytes)
                return ref, True
        size[direction] = count * 2
        more = len(page) == count
        next_bound = "(" + _text(page[-1][0]) if page and more else None
        if direction == "back":
            back = next_bound
        else:
            forward = next_bound
    return ref, True


async def _trimmed(redis: Any, settings: Settings, ref: StreamEntryRef) -> bool:
    """Whether MAXLEN trimming explains a missing entry.

    True when the stream is empty, when its oldest entry is newer than the whole search
    window, or when it is newer than the window start and the stream is at its MAXLEN.
    """
    if ref.first_entry_id is None:
        return True
    first_ms = StreamId.parse(ref.first_entry_id).ms
    if first_ms > (ref.searched_to_ms or 0):
        return True
    if first_ms > (ref.searched_from_ms or 0):
        length = await redis.xlen(ref.stream)
        return length >= settings.conventions.stream_maxlen * 0.9
    return False


def _group_finding(d: GroupDelivery, settings: Settings, now_ms: int, hop: str) -> Verdict | None:
    conv = settings.conventions
    limits = settings.limits
    where = f"stream {d.stream}, group {d.group}"
    target = f"stream='{d.stream}', group='{d.group}'"
    if d.state == "dead_lettered":
        dl = d.dead_letters[0]
        return verdict(
            "in_dlq",
            "error",
            f"{where}: dead-lettered to {dl.dlq_stream} (entry {dl.dlq_entry_id}) after "
            + (f"{d.retry.attempt} attempts" if d.retry.attempt is not None else f"maxRetries ({conv.max_retries})")
            + f": {dl.error or 'no error recorded'}",
            f"dlq_list(stream='{d.stream}') to export it; fix the cause; then "
            f"propose_remediation(symptom='dlq_replay', {target}, ids=['{d.entry_id}'])",
            hop,
        )
    if d.lock_stale:
        return verdict(
            "idempotency_lock_stale",
            "error",
            f"{where}: the idempotency lock {d.idempotency.key} is held (ttl {d.idempotency.ttl_s}s) while the "
            "message " + ("sits in the PEL" if d.pending else "failed") + ": its next read will be acknowledged "
            "with no effect",
            f"propose_remediation(symptom='clear_stale_lock', {target}, ids=['{d.entry_id}'])",
            hop,
        )
    if d.pending is not None:
        p = d.pending
        if p.consumer_dead:
            return verdict(
                "dead_consumer",
                "error",
                f"{where}: pending for {p.idle_ms} ms on consumer {p.consumer}, idle {p.consumer_idle_ms} ms "
                f"(> {limits.dead_consumer_idle_ms} ms): that consumer is gone and nobody reclaims its entries",
                f"propose_remediation(symptom='claim_dead_consumer', {target}, ids=['{d.entry_id}'])",
                hop,
            )
        late = p.idle_ms >= conv.claim_interval_ms
        return verdict(
            "in_pel",
            "warning" if late else "info",
            f"{where}: delivered to {p.consumer} {p.times_delivered} time(s), unacknowledged for {p.idle_ms} ms"
            + (f"; retry attempt {d.retry.attempt}" if d.retry.attempt is not None else "")
            + (f", last error: {d.retry.last_error}" if d.retry.last_error else "")
            + ("" if late else " (probably still being processed)"),
            f"list_pending(stream='{d.stream}', group='{d.group}') and the consumer logs; it is re-read after "
            f"{conv.claim_interval_ms} ms",
            hop,
        )
    if d.state == "not_delivered":
        age_ms = max(0, now_ms - StreamId.parse(d.entry_id).ms)
        late = age_ms > limits.pending_ageing_s * 1000
        return verdict(
            "pushed_not_consumed",
            "error" if late else "info",
            f"{where}: not read yet (entry {d.entry_id}, {age_ms // 1000}s old, group at {d.last_delivered_id}): "
            + ("the group's consumers are stopped or far behind" if late else "the group may just be behind"),
            f"inspect_stream(stream='{d.stream}') for the group's lag and consumers; start the post-processor",
            hop,
        )
    return None


def _delivery_state_text(d: GroupDelivery) -> str:
    if d.state == "pending" and d.pending:
        return f"pending on {d.pending.consumer} for {d.pending.idle_ms} ms ({d.pending.times_delivered} deliveries)"
    if d.state == "dead_lettered":
        return f"acknowledged after dead-lettering to {d.dead_letters[0].dlq_stream}"
    if d.state == "not_delivered":
        return f"not delivered (group last-delivered-id {d.last_delivered_id})"
    return "delivered and acknowledged"


async def stream_hops(
    redis: Any, settings: Settings, stream: str, event_id: str, around_ms: list[int], now_ms: int, label: str,
    expected_ms: int | None = None,
) -> tuple[list[Hop], list[Verdict]]:
    """Hops and findings for one target stream of an event (entry, then one hop per group)."""
    ref, exists = await locate_entry(redis, settings, stream, event_id, around_ms, expected_ms)
    entry_hop = f"{label}stream_entry"
    if ref.entry_id is None:
        if not exists:
            detail = f"stream {stream} does not exist: the target name is wrong or the stream was deleted"
            finding = verdict("not_found", "error", f"{detail} (event {event_id})",
                              "check target_services and [conventions] stream_prefix", entry_hop)
            state = "stream_missing"
        elif await _trimmed(redis, settings, ref):
            detail = (f"no entry with id={event_id}; the stream's oldest entry is {ref.first_entry_id or '(none)'}, "
                      f"after the time it was pushed (window from {ref.searched_from_ms} ms): trimmed by MAXLEN "
                      f"~{settings.conventions.stream_maxlen}")
            finding = verdict("trimmed", "warning", f"stream {stream}: {detail}", hop=entry_hop)
            state = "trimmed"
        else:
            detail = (f"no entry with id={event_id} among {ref.scanned} entries between {ref.searched_from_ms} and "
                      f"{ref.searched_to_ms} ms: deleted (XDEL) or pushed outside the window")
            finding = verdict("not_found", "error", f"stream {stream}: {detail}",
                              "widen [limits] stream_window_ms, or check the runner pushed it (its logs)", entry_hop)
            state = "not_in_window"
        return [Hop(name=entry_hop, ref=stream, found=False, state=state, healthy=False, detail=detail,
                    entry=ref)], [finding]
    hops = [Hop(name=entry_hop, ref=f"{stream} {ref.entry_id}", found=True, state="present", healthy=True,
                detail=f"entry {ref.entry_id} in {stream}", entry=ref)]
    groups = await stream_groups(redis, stream)
    if not groups:
        detail = f"stream {stream} has no consumer group: nothing consumes it"
        hops.append(Hop(name=f"{label}group", ref=stream, found=False, state="no_group", healthy=False,
                        detail=detail))
        return hops, [verdict("pushed_not_consumed", "error", detail,
                              f"inspect_stream(stream='{stream}'); start the post-processor that reads it",
                              f"{label}group")]
    deliveries = await message_delivery(
        redis, settings.conventions, settings.limits, stream, ref.entry_id, message_id=event_id, groups=groups
    )
    findings: list[Verdict] = []
    for d in deliveries:
        hop_name = f"{label}group"
        finding = _group_finding(d, settings, now_ms, hop_name)
        hops.append(Hop(name=hop_name, ref=f"{stream} {d.group}", found=True, state=d.state,
                        healthy=finding is None, detail=_delivery_state_text(d), delivery=d,
                        dead_letters=d.dead_letters))
        if finding is not None:
            findings.append(finding)
    findings.sort(key=lambda f: GROUP_PRIORITY.get(f.code, 8))
    return hops, findings


async def redis_now_ms(redis: Any, key: str) -> int:
    """The clock of the server holding ``key`` (its primary on a cluster), in ms."""
    return redis_time_ms(await server_time(redis, key))


async def get_key(redis: Any, key: str, max_bytes: int) -> dict[str, Any]:
    """A string key's value and TTL, for key hops such as the job completion guard.

    The value is read with ``GETRANGE`` up to ``max_bytes`` (``truncated`` says it was cut);
    a key of another type shows as existing, with no value and no TTL.
    """
    pipe = redis.pipeline(transaction=False)
    pipe.exists(key)
    pipe.getrange(key, 0, max_bytes)  # inclusive end: one byte over the cap shows the value was cut
    pipe.ttl(key)
    exists, value, ttl = await pipe.execute(raise_on_error=False)
    exists, ttl = reply_or_raise(exists), reply_or_raise(ttl)
    if not exists or isinstance(value, redis_exceptions.ResponseError):  # absent, or not a string (WRONGTYPE)
        return {"key": key, "exists": bool(exists), "value": None, "truncated": False, "ttl_s": None}
    text, truncated = capped(reply_or_raise(value), max_bytes)
    return {"key": key, "exists": True, "value": text, "truncated": truncated,
            "ttl_s": int(ttl) if ttl is not None and ttl >= 0 else None}
