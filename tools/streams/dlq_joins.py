"""What else Redis knows about a dead-lettered message: one pipelined round per page.

For each dead letter whose ``messageId`` is a stream id, and each consumer group of its
source stream (``XINFO GROUPS``):

- whether the original entry is still in the source stream (``XRANGE id id``) and in
  which groups' PEL it sits (``XPENDING stream group id id 1``: owner, idle, deliveries);
- the retry bookkeeping ``retry_key`` (+ ``retry_attempt_suffix``,
  ``retry_last_error_suffix``) and the score in ``retry_queue_key``;
- the idempotency lock ``idempotency_key`` and its TTL.

The models are those of :mod:`tools.outbox.delivery` so every tool describes retry
bookkeeping and locks the same way. A key of an unexpected type reads as absent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from server.config import Settings
from tools.outbox.delivery import IdempotencyLock, RetryState
from tools.streams.ids import try_parse
from tools.streams.keys import (
    idempotency_key,
    retry_attempt_key,
    retry_key,
    retry_last_error_key,
    retry_queue_key,
)
from tools.streams.values import as_int, capped, text

if TYPE_CHECKING:
    from tools.streams.dlq import DeadLetter


class PendingHolder(BaseModel):
    group: str
    consumer: str
    idle_ms: int
    deliveries: int


class OriginalState(BaseModel):
    """Where the dead-lettered message still is."""

    source_exists: bool = Field(description="the source stream exists")
    in_stream: bool = Field(description="the original entry (messageId) is still in the source stream")
    pending_in: list[PendingHolder] = Field(default_factory=list, description="groups whose PEL still holds it")
    groups_checked: list[str] = Field(default_factory=list)


class GroupBookkeeping(BaseModel):
    group: str
    retry: RetryState
    idempotency: IdempotencyLock


def _value(reply: Any) -> Any:
    """A pipeline answer; an error (e.g. WRONGTYPE) reads as an absent value."""
    return None if isinstance(reply, Exception) else reply


async def join_dead_letters(redis: Any, settings: Settings, letters: list[DeadLetter]) -> None:
    """Fill ``original`` and ``bookkeeping`` of each letter in place (two pipelined rounds)."""
    if not letters:
        return
    conv, max_bytes = settings.conventions, settings.limits.payload_max_bytes
    sources = sorted({d.source_stream for d in letters})
    pipe = redis.pipeline(transaction=False)
    for source in sources:
        pipe.type(source)
        pipe.xinfo_groups(source)
    replies = await pipe.execute(raise_on_error=False)
    groups_of: dict[str, list[str]] = {}
    exists: dict[str, bool] = {}
    for i, source in enumerate(sources):
        exists[source] = text(_value(replies[2 * i])) == "stream"
        groups = _value(replies[2 * i + 1]) if exists[source] else None
        groups_of[source] = [text(g["name"]) or "" for g in groups or []][: settings.limits.max_count]

    pipe = redis.pipeline(transaction=False)
    plan: list[tuple[DeadLetter, bool]] = []
    for letter in letters:
        mid = letter.message_id or ""
        groups = groups_of[letter.source_stream]
        is_id = try_parse(mid) is not None and exists[letter.source_stream]
        if is_id:
            pipe.xrange(letter.source_stream, mid, mid, count=1)
            for group in groups:
                pipe.xpending_range(letter.source_stream, group, mid, mid, 1)
        for group in groups:
            base = retry_key(conv, group, mid)
            pipe.exists(base)
            pipe.get(retry_attempt_key(conv, group, mid))
            pipe.getrange(retry_last_error_key(conv, group, mid), 0, max_bytes)
            pipe.zscore(retry_queue_key(conv, group), mid)
            pipe.pttl(idempotency_key(conv, group, mid))
        plan.append((letter, is_id))
    answers = iter(await pipe.execute(raise_on_error=False))

    for letter, is_id in plan:
        groups = groups_of[letter.source_stream]
        mid = letter.message_id or ""
        original = OriginalState(source_exists=exists[letter.source_stream], in_stream=False, groups_checked=groups)
        if is_id:
            original.in_stream = bool(_value(next(answers)))
            for group in groups:
                rows = _value(next(answers)) or []
                if rows:
                    row = rows[0]
                    original.pending_in.append(PendingHolder(
                        group=group, consumer=text(row["consumer"]) or "",
                        idle_ms=int(row["time_since_delivered"]), deliveries=int(row["times_delivered"])))
        letter.original = original
        for group in groups:
            base_exists, attempt, last_error, score, pttl = (_value(next(answers)) for _ in range(5))
            error_text, _ = capped(last_error or None, max_bytes)
            retry = RetryState(
                key=retry_key(conv, group, mid),
                exists=bool(base_exists) or attempt is not None or bool(last_error) or score is not None,
                attempt=as_int(attempt),
                last_error=error_text if last_error else None,
                next_retry_at_ms=int(score) if score is not None else None,
                retry_queue_key=retry_queue_key(conv, group),
            )
            ttl = as_int(pttl)
            lock = IdempotencyLock(
                key=idempotency_key(conv, group, mid),
                exists=ttl is not None and ttl != -2,
                ttl_s=ttl // 1000 if ttl is not None and ttl >= 0 else None,
            )
            if retry.exists or lock.exists:
                letter.bookkeeping.append(GroupBookkeeping(group=group, retry=retry, idempotency=lock))
