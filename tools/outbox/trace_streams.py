"""The Redis Streams part of a trace: find an event's entry, then its delivery per group.

The outbox runner XADDs one entry per target service with an auto id (the push time in
milliseconds, by Redis's clock) and the event_queue id in the ``id`` field. The row's times
come from the database (and from the runner's clock and time zone), so they are a search
hint, never evidence:

1. the window ``[min(times) - stream_window_ms, max(times) + stream_window_ms]`` is shifted
   by the clock offset measured during the call (Redis ``TIME`` minus the database's
   ``now()``) and searched from the push time outwards, in pages of 50, 100, 200, ...;
2. on a miss, a stream shorter than ``[limits] stream_read_whole_max`` is read whole, in
   pages of ``max_count``; a longer one is searched in windows widened step by step
   (x4 each) up to ``[limits] stream_window_max_ms``;
3. all of it within ``scan_max_iterations`` pages in total.

A missing entry is ``trimmed`` only when ``XINFO STREAM`` proves it
(:mod:`tools.streams.trim_evidence`); otherwise the verdict is ``entry_not_found``,
saying what was searched and why the entry could still exist.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from server.config import Settings
from server.lazy_modules import LazyModule
from tools.outbox.delivery import GroupDelivery, message_delivery, stream_groups
from tools.outbox.model import Hop, StreamEntryRef, Verdict
from tools.outbox.verdicts import GROUP_PRIORITY, verdict
from tools.streams.ids import StreamId
from tools.streams.node_reads import server_time
from tools.streams.trim_evidence import trim_evidence
from tools.streams.values import capped, redis_time_ms, reply_or_raise, text

redis_exceptions = LazyModule("redis.exceptions")


def _text(value: Any) -> str:
    return text(value) or ""


FIRST_PAGE = 50
"""Entries read by the first page in each direction; pages then double up to ``[limits] max_count``."""

WIDEN_FACTOR = 4
"""Each widening step multiplies the window by this."""


def _keep(ref: StreamEntryRef, raw_id: Any, fields: dict[bytes, bytes], max_bytes: int) -> None:
    ref.entry_id = _text(raw_id)
    for key, value in fields.items():
        shown, was_cut = capped(_text(value), max_bytes)
        ref.fields[_text(key)] = shown or ""
        ref.truncated = ref.truncated or was_cut


@dataclass
class _Search:
    redis: Any
    settings: Settings
    stream: str
    wanted: bytes
    id_field: bytes
    ref: StreamEntryRef
    pages_left: int

    def _match(self, page: list[Any]) -> bool:
        self.ref.scanned += len(page)
        for raw_id, fields in page:
            if fields.get(self.id_field) == self.wanted:
                _keep(self.ref, raw_id, fields, self.settings.limits.payload_max_bytes)
                return True
        return False

    async def band(self, start_ms: int, end_ms: int, center: int) -> bool:
        """Search ``[start_ms, end_ms]`` from ``center`` outwards, backwards then forwards in growing pages."""
        if end_ms < start_ms:
            return False
        self.ref.windows.append([start_ms, end_ms])
        limits = self.settings.limits
        center = min(max(center, start_ms), end_ms)
        back: str | None = str(center)  # XREVRANGE max (inclusive of every entry of that millisecond)
        forward: str | None = f"{center + 1}-0" if center < end_ms else None  # XRANGE min
        size = {"back": FIRST_PAGE, "forward": FIRST_PAGE}
        while self.pages_left > 0 and (back is not None or forward is not None):
            direction = ("back" if back is not None and (forward is None or size["back"] <= size["forward"])
                         else "forward")
            count = min(size[direction], limits.max_count)
            self.pages_left -= 1
            if direction == "back":
                page = await self.redis.xrevrange(self.stream, max=back, min=f"{start_ms}-0", count=count)
            else:
                page = await self.redis.xrange(self.stream, min=forward, max=str(end_ms), count=count)
            if self._match(page):
                return True
            size[direction] = count * 2
            next_bound = "(" + _text(page[-1][0]) if page and len(page) == count else None
            if direction == "back":
                back = next_bound
            else:
                forward = next_bound
        return False

    async def whole(self) -> None:
        """Read the whole stream oldest first in pages of ``max_count`` (``ref`` says what was found and read)."""
        self.ref.read_whole = True
        count = self.settings.limits.max_count
        low = "-"
        while self.pages_left > 0:
            self.pages_left -= 1
            page = await self.redis.xrange(self.stream, min=low, max="+", count=count)
            if self._match(page):
                return
            if len(page) < count:
                self.ref.whole_complete = True
                return
            low = "(" + _text(page[-1][0])


async def locate_entry(
    redis: Any, settings: Settings, stream: str, event_id: str, around_ms: list[int], expected_ms: int | None = None,
    *, offset_ms: int = 0,
) -> tuple[StreamEntryRef, bool]:
    """The entry of ``stream`` whose ``id`` field is ``event_id``; second value: the stream exists.

    ``around_ms`` / ``expected_ms`` are the row's times (database clock); ``offset_ms``
    (Redis minus database) shifts them to Redis's clock. See the module docstring for the
    order of the search and its bounds.
    """
    limits = settings.limits
    window = limits.stream_window_ms
    around = [t + offset_ms for t in around_ms]
    low, high = min(around), max(around)
    center = (expected_ms + offset_ms) if expected_ms is not None else high
    start_ms, end_ms = max(0, low - window), high + window
    ref = StreamEntryRef(stream=stream, searched_from_ms=start_ms, searched_to_ms=end_ms, clock_offset_ms=offset_ms)
    first = await redis.xrange(stream, min="-", max="+", count=1)
    if not first:
        return ref, bool(await redis.exists(stream))
    ref.first_entry_id = _text(first[0][0])
    search = _Search(redis, settings, stream, event_id.encode(), settings.conventions.event_id_field.encode(), ref,
                     limits.scan_max_iterations)
    if await search.band(start_ms, end_ms, center):
        return ref, True
    ref.length = int(await redis.xlen(stream))
    if ref.length < limits.stream_read_whole_max:
        await search.whole()
        return ref, True
    span = window
    while search.pages_left > 0 and span < limits.stream_window_max_ms:
        span = min(span * WIDEN_FACTOR, limits.stream_window_max_ms)
        new_start, new_end = max(0, low - span), high + span
        if await search.band(new_start, start_ms - 1, start_ms - 1) or await search.band(end_ms + 1, new_end,
                                                                                          end_ms + 1):
            break
        start_ms, end_ms = new_start, new_end
    ref.searched_from_ms, ref.searched_to_ms = start_ms, end_ms
    return ref, True


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


def _searched_text(ref: StreamEntryRef) -> str:
    shift = f", clock offset {ref.clock_offset_ms} ms applied" if ref.clock_offset_ms else ""
    if ref.read_whole:
        done = "the whole stream" if ref.whole_complete else "part of the stream (page budget spent)"
        return f"read {done}, {ref.length} entries ({ref.scanned} entries read in all){shift}"
    bands = len(ref.windows)
    return (f"{ref.scanned} entries read between {ref.searched_from_ms} and {ref.searched_to_ms} ms in "
            f"{bands} step(s){shift}")


async def stream_hops(
    redis: Any, settings: Settings, stream: str, event_id: str, around_ms: list[int], now_ms: int, label: str,
    expected_ms: int | None = None, offset_ms: int = 0,
) -> tuple[list[Hop], list[Verdict]]:
    """Hops and findings for one target stream of an event (entry, then one hop per group)."""
    ref, exists = await locate_entry(redis, settings, stream, event_id, around_ms, expected_ms, offset_ms=offset_ms)
    entry_hop = f"{label}stream_entry"
    if ref.entry_id is None:
        if not exists:
            detail = f"stream {stream} does not exist: the target name is wrong or the stream was deleted"
            finding = verdict("not_found", "error", f"{detail} (event {event_id})",
                              "check target_services and [conventions] stream_prefix", entry_hop)
            state = "stream_missing"
        else:
            pushed = (expected_ms if expected_ms is not None else max(around_ms)) + offset_ms
            ref.trim = trim_evidence(await redis.xinfo_stream(stream), settings.conventions.stream_maxlen,
                                     StreamId(max(0, pushed), 0), settings.limits.stream_window_ms)
            searched = _searched_text(ref)
            if ref.trim.trimmed:
                detail = (f"no entry with id={event_id} ({searched}); it was pushed about {pushed} ms (Redis clock) "
                          f"and is gone: {ref.trim.rule}")
                finding = verdict("trimmed", "warning", f"stream {stream}: {detail}", hop=entry_hop)
                state = "trimmed"
            else:
                detail = (f"no entry with id={event_id} ({searched}); not proven trimmed: {ref.trim.rule}. It could "
                          "still exist: in another stream (check target_services), under another id field "
                          f"([conventions] event_id_field is '{settings.conventions.event_id_field}'), or pushed "
                          "outside what was searched; or it was deleted (XDEL)")
                finding = verdict("entry_not_found", "error", f"stream {stream}: {detail}", hop=entry_hop)
                state = "not_found"
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
