"""What Redis holds about one stream message, read the same way by every tool.

The one place both :mod:`tools.outbox` (``trace_event``'s delivery) and :mod:`tools.streams`
(``dlq_list``) read stream records: a dead-letter entry (:func:`parse_dlq_entry` turns the
fields of one ``<stream><dlq_suffix>`` entry into a :class:`DeadLetter`, field names from
``[conventions]``; it never raises on odd content, and with ``max_bytes=None`` nothing is
cut, which is what a replay needs), the retry bookkeeping of a group (:class:`RetryState`)
and the idempotency lock (:class:`IdempotencyLock`), and where a dead-lettered message
still is (:class:`OriginalState`). Models and parsing only: no Redis call here.
:mod:`tools.streams.dlq` and :mod:`tools.outbox.delivery` re-export the names they used
to define.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from server.config import Conventions
from tools.streams.keys import source_of_dlq
from tools.streams.values import capped, capped_fields, read_json, text

_MAX_EPOCH_MS = 2**53  # beyond this a "timestamp" is no date (and not exact as a JSON number)


class RetryState(BaseModel):
    """Retry bookkeeping of one group for one message (absent keys give None)."""

    key: str = Field(description="retry:post-processor:<group>:<messageId> (base key)")
    exists: bool = Field(description="any of the retry keys exists")
    attempt: int | None = None
    last_error: str | None = Field(default=None, description="the :lastError key, cut at [limits] payload_max_bytes")
    last_error_truncated: bool | None = Field(
        default=None,
        description="last_error was cut at the byte cap; None where the reader does not say (dlq_list: see "
        "bookkeeping[].last_error_truncated)",
    )
    next_retry_at_ms: int | None = Field(default=None, description="score in the retry queue sorted set")
    retry_queue_key: str


class IdempotencyLock(BaseModel):
    key: str
    exists: bool
    ttl_s: int | None = Field(default=None, description="seconds left; None when absent or without expiry")


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
    last_error_truncated: bool = Field(default=False, description="retry.last_error was cut at the byte cap")
    idempotency: IdempotencyLock


class DeadLetter(BaseModel):
    """One dead-letter entry, parsed. Join fields are filled by ``dlq_list`` only."""

    dlq_stream: str
    dlq_id: str = Field(description="the entry id in the dead-letter stream")
    source_stream: str
    message_id: str | None = Field(description="messageId: the id the message had in the source stream")
    error: str | None
    error_truncated: bool = False
    payload: Any = Field(default=None, description="the message as parsed JSON (None when not JSON or over the cap)")
    payload_preview: str | None = Field(default=None, description="the payload text when it is not shown parsed")
    payload_valid_json: bool = False
    payload_truncated: bool = False
    payload_bytes: int = 0
    event_type: str | None = Field(default=None, description="the payload's event type field")
    event_id: str | None = Field(default=None, description="the payload's event id field (event_queue id)")
    timestamp: str | None = Field(description="the timestamp field as written")
    dead_at_ms: int | None = Field(default=None, description="timestamp as epoch ms when it parses")
    extra_fields: dict[str, str] = Field(
        default_factory=dict, description="fields beyond the four known ones (names and values share the byte cap)"
    )
    fields_truncated: bool = Field(
        default=False,
        description="messageId, timestamp, event type or id, or an extra field was cut at the byte cap "
        "(or extra fields past it left out)",
    )
    original: OriginalState | None = None
    bookkeeping: list[GroupBookkeeping] = Field(
        default_factory=list, description="per group holding any retry key or idempotency lock for messageId"
    )


def parse_timestamp_ms(value: str | None) -> int | None:
    """Epoch ms from ``1700000000000`` (ms), ``1700000000`` (s) or an ISO 8601 date; else None.

    Never raises: ``inf``, ``nan``, negative or absurdly large numbers give None.
    """
    if not value:
        return None
    raw = value.strip()
    try:
        number = float(raw)
    except ValueError:
        number = None
    if number is not None:
        if not math.isfinite(number) or not 0 <= number < _MAX_EPOCH_MS:
            return None
        return int(number * 1000) if number < 100_000_000_000 else int(number)
    try:
        return int(datetime.fromisoformat(raw.replace("Z", "+00:00")).timestamp() * 1000)
    except (ValueError, OverflowError, OSError):
        return None


def parse_dlq_entry(
    fields: Mapping[bytes | str, bytes | str],
    *,
    dlq_stream: str = "",
    dlq_id: str = "",
    conventions: Conventions | None = None,
    max_bytes: int | None = None,
) -> DeadLetter:
    """The dead letter held by ``fields`` (one entry of a dead-letter stream).

    ``max_bytes`` caps every text taken from the entry: the error and the payload (each
    with its own flag), and messageId, timestamp, the event type and id and the extra
    fields (``fields_truncated``); ``None``: no cap. The event type and id are read from
    the full payload whatever the cap, and only when they are a string or a number.
    """
    conv = conventions or Conventions()
    values = {text(k) or "": v for k, v in fields.items()}
    known = {conv.dlq_message_id_field, conv.dlq_error_field, conv.dlq_payload_field, conv.dlq_timestamp_field}
    error, error_cut = capped(values.get(conv.dlq_error_field), max_bytes)
    payload = read_json(values.get(conv.dlq_payload_field), max_bytes)
    document = payload.document if isinstance(payload.document, dict) else {}
    message_id, id_cut = capped(values.get(conv.dlq_message_id_field), max_bytes)
    timestamp, time_cut = capped(values.get(conv.dlq_timestamp_field), max_bytes)
    event_type, type_cut = capped(_scalar(document.get(conv.event_type_field)), max_bytes)
    event_id, event_id_cut = capped(_scalar(document.get(conv.event_id_field)), max_bytes)
    extra, extra_cut = capped_fields({k: v for k, v in values.items() if k not in known}, max_bytes)
    return DeadLetter(
        dlq_stream=dlq_stream,
        dlq_id=dlq_id,
        source_stream=source_of_dlq(conv, dlq_stream),
        message_id=message_id,
        error=error,
        error_truncated=error_cut,
        payload=payload.value,
        payload_preview=payload.preview,
        payload_valid_json=payload.valid_json,
        payload_truncated=payload.truncated,
        payload_bytes=payload.size_bytes,
        event_type=event_type,
        event_id=event_id,
        timestamp=timestamp,
        dead_at_ms=parse_timestamp_ms(timestamp) if not time_cut else None,
        extra_fields=extra,
        fields_truncated=id_cut or time_cut or type_cut or event_id_cut or extra_cut,
    )


def _scalar(value: Any) -> str | None:
    """A JSON string or number as text; ``None`` for anything else (an object is no event type)."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return None
    return str(value)
