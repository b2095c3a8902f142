"""Dead letters: the ``dlq_list`` pages.

One entry is parsed by :func:`tools.streams.records.parse_dlq_entry` (into a
:class:`~tools.streams.records.DeadLetter`), re-exported here for the callers that import it
from this module (:mod:`tools.remediation.plan_dlq`, the tests).

``dlq_list`` (:func:`list_dead_letters`) pages through one dead-letter stream or through
every ``*<dlq_suffix>`` stream found by a bounded ``SCAN ... TYPE stream``, filters by
event type and error substring, and joins each entry of the page with its retry
bookkeeping and with where the original message still is (:mod:`tools.streams.dlq_joins`).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from server.config import Settings
from server.connections import Connections
from server.errors import InvalidArgument, NotFound
from server.redis_routing import RedisSource, instances_holding, redis_source
from tools.streams.cursor import decode_cursor, encode_cursor, fingerprint
from tools.streams.dlq_joins import join_dead_letters
from tools.streams.ids import StreamId, parse_id_argument
from tools.streams.keys import check_key_name, dlq_key, glob_escape, is_dlq
from tools.streams.records import DeadLetter, parse_dlq_entry, parse_timestamp_ms  # noqa: F401 (re-exported)
from tools.streams.scan import bounded_scan
from tools.streams.values import text

MAX_FILTER_CHARS = 256


class DeadLetterPage(BaseModel):
    stream: str | None = Field(description="the stream asked for, or None for every dead-letter stream")
    dlq_streams: list[str] = Field(description="dead-letter streams this listing covers")
    scan_complete: bool = Field(description="False when the SCAN for dead-letter streams hit its iteration cap")
    type: str | None
    contains: str | None
    entries: list[DeadLetter]
    examined: int = Field(description="dead-letter entries read to fill this page (filters skip some)")
    next_cursor: str | None = Field(description="pass it back for the next page; None when nothing is left")

    redis_source: RedisSource | None = Field(default=None, description="the Redis instance this was read from")

    def summary_text(self) -> str:
        where = self.stream or f"{len(self.dlq_streams)} dead-letter stream(s)"
        lines = [f"{len(self.entries)} dead letter(s) from {where} on this page ({self.examined} read)"]
        if not self.scan_complete:
            lines.append("  (the SCAN for dead-letter streams stopped at its iteration cap: some may be missing)")
        for d in self.entries[:20]:
            err = (d.error or "").splitlines()[0][:100] if d.error else "-"
            where_now = ""
            if d.original is not None:
                held = ", ".join(f"{p.group}/{p.consumer}" for p in d.original.pending_in)
                where_now = " original in stream" if d.original.in_stream else " original gone"
                where_now += f", pending in {held}" if held else ""
            attempts = [b.retry.attempt for b in d.bookkeeping if b.retry.attempt is not None]
            lines.append(
                f"  {d.dlq_stream} {d.dlq_id}: message {d.message_id}"
                f"{f' event {d.event_id}' if d.event_id else ''} type {d.event_type or '-'}"
                f"{f' attempts {max(attempts)}' if attempts else ''}{where_now}; error: {err}"
            )
        lines.append("more: pass next_cursor" if self.next_cursor else "no more")
        if self.redis_source is not None:
            lines.append(self.redis_source.line())
        return "\n".join(lines)


async def list_dead_letters(
    connections: Connections,
    settings: Settings,
    *,
    stream: str | None = None,
    count: int = 50,
    cursor: str | None = None,
    type: str | None = None,
    contains: str | None = None,
) -> DeadLetterPage:
    """A page of parsed, joined dead letters; see the module docstring."""
    limits = settings.limits
    if stream is not None:
        check_key_name(stream, "stream")
    for name, value in (("type", type), ("contains", contains)):
        if value is not None and not 1 <= len(value) <= MAX_FILTER_CHARS:
            raise InvalidArgument(f"{name} must be 1 to {MAX_FILTER_CHARS} characters: omit it to keep every entry")
    if not 1 <= count <= limits.max_count:
        raise InvalidArgument(f"count must be between 1 and {limits.max_count} ([limits] max_count), got {count}")
    query = fingerprint("dlq_list", stream, type, contains)
    position = decode_cursor(cursor, query) if cursor is not None else {}
    after = parse_id_argument(str(position["a"]), "cursor position") if position.get("a") else None
    start_key = str(position.get("k", ""))

    instance = _dlq_instance(connections, settings, stream)
    redis = connections.redis_reader(instance)
    async with connections.redis_errors(instance):
        dlqs, complete = await _dead_letter_streams(redis, settings, stream)
        page, examined, resume = await _fill_page(redis, settings, dlqs, start_key, after, count, type, contains)
        await join_dead_letters(redis, settings, page)
    next_cursor = encode_cursor({"k": resume[0], "a": resume[1]}, query) if resume else None
    return DeadLetterPage(redis_source=redis_source(settings, instance), stream=stream, dlq_streams=dlqs,
                          scan_complete=complete, type=type, contains=contains, entries=page, examined=examined,
                          next_cursor=next_cursor)


def _dlq_instance(connections: Connections, settings: Settings, stream: str | None) -> str:
    """The instance of ``stream``'s dead letters; without a stream, the only instance holding streams."""
    if stream is not None:
        return connections.redis_instance_for_stream(stream)
    holders = instances_holding(settings, "streams")
    if len(holders) > 1:
        raise InvalidArgument("dead letters may live on several Redis instances (" + ", ".join(holders) + "): "
                              "pass stream=... (list_streams shows each dead-letter stream with its instance)")
    return holders[0]


