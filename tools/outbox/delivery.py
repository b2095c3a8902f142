"""Where one Redis Streams message stands in each consumer group of its stream.

For a stream entry id, per group (``XINFO GROUPS``):

- *delivered* when the id is at or below the group's ``last-delivered-id``;
- *pending* when ``XPENDING <stream> <group> <id> <id> 1`` lists it (owner consumer,
  idle time, delivery count), with the owner's own idle time from ``XINFO CONSUMERS``
  so a dead consumer can be told from a slow one;
- *acknowledged* when delivered and no longer pending;
- *dead-lettered* when acknowledged and the dead-letter stream ``<stream><dlq_suffix>``
  holds an entry whose ``messageId`` is this id (DLQ entries are written after the
  source entry, so the DLQ is read with XRANGE from the entry's millisecond onwards,
  in bounded pages).

Plus the retry bookkeeping (``retry:post-processor:<group>:<messageId>`` and its
``:attempt`` / ``:lastError`` keys, the ``retry-queue:post-processor:<group>`` score)
and the idempotency lock with its TTL. Every key pattern comes from ``Conventions`` and
is built by :mod:`tools.streams.keys`; dead-letter entries are parsed by
:func:`tools.streams.records.parse_dlq_entry`, values decoded and cut by :mod:`tools.streams.values`.

Only read commands: XINFO, XPENDING, XRANGE, GETRANGE, EXISTS, TTL, ZSCORE. Never
XREADGROUP (it would deliver the message) and never KEYS.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from server.config import Conventions, Limits
from server.lazy_modules import LazyModule
from tools.streams import keys
from tools.streams.ids import StreamId
from tools.streams.records import (  # RetryState, IdempotencyLock: re-exported
    IdempotencyLock,
    RetryState,
    parse_dlq_entry,
)
from tools.streams.values import capped, text

redis_exceptions = LazyModule("redis.exceptions")

DeliveryState = Literal["not_delivered", "pending", "acknowledged", "dead_lettered"]


ATTEMPT_MAX_BYTES = 64
"""The retry attempt counter is a number: more than this is not read."""


class MessageDeadLetter(BaseModel):
    """One entry of a dead-letter stream that refers to the message (the short form of
    :class:`tools.streams.records.DeadLetter`, which ``dlq_list`` shows in full)."""

    dlq_stream: str
    dlq_entry_id: str
    message_id: str = Field(description="the messageId field: the entry id in the source stream")
    error: str | None = None
    error_truncated: bool = Field(default=False, description="error was cut at [limits] payload_max_bytes")
    timestamp: str | None = None
    group: str | None = Field(default=None, description="the group field, when the DLQ entry carries one")


class PendingEntry(BaseModel):
    consumer: str
    idle_ms: int = Field(description="ms since the entry was last delivered to its consumer")
    times_delivered: int
    consumer_idle_ms: int | None = Field(default=None, description="ms since the consumer last read or claimed")
    consumer_dead: bool = Field(
        description="the owner consumer has been idle longer than [limits] dead_consumer_idle_ms"
    )


class GroupDelivery(BaseModel):
    """Delivery of one message to one consumer group."""

    stream: str
    group: str
    entry_id: str
    state: DeliveryState
    delivered: bool = Field(description="entry id <= the group's last-delivered-id")
    last_delivered_id: str
    pending: PendingEntry | None = None
    acknowledged: bool
    dead_letters: list[MessageDeadLetter] = Field(default_factory=list)
    retry: RetryState
    idempotency: IdempotencyLock
    lock_stale: bool = Field(
        description="the idempotency lock is held while the message failed or sits unacknowledged in the PEL "
        "longer than conventions.claim_interval_ms: a re-read will be acknowledged with no effect"
    )
    message_id_used: str = Field(description="the messageId the retry/idempotency keys were found under")


def _text(value: Any) -> str:
    return text(value) or ""


async def find_dead_letters(
    redis: Any,
    conventions: Conventions,
    limits: Limits,
    stream: str,
    message_ids: list[str],
) -> list[MessageDeadLetter]:
    """DLQ entries of ``stream`` whose ``messageId`` is one of ``message_ids`` (see :func:`scan_dead_letters`)."""
    found, _complete = await scan_dead_letters(redis, conventions, limits, stream, message_ids)
    return found


async def scan_dead_letters(
    redis: Any,
    conventions: Conventions,
    limits: Limits,
    stream: str,
    message_ids: list[str],
) -> tuple[list[MessageDeadLetter], bool]:
    """DLQ entries referring to ``message_ids``, and whether the search reached the DLQ's end.

    Reads ``<stream><dlq_suffix>`` from the oldest candidate's millisecond onwards, in pages
    of 50, 100, 200, ... entries (at most ``limits.max_count``), at most
    ``limits.scan_max_iterations`` pages; the second value is False when that bound stopped
    the search first (a dead letter further on was not seen). Only the ``messageId`` field
    (``conventions.dlq_message_id_field``) of each entry is looked at; a matching entry is
    parsed by :func:`tools.streams.records.parse_dlq_entry` with ``limits.payload_max_bytes``.
    """
    if not message_ids:
        return [], True
    wanted = set(message_ids)
    start_ms = min(StreamId.parse(m).ms for m in message_ids)
    dlq = keys.dlq_key(conventions, stream)
    id_field = conventions.dlq_message_id_field.encode()
    found: list[MessageDeadLetter] = []
    start: str = f"{start_ms}-0"
    count = min(50, limits.max_count)  # dead letters follow their message closely: start small, then double
    for _ in range(limits.scan_max_iterations):
        page = await redis.xrange(dlq, min=start, max="+", count=count)
        for raw_id, fields in page:
            message_id = _text(fields.get(id_field, b""))
            if message_id in wanted:
                entry = parse_dlq_entry(fields, dlq_stream=dlq, dlq_id=_text(raw_id), conventions=conventions,
                                        max_bytes=limits.payload_max_bytes)
                found.append(
                    MessageDeadLetter(
                        dlq_stream=dlq,
                        dlq_entry_id=entry.dlq_id,
                        message_id=message_id,
                        error=entry.error,
                        error_truncated=entry.error_truncated,
                        timestamp=entry.timestamp,
                        group=entry.extra_fields.get("group"),
                    )
                )
        if len(page) < count:
            return found, True
        start = "(" + _text(page[-1][0])
        count = min(count * 2, limits.max_count)
    return found, False


async def _bookkeeping(
    redis: Any, conventions: Conventions, limits: Limits, group: str, message_id: str, entry_id: str
) -> tuple[RetryState, IdempotencyLock]:
    """Retry keys and idempotency lock of ``message_id`` in ``group``, read with bounded sizes.

    The attempt counter is read up to :data:`ATTEMPT_MAX_BYTES`, the last error up to
    ``limits.payload_max_bytes`` (``GETRANGE``, one byte more to tell a cut); ``EXISTS``
    says whether each key is there (``GETRANGE`` reads a missing key as empty).
    """
    base = keys.retry_key(conventions, group, message_id)
    attempt_key = keys.retry_attempt_key(conventions, group, message_id)
    error_key = keys.retry_last_error_key(conventions, group, message_id)
    queue_key = keys.retry_queue_key(conventions, group)
    lock_key = keys.idempotency_key(conventions, group, message_id)
    max_bytes = limits.payload_max_bytes
    pipe = redis.pipeline(transaction=False)
    pipe.exists(base)
    pipe.exists(attempt_key)
    pipe.getrange(attempt_key, 0, ATTEMPT_MAX_BYTES - 1)
    pipe.exists(error_key)
    pipe.getrange(error_key, 0, max_bytes)  # inclusive end: one byte over the cap shows the value was cut
    pipe.zscore(queue_key, message_id)
    pipe.zscore(queue_key, entry_id)
    pipe.exists(lock_key)
    pipe.ttl(lock_key)
    (base_exists, attempt_exists, attempt, error_exists, last_error, score, score_entry, lock_exists,
     ttl) = await pipe.execute()
    if score is None:
        score = score_entry
    error_text, error_cut = capped(last_error, max_bytes) if error_exists else (None, False)
    retry = RetryState(
        key=base,
        exists=bool(base_exists) or bool(attempt_exists) or bool(error_exists) or score is not None,
        attempt=_attempt(attempt) if attempt_exists else None,
        last_error=error_text,
        last_error_truncated=error_cut,
        next_retry_at_ms=int(score) if score is not None else None,
        retry_queue_key=queue_key,
    )
    ttl_s = int(ttl) if ttl is not None and ttl >= 0 else None
    lock = IdempotencyLock(key=lock_key, exists=bool(lock_exists), ttl_s=ttl_s)
    return retry, lock


def _attempt(value: bytes | str | None) -> int | None:
    """The attempt counter: an integer (a fraction or other text is no counter)."""
    try:
        return int(_text(value))
    except ValueError:
        return None


async def stream_groups(redis: Any, stream: str) -> list[dict[str, Any]]:
    """``XINFO GROUPS`` of ``stream``; an empty list when the stream does not exist."""
    try:
        return list(await redis.xinfo_groups(stream))
    except redis_exceptions.ResponseError as exc:
        if "no such key" in str(exc).lower():
            return []
        raise


async def message_delivery(
    redis: Any,
    conventions: Conventions,
    limits: Limits,
    stream: str,
    entry_id: bytes | str,
    *,
    message_id: str | None = None,
    groups: list[dict[str, Any]] | None = None,
) -> list[GroupDelivery]:
    """Delivery state of entry ``entry_id`` of ``stream`` in every consumer group of the stream.

    ``message_id`` is an alternative id the post-processors may use in their retry and
    idempotency keys (e.g. the event_queue id); the keys are looked up under the entry id
    first, then under ``message_id``. ``groups`` is an ``XINFO GROUPS`` answer the caller
    already has. An empty list means the stream does not exist or has no group.
    """
    entry = _text(entry_id)
    entry_key = StreamId.parse(entry)
    if groups is None:
        groups = await stream_groups(redis, stream)
    if not groups:
        return []
    candidates = [entry] + ([message_id] if message_id and message_id != entry else [])
    dead = await find_dead_letters(redis, conventions, limits, stream, [entry])
    out: list[GroupDelivery] = []
    for info in groups:
        group = _text(info["name"])
        last_delivered = _text(info.get("last-delivered-id", b"0-0"))
        delivered = entry_key <= StreamId.parse(last_delivered)
        pending: PendingEntry | None = None
        rows = await redis.xpending_range(stream, group, min=entry, max=entry, count=1)
        if rows:
            row = rows[0]
            consumer = _text(row["consumer"])
            consumer_idle: int | None = None
            for c in await redis.xinfo_consumers(stream, group):
                if _text(c["name"]) == consumer:
                    consumer_idle = int(c.get("inactive", c.get("idle", 0)) or 0)
                    if consumer_idle < 0:  # Redis 7.2 'inactive' is -1 for a consumer that never read
                        consumer_idle = int(c.get("idle", 0) or 0)
                    break
            pending = PendingEntry(
                consumer=consumer,
                idle_ms=int(row["time_since_delivered"]),
                times_delivered=int(row["times_delivered"]),
                consumer_idle_ms=consumer_idle,
                consumer_dead=consumer_idle is not None and consumer_idle >= limits.dead_consumer_idle_ms,
            )
        retry, lock = await _bookkeeping(redis, conventions, limits, group, candidates[0], entry)
        used = candidates[0]
        if len(candidates) > 1 and not retry.exists and not lock.exists:
            alt_retry, alt_lock = await _bookkeeping(redis, conventions, limits, group, candidates[1], entry)
            if alt_retry.exists or alt_lock.exists:
                retry, lock, used = alt_retry, alt_lock, candidates[1]
        acknowledged = delivered and pending is None
        mine = [d for d in dead if d.group in (None, group)]
        state: DeliveryState
        if not delivered:
            state = "not_delivered"
        elif pending is not None:
            state = "pending"
        elif mine:
            state = "dead_lettered"
        else:
            state = "acknowledged"
        out.append(
            GroupDelivery(
                stream=stream,
                group=group,
                entry_id=entry,
                state=state,
                delivered=delivered,
                last_delivered_id=last_delivered,
                pending=pending,
                acknowledged=acknowledged,
                dead_letters=mine if state == "dead_lettered" else [],
                retry=retry,
                idempotency=lock,
                lock_stale=False,
                message_id_used=used,
            )
        )
    _attribute_shared_dead_letters(out)
    for d in out:
        failed = d.retry.last_error is not None or d.state == "dead_lettered"
        stuck = d.pending is not None and d.pending.idle_ms >= conventions.claim_interval_ms
        d.lock_stale = d.idempotency.exists and (stuck or failed)
    return out


def _attribute_shared_dead_letters(deliveries: list[GroupDelivery]) -> None:
    """With several groups and group-less DLQ entries, keep them on groups that show failures.

    When at least one dead-lettered group has retry bookkeeping, the others (no failure on
    record) are plain acknowledgements of the same message and are set back to
    ``acknowledged``. Without any bookkeeping the attribution stays on every group.
    """
    flagged = [d for d in deliveries if d.state == "dead_lettered"]
    if len(flagged) < 2:
        return
    with_failures = [d for d in flagged if d.retry.exists]
    if not with_failures:
        return
    for d in flagged:
        if not d.retry.exists and all(dl.group is None for dl in d.dead_letters):
            d.state = "acknowledged"
            d.dead_letters = []
