"""What else Redis knows about a dead-lettered message: three pipelined rounds per page.

For each dead letter whose ``messageId`` is a stream id, and each consumer group of its
source stream (``XINFO GROUPS``):

- whether the original entry is still in the source stream (``XRANGE id id``) and in
  which groups' PEL it sits (``XPENDING stream group id id 1``: owner, idle, deliveries);
- the retry bookkeeping ``retry_key`` (+ ``retry_attempt_suffix``,
  ``retry_last_error_suffix``) and the score in ``retry_queue_key``;
- the idempotency lock ``idempotency_key`` and its TTL.

Per group, one ``MGET`` reads every attempt counter and one every lock of the page, and
one ``ZMSCORE`` every retry-queue score; the last error (``GETRANGE``, byte-capped) and
the lock TTLs are read only where something exists.

The models are those of :mod:`tools.outbox.delivery` so every tool describes retry
bookkeeping and locks the same way. A key of an unexpected type reads as absent.
"""

from __future__ import annotations

from dataclasses import dataclass
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
    """Fill ``original`` and ``bookkeeping`` of each letter in place (three pipelined rounds at most)."""
    if not letters:
        return
    conv = settings.conventions
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
    located = [(d, try_parse(d.message_id or "") is not None and exists[d.source_stream]) for d in letters]
    for letter, is_id in located:
        if is_id:
            mid = letter.message_id or ""
            pipe.xrange(letter.source_stream, mid, mid, count=1)
            for group in groups_of[letter.source_stream]:
                pipe.xpending_range(letter.source_stream, group, mid, mid, 1)
    pairs = sorted({(d.source_stream, g) for d in letters for g in groups_of[d.source_stream]})
    members = {pair: [d for d in letters if d.source_stream == pair[0]] for pair in pairs}
    for (_, group), batch in members.items():
        mids = [d.message_id or "" for d in batch]
        pipe.mget([retry_attempt_key(conv, group, m) for m in mids])
        pipe.mget([idempotency_key(conv, group, m) for m in mids])
        pipe.zmscore(retry_queue_key(conv, group), mids)
        pipe.exists(*[retry_key(conv, group, m) for m in mids])
    answers = iter(await pipe.execute(raise_on_error=False))

    for letter, is_id in located:
        original = OriginalState(source_exists=exists[letter.source_stream], in_stream=False,
                                 groups_checked=groups_of[letter.source_stream])
        if is_id:
            original.in_stream = bool(_value(next(answers)))
            for group in groups_of[letter.source_stream]:
                rows = _value(next(answers)) or []
                if rows:
                    row = rows[0]
                    original.pending_in.append(PendingHolder(
                        group=group, consumer=text(row["consumer"]) or "",
                        idle_ms=int(row["time_since_delivered"]), deliveries=int(row["times_delivered"])))
        letter.original = original

    # per (letter, group): attempt, lock and retry-queue score; base keys are only counted per group
    pairs_found: list[_Pair] = []
    for (_, group), batch in members.items():
        attempts = _value(next(answers)) or [None] * len(batch)
        locks = _value(next(answers)) or [None] * len(batch)
        scores = _value(next(answers)) or [None] * len(batch)
        any_base = bool(_value(next(answers)))
        for letter, attempt, lock, score in zip(batch, attempts, locks, scores, strict=True):
            if any_base or attempt is not None or lock is not None or score is not None:
                pairs_found.append(_Pair(letter, group, attempt, score))
    await _bookkeeping(redis, settings, pairs_found)


@dataclass
class _Pair:
    letter: DeadLetter
    group: str
    attempt: Any
    score: Any


async def _bookkeeping(redis: Any, settings: Settings, pairs: list[_Pair]) -> None:
    """Round 3: base key, last error (byte-capped) and lock TTL of the (letter, group) pairs with anything."""
    if not pairs:
        return
    conv, max_bytes = settings.conventions, settings.limits.payload_max_bytes
    pipe = redis.pipeline(transaction=False)
    for pair in pairs:
        mid = pair.letter.message_id or ""
        pipe.exists(retry_key(conv, pair.group, mid))
        pipe.getrange(retry_last_error_key(conv, pair.group, mid), 0, max_bytes)
        pipe.pttl(idempotency_key(conv, pair.group, mid))
    answers = iter(await pipe.execute(raise_on_error=False))
    for pair in pairs:
        base_exists, last_error, pttl = (_value(next(answers)) for _ in range(3))
        mid = pair.letter.message_id or ""
        error_text, _ = capped(last_error or None, max_bytes)
        retry = RetryState(
            key=retry_key(conv, pair.group, mid),
            exists=bool(base_exists) or pair.attempt is not None or bool(last_error) or pair.score is not None,
            attempt=as_int(pair.attempt),
            last_error=error_text if last_error else None,
            next_retry_at_ms=int(pair.score) if pair.score is not None else None,
            retry_queue_key=retry_queue_key(conv, pair.group),
        )
        ttl = as_int(pttl)
        lock = IdempotencyLock(
            key=idempotency_key(conv, pair.group, mid),
            exists=ttl is not None and ttl != -2,
            ttl_s=ttl // 1000 if ttl is not None and ttl >= 0 else None,
        )
        if retry.exists or lock.exists:
            pair.letter.bookkeeping.append(GroupBookkeeping(group=pair.group, retry=retry, idempotency=lock))