async def _dead_letter_streams(redis: Any, settings: Settings, stream: str | None) -> tuple[list[str], bool]:
    conv, limits = settings.conventions, settings.limits
    if stream is None:
        found = await bounded_scan(redis, match="*" + glob_escape(conv.dlq_suffix), type_="stream",
                                   count=limits.scan_count, max_iterations=limits.scan_max_iterations)
        return [k for k in found.keys if is_dlq(conv, k)], found.complete
    pipe = redis.pipeline(transaction=False)
    pipe.type(stream)
    pipe.type(dlq_key(conv, stream))
    own_type, dlq_type = (text(t) for t in await pipe.execute())
    if is_dlq(conv, stream) and own_type == "stream":
        return [stream], True
    if dlq_type == "stream":
        return [dlq_key(conv, stream)], True
    if own_type == "none" and dlq_type == "none":
        if is_dlq(conv, stream):
            raise NotFound(f"dead-letter stream '{stream}' does not exist: list_streams shows the streams")
        raise NotFound(f"neither stream '{stream}' nor its dead-letter stream '{dlq_key(conv, stream)}' exists: "
                       "list_streams shows the streams")
    if dlq_type not in ("none", "stream"):
        raise InvalidArgument(f"'{dlq_key(conv, stream)}' is a Redis {dlq_type}, not a stream")
    if own_type not in ("none", "stream"):
        raise InvalidArgument(f"'{stream}' is a Redis {own_type}, not a stream: list_streams shows the streams")
    return [], True


async def _fill_page(
    redis: Any,
    settings: Settings,
    dlqs: list[str],
    start_key: str,
    after: StreamId | None,
    count: int,
    event_type: str | None,
    contains: str | None,
) -> tuple[list[DeadLetter], int, tuple[str, str] | None]:
    """Read dead-letter streams in name order from the cursor; returns (page, examined, resume position).

    Filters run on the full entry (the event type is read from the whole payload even when
    it is over the cap); the page holds entries parsed under the byte cap. At
    most ``[limits] scan_max_iterations`` reads happen per call; when they run out the
    resume position is the last entry read, so the next page continues from there. Reads
    start at ``count + 1`` entries; with a filter each next read doubles, up to ``max_count``.
    """
    conv, limits = settings.conventions, settings.limits
    needle = contains.casefold() if contains else None
    filtering = event_type is not None or needle is not None
    batch = count + 1
    largest = max(limits.max_count, count + 1)
    page: list[DeadLetter] = []
    examined = 0
    reads = 0
    for key in [k for k in dlqs if k >= start_key]:
        position = after if key == start_key else None
        while True:
            if reads >= limits.scan_max_iterations:
                return page, examined, (key, str(position) if position is not None else "")
            reads += 1
            start = "-" if position is None else str(position.successor())
            rows = await redis.xrange(key, start, "+", count=batch)
            for raw_id, fields in rows:
                entry_id = text(raw_id) or ""
                if len(page) == count:
                    return page, examined, (page[-1].dlq_stream, page[-1].dlq_id)
                examined += 1
                position = StreamId.parse(entry_id)
                shown = parse_dlq_entry(fields, dlq_stream=key, dlq_id=entry_id, conventions=conv,
                                        max_bytes=limits.payload_max_bytes)
                if filtering and (shown.error_truncated or shown.fields_truncated):  # filters need the whole text
                    full = parse_dlq_entry(fields, dlq_stream=key, dlq_id=entry_id, conventions=conv)
                    keep = _matches(full, event_type, needle)
                else:
                    keep = _matches(shown, event_type, needle)
                if keep:
                    page.append(shown)
            if len(rows) < batch:
                break
            if filtering:
                batch = min(largest, batch * 2)
    return page, examined, None


def _matches(entry: DeadLetter, event_type: str | None, needle: str | None) -> bool:
    if event_type is not None and entry.event_type != event_type:
        return False
    return needle is None or needle in (entry.error or "").casefold()
