"""Small, bounded Redis reads used to plan a remediation and to re-check it before applying.

Every read is a single-key command (XRANGE with COUNT, XPENDING for one id, XINFO, TYPE,
GET, DUMP, PTTL, ZSCORE, HGETALL) — never XREADGROUP, never KEYS. Values are turned into
JSON-ready text (UTF-8, or ``{"base64": ...}`` for other bytes) and digested, so a plan
can say "this exact entry/key" and the executor can tell whether it changed since.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any

from pydantic import BaseModel

from server.approval.tokens import canonical_json
from tools.outbox.delivery import stream_groups


def text(value: Any) -> str:
    """Bytes from Redis as text (invalid UTF-8 replaced: for display and ids only)."""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)


def jsonable(value: bytes | str) -> str | dict[str, str]:
    """Exact, JSON-ready form of a Redis value: the UTF-8 text, or ``{"base64": ...}``."""
    if isinstance(value, str):
        return value
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(value).decode("ascii")}


def digest(value: Any) -> str:
    return hashlib.sha256(canonical_json(value)).hexdigest()


def fields_pairs(fields: dict[bytes, bytes]) -> list[list[Any]]:
    """Stream entry fields, in their order, as JSON-ready pairs."""
    return [[jsonable(k), jsonable(v)] for k, v in fields.items()]


async def read_entry(redis: Any, key: str, entry_id: str) -> dict[bytes, bytes] | None:
    """The fields of entry ``entry_id`` of stream ``key``, or None when absent."""
    rows = await redis.xrange(key, min=entry_id, max=entry_id, count=1)
    if not rows:
        return None
    return rows[0][1]


async def entry_digest(redis: Any, key: str, entry_id: str) -> str | None:
    fields = await read_entry(redis, key, entry_id)
    return None if fields is None else digest(fields_pairs(fields))


class KeySnapshot(BaseModel):
    key: str
    type: str
    value: Any = None
    dump_base64: str | None = None
    pttl_ms: int | None = None
    digest: str


async def key_snapshot(redis: Any, key: str) -> KeySnapshot | None:
    """Type, readable value (strings; DUMP otherwise), TTL and digest of ``key``; None when absent."""
    kind = text(await redis.type(key))
    if kind == "none":
        return None
    value: Any = None
    dumped: bytes | None = await redis.dump(key)
    if dumped is None:
        return None
    if kind == "string":
        raw = await redis.get(key)
        if raw is None:
            return None
        value = jsonable(raw)
        content: Any = value
    else:
        content = base64.b64encode(dumped).decode("ascii")
    pttl = await redis.pttl(key)
    return KeySnapshot(
        key=key,
        type=kind,
        value=value,
        dump_base64=base64.b64encode(dumped).decode("ascii"),
        pttl_ms=int(pttl) if pttl is not None and pttl >= 0 else None,
        digest=digest({"type": kind, "content": content}),
    )


class PendingInfo(BaseModel):
    id: str
    consumer: str
    idle_ms: int
    deliveries: int


async def pending_of(redis: Any, stream: str, group: str, entry_id: str) -> PendingInfo | None:
    rows = await redis.xpending_range(stream, group, min=entry_id, max=entry_id, count=1)
    if not rows:
        return None
    row = rows[0]
    return PendingInfo(
        id=text(row["message_id"]),
        consumer=text(row["consumer"]),
        idle_ms=int(row["time_since_delivered"]),
        deliveries=int(row["times_delivered"]),
    )


async def pending_range(
    redis: Any, stream: str, group: str, *, count: int, min_idle_ms: int = 0, consumer: str | None = None,
    after: str | None = None,
) -> list[PendingInfo]:
    """One ``XPENDING`` page of at most ``count`` entries, from the start or after the entry id ``after``."""
    rows = await redis.xpending_range(
        stream, group, min=f"({after}" if after else "-", max="+", count=count, consumername=consumer,
        idle=min_idle_ms or None,
    )
    return [
        PendingInfo(
            id=text(r["message_id"]),
            consumer=text(r["consumer"]),
            idle_ms=int(r["time_since_delivered"]),
            deliveries=int(r["times_delivered"]),
        )
        for r in rows
    ]


class ConsumerInfo(BaseModel):
    name: str
    pending: int
    idle_ms: int


async def consumers_of(redis: Any, stream: str, group: str) -> list[ConsumerInfo]:
    """``XINFO CONSUMERS``; ``idle_ms`` is the time since the consumer last read or claimed."""
    out = []
    for c in await redis.xinfo_consumers(stream, group):
        inactive = c.get("inactive")  # Redis >= 7.2: since the last successful read; -1 if it never read
        idle = int(inactive) if inactive is not None and int(inactive) >= 0 else int(c.get("idle", 0) or 0)
        out.append(ConsumerInfo(name=text(c["name"]), pending=int(c.get("pending", 0)), idle_ms=idle))
    return out


async def groups_of(redis: Any, stream: str) -> list[dict[str, Any]]:
    """``XINFO GROUPS`` (:func:`tools.outbox.delivery.stream_groups`) with names as text; empty when no stream."""
    groups = await stream_groups(redis, stream)
    return [
        {**g, "name": text(g["name"]), "last-delivered-id": text(g.get("last-delivered-id", b"0-0"))} for g in groups
    ]


def hash_digest(fields: dict[bytes, bytes]) -> str:
    return digest(sorted(([jsonable(k), jsonable(v)] for k, v in fields.items()), key=canonical_json))
