"""``list_pending``: a page of a consumer group's pending entries list (PEL), with messages.

``XPENDING <stream> <group> [IDLE min_idle_ms] <start> + <count+1> [consumer]`` (the
extended form, Redis 6.2+ for ``IDLE``), pages ordered by entry id. The opaque cursor
holds the last id returned; the next page starts strictly after it, so entries acked or
claimed between pages never shift the pages. Each entry is joined with its message
(``XRANGE id id``, fields cut at ``[limits] payload_max_bytes``) when it still exists;
a missing message is ``deleted`` (XDEL) when its id is not older than the stream's first
entry; an older one is ``trimmed`` only when ``XINFO STREAM`` proves it
(:mod:`tools.streams.trim_evidence`), else ``deleted_or_trimmed``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from server.config import Settings
from server.connections import Connections
from server.errors import InvalidArgument, MeshError, NotFound
from server.redis_routing import RedisSource, redis_source
from tools.arg_bounds import MAX_IDLE_MS
from tools.streams.cursor import decode_cursor, encode_cursor, fingerprint
from tools.streams.ids import StreamId, parse_id_argument, try_parse
from tools.streams.keys import check_key_name
from tools.streams.node_reads import server_facts
from tools.streams.server_features import require_stream, server_from_info
from tools.streams.trim_evidence import trim_evidence
from tools.streams.values import capped_fields, reply_or_raise, text


class PendingEntry(BaseModel):
    id: str
    consumer: str
    idle_ms: int = Field(description="ms since the entry was last delivered (to this consumer)")
    deliveries: int = Field(description="times the entry was delivered (reads and claims)")
    message_exists: bool
    gone_reason: Literal["trimmed", "deleted", "deleted_or_trimmed"] | None = Field(
        default=None, description="why the message is missing: trimmed (proven by XINFO STREAM), deleted (XDEL: "
        "not older than the first entry), or deleted_or_trimmed (older, but trimming is not proven)"
    )
    fields: dict[str, str] | None = Field(
        default=None,
        description="the message's fields, when it exists; names and values share [limits] payload_max_bytes",
    )
    fields_truncated: bool = Field(
        default=False, description="a name or value was cut, or the fields after the byte cap were left out"
    )


class PendingPage(BaseModel):
    stream: str
    group: str
    consumer: str | None
    min_idle_ms: int
    group_pending: int = Field(description="pending entries of the whole group (all consumers, any idle time)")
    entries: list[PendingEntry]
    next_cursor: str | None = Field(description="pass it back to get the next page; None on the last page")

    redis_source: RedisSource | None = Field(default=None, description="the Redis instance this was read from")

    def summary_text(self) -> str:
        who = f" of consumer {self.consumer}" if self.consumer else ""
        idle = f" idle >= {self.min_idle_ms} ms" if self.min_idle_ms else ""
        head = (
            f"{self.stream} / {self.group}: {len(self.entries)} pending entries{who}{idle} on this page "
            f"({self.group_pending} pending in the group)"
        )
        lines = [head]
        for e in self.entries[:20]:
            state = "message present" if e.message_exists else f"message {e.gone_reason}"
            lines.append(f"  {e.id} {e.consumer} idle {e.idle_ms} ms, {e.deliveries} deliveries, {state}")
        if len(self.entries) > 20:
            lines.append(f"  ... {len(self.entries) - 20} more in the structured content")
        lines.append("more: pass next_cursor" if self.next_cursor else "last page")
        if self.redis_source is not None:
            lines.append(self.redis_source.line())
        return "\n".join(lines)


async def list_pending(
    connections: Connections,
    settings: Settings,
    stream: str,
    group: str,
    *,
    consumer: str | None = None,
    min_idle_ms: int = 0,
    count: int = 50,
    cursor: str | None = None,
) -> PendingPage:
    """One page of ``group``'s pending entries on ``stream``; see the module docstring."""
    check_key_name(stream, "stream")
    check_key_name(group, "group")
    if consumer is not None:
        check_key_name(consumer, "consumer")
    limits = settings.limits
    if not 1 <= count <= limits.max_count:
        raise InvalidArgument(f"count must be between 1 and {limits.max_count} ([limits] max_count), got {count}")
    if not 0 <= min_idle_ms <= MAX_IDLE_MS:
        raise InvalidArgument(f"min_idle_ms must be between 0 and {MAX_IDLE_MS}, got {min_idle_ms}")
    query = fingerprint("list_pending", stream, group, consumer, min_idle_ms)
    start = "-"
    if cursor is not None:
        position = decode_cursor(cursor, query)
        after = parse_id_argument(str(position.get("after", "")), "cursor position")
        start = str(after.successor())

    instance = connections.redis_instance_for_stream(stream)
    redis = connections.redis_reader(instance)
    async with connections.redis_errors(instance):
        pipe = redis.pipeline(transaction=False)
        pipe.type(stream)
        pipe.xinfo_groups(stream)
        pipe.xrange(stream, "-", "+", count=1)
        pipe.xinfo_stream(stream)
        key_type, groups_reply, first_reply, sinfo_reply = await pipe.execute(raise_on_error=False)
        require_stream(stream, reply_or_raise(key_type))
        info, _ = await server_facts(redis, stream)
        server = server_from_info(info)
        groups = {text(g["name"]) or "": g for g in reply_or_raise(groups_reply)}
        if group not in groups:
            names = ", ".join(sorted(groups)[:20]) or "none"
            raise NotFound(f"stream '{stream}' has no consumer group '{group}' (its groups: {names})")
        if min_idle_ms and not server.has_pending_idle_filter:
            raise MeshError(f"min_idle_ms needs Redis 6.2 or later (XPENDING IDLE); this server is {server.version}")
        first_entries = reply_or_raise(first_reply)
        first_id = try_parse(first_entries[0][0]) if first_entries else None
        sinfo = reply_or_raise(sinfo_reply)

        pipe = redis.pipeline(transaction=False)
        if consumer is not None:
            pipe.xinfo_consumers(stream, group)
        pipe.xpending_range(stream, group, start, "+", count + 1, consumername=consumer,
                            idle=min_idle_ms if min_idle_ms else None)
        replies = await pipe.execute()
        if consumer is not None:
            known = {text(c["name"]) for c in replies[0]}
            if consumer not in known:
                names = ", ".join(sorted(n for n in known if n)[:20]) or "none"
                raise NotFound(f"group '{group}' of stream '{stream}' has no consumer '{consumer}' "
                               f"(its consumers: {names})")
        rows = replies[-1]
        page, more = rows[:count], len(rows) > count

        pipe = redis.pipeline(transaction=False)
        for row in page:
            entry_id = text(row["message_id"]) or ""
            pipe.xrange(stream, entry_id, entry_id, count=1)
        messages = await pipe.execute() if page else []

    maxlen = settings.conventions.stream_maxlen
    entries = [_entry(row, msg, first_id, limits.payload_max_bytes, sinfo, maxlen)
               for row, msg in zip(page, messages, strict=True)]
    next_cursor = encode_cursor({"after": entries[-1].id}, query) if more and entries else None
    return PendingPage(
        redis_source=redis_source(settings, instance),
        stream=stream,
        group=group,
        consumer=consumer,
        min_idle_ms=min_idle_ms,
        group_pending=int(groups[group].get("pending", 0)),
        entries=entries,
        next_cursor=next_cursor,
    )


def _entry(row: dict[str, Any], message: list[Any], first_id: StreamId | None, max_bytes: int,
           sinfo: dict[str, Any] | None = None, maxlen: int = 0) -> PendingEntry:
    entry_id = text(row["message_id"]) or ""
    base = {
        "id": entry_id,
        "consumer": text(row["consumer"]) or "",
        "idle_ms": int(row["time_since_delivered"]),
        "deliveries": int(row["times_delivered"]),
    }
    if message:
        fields, truncated = capped_fields(message[0][1], max_bytes)
        return PendingEntry(**base, message_exists=True, fields=fields, fields_truncated=truncated)
    parsed = try_parse(entry_id)
    older = first_id is None or (parsed is not None and parsed < first_id)
    if not older:
        return PendingEntry(**base, message_exists=False, gone_reason="deleted")
    proven = sinfo is None or trim_evidence(sinfo, maxlen, parsed).trimmed
    return PendingEntry(**base, message_exists=False, gone_reason="trimmed" if proven else "deleted_or_trimmed")
