"""What else Redis knows about a dead-lettered message: three pipelined rounds per page.

For each dead letter whose ``messageId`` is a stream id, and each consumer group of its
source stream (``XINFO GROUPS``):

- whether the original entry is still in the source stream (``XRANGE id id``) and in
  which groups' PEL it sits (owner, idle, deliveries): one ``XPENDING`` per group over the
  page's id range, bounded to ``max(stream_sample, ids) + 1`` entries; when the range holds
  more, ``XPENDING stream group id id 1`` per message;
- the retry bookkeeping ``retry_key`` (+ ``retry_attempt_suffix``,
  ``retry_last_error_suffix``) and the score in ``retry_queue_key``;
- the idempotency lock ``idempotency_key`` and its TTL.

Per group, one ``MGET`` reads every attempt counter and one every lock of the page, one
``ZMSCORE`` every retry-queue score and one ``EXISTS`` counts the base and last-error
keys; the last error (``GETRANGE``, byte-capped) and the lock TTLs are read only for the
(letter, group) pairs where something exists.

The models are those of :mod:`tools.streams.records`, which :mod:`tools.outbox.delivery` uses
too, so every tool describes retry bookkeeping and locks the same way. A key of an unexpected type reads as absent.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from server.config import Settings
from tools.streams.ids import try_parse
from tools.streams.keys import (
    idempotency_key,
    retry_attempt_key,
    retry_key,
    retry_last_error_key,
    retry_queue_key,
)
from tools.streams.node_reads import queue_exists_each, queue_get_each
from tools.streams.records import (
    DeadLetter,
    GroupBookkeeping,
    IdempotencyLock,
    OriginalState,
    PendingHolder,
    RetryState,
)
from tools.streams.values import as_int, capped, text


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

    # round 2: the originals, one PEL range per group, and the bookkeeping keys of every (letter, group)
    located = [d for d in letters if exists[d.source_stream] and try_parse(d.message_id or "") is not None]
    members = {(s, g): [d for d in letters if d.source_stream == s] for s in sources for g in groups_of[s]}
    pipe = redis.pipeline(transaction=False)
    for letter in located:
        pipe.xrange(letter.source_stream, letter.message_id, letter.message_id, count=1)
    ranges: list[tuple[tuple[str, str], list[str], int]] = []
    for (source, group), batch in members.items():
        ids = sorted({d.message_id or "" for d in batch if d in located}, key=lambda m: try_parse(m))
        if ids:
            bound = max(settings.limits.stream_sample, len(ids)) + 1
            pipe.xpending_range(source, group, ids[0], ids[-1], bound)
            ranges.append(((source, group), ids, bound))
    for (_, group), batch in members.items():
        mids = [d.message_id or "" for d in batch]
        # one command per key (not MGET / multi-key EXISTS): on a cluster the keys live in different slots
        queue_get_each(pipe, [retry_attempt_key(conv, group, m) for m in mids])
        queue_get_each(pipe, [idempotency_key(conv, group, m) for m in mids])
        pipe.zmscore(retry_queue_key(conv, group), mids)
        # base and lastError keys are only counted here (their values can be long): round 3 reads them per pair
        queue_exists_each(pipe, [retry_key(conv, group, m) for m in mids]
                          + [retry_last_error_key(conv, group, m) for m in mids])
    answers = iter(await pipe.execute(raise_on_error=False))

    in_stream = {id(d): bool(_value(next(answers))) for d in located}
    holders: dict[tuple[str, str, str], PendingHolder] = {}
    unresolved: list[tuple[str, str, str]] = []  # (source, group, message id) to ask one by one
    for (source, group), ids, bound in ranges:
        rows = _value(next(answers)) or []
        if len(rows) >= bound:
            unresolved.extend((source, group, m) for m in ids)
            continue
        wanted = set(ids)
        for row in rows:
            mid = text(row["message_id"]) or ""
            if mid in wanted:
                holders[(source, group, mid)] = _holder(group, row)

    pairs_found: list[_Pair] = []
    for (_, group), batch in members.items():
        attempts = [_value(next(answers)) for _ in batch]
        locks = [_value(next(answers)) for _ in batch]
        scores = _value(next(answers)) or [None] * len(batch)
        any_unread = any([bool(_value(next(answers))) for _ in range(2 * len(batch))])  # consume every reply
        for letter, attempt, lock, score in zip(batch, attempts, locks, scores, strict=True):
            if any_unread or attempt is not None or lock is not None or score is not None:
                pairs_found.append(_Pair(letter, group, attempt, score))

    await _round_three(redis, settings, pairs_found, unresolved, holders)
    for letter in letters:
        groups = groups_of[letter.source_stream]
        letter.original = OriginalState(
            source_exists=exists[letter.source_stream],
            in_stream=in_stream.get(id(letter), False),
            pending_in=[h for g in groups if (h := holders.get((letter.source_stream, g, letter.message_id or "")))],
            groups_checked=groups,
        )


def _holder(group: str, row: dict[str, Any]) -> PendingHolder:
    return PendingHolder(group=group, consumer=text(row["consumer"]) or "", idle_ms=int(row["time_since_delivered"]),
                         deliveries=int(row["times_delivered"]))


@dataclass
class _Pair:
    letter: DeadLetter
    group: str
    attempt: Any
    score: Any


async def _round_three(
    redis: Any,
    settings: Settings,
    pairs: list[_Pair],
    unresolved: list[tuple[str, str, str]],
    holders: dict[tuple[str, str, str], PendingHolder],
) -> None:
    """PEL lookups one by one where a group's range was too full, and for the (letter, group)
    pairs with anything: base key, last error (byte-capped) and lock TTL."""
    if not pairs and not unresolved:
        return
    conv, max_bytes = settings.conventions, settings.limits.payload_max_bytes
    pipe = redis.pipeline(transaction=False)
    for source, group, mid in unresolved:
        pipe.xpending_range(source, group, mid, mid, 1)
    for pair in pairs:
        mid = pair.letter.message_id or ""
        pipe.exists(retry_key(conv, pair.group, mid))
        pipe.getrange(retry_last_error_key(conv, pair.group, mid), 0, max_bytes)  # inclusive: 1 byte more shows a cut
        pipe.pttl(idempotency_key(conv, pair.group, mid))
    answers = iter(await pipe.execute(raise_on_error=False))
    for source, group, mid in unresolved:
        rows = _value(next(answers)) or []
        if rows:
            holders[(source, group, mid)] = _holder(group, rows[0])
    for pair in pairs:
        base_exists, last_error, pttl = (_value(next(answers)) for _ in range(3))
        mid = pair.letter.message_id or ""
        error_text, error_cut = capped(last_error or None, max_bytes)
        retry = RetryState(
            key=retry_key(conv, pair.group, mid),
            exists=bool(base_exists) or pair.attempt is not None or bool(last_error) or pair.score is not None,
            attempt=as_int(pair.attempt),
            last_error=error_text if last_error else None,
            last_error_truncated=error_cut if last_error else None,
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
            pair.letter.bookkeeping.append(GroupBookkeeping(group=pair.group, retry=retry, idempotency=lock,
                                                            last_error_truncated=error_cut))
