"""Turning raw Redis values into bounded, JSON-ready text.

Redis hands back bytes (the client runs with ``decode_responses=False`` so binary
values survive). Everything shown to a user goes through these helpers: decoded as
UTF-8 with replacement characters, cut at a byte budget on a character boundary, with
a flag saying whether something was cut.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


def text(value: bytes | str | int | float | None) -> str | None:
    """``value`` as text (UTF-8, invalid bytes replaced); ``None`` stays ``None``."""
    if value is None:
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)


def as_int(value: bytes | str | int | float | None) -> int | None:
    """An integer from a Redis reply value, or ``None`` when absent or not a number."""
    if value is None:
        return None
    if isinstance(value, int):
        return value
    raw = text(value)
    try:
        return int(float(raw)) if raw else None
    except (TypeError, ValueError):
        return None


def reply_or_raise(reply: Any) -> Any:
    """A pipeline answer (``execute(raise_on_error=False)``), re-raised when it is an error.

    Raised inside ``Connections.redis_errors()``, the error becomes a clear tool error.
    """
    if isinstance(reply, Exception):
        raise reply
    return reply


def redis_time_ms(reply: Any) -> int:
    """Epoch milliseconds from a ``TIME`` reply ``(seconds, microseconds)``: ages use the Redis clock."""
    seconds, micros = reply
    return int(seconds) * 1000 + int(micros) // 1000


def capped(value: bytes | str | None, max_bytes: int | None) -> tuple[str | None, bool]:
    """``value`` decoded and cut to at most ``max_bytes`` UTF-8 bytes; ``(text, truncated)``.

    The cap applies to the decoded text (an invalid byte becomes a 3-byte replacement
    character); ``max_bytes=None`` means no cap.
    """
    if value is None:
        return None, False
    decoded = value.decode("utf-8", errors="replace") if isinstance(value, bytes) else value
    raw = decoded.encode("utf-8", errors="replace")
    if max_bytes is None or len(raw) <= max_bytes:
        return raw.decode("utf-8"), False
    return raw[:max_bytes].decode("utf-8", errors="ignore"), True


def capped_fields(fields: Mapping[bytes | str, bytes | str], max_bytes: int | None) -> tuple[dict[str, str], bool]:
    """Stream entry fields as ``{name: value}``, names and values sharing one byte budget; ``(fields, truncated)``.

    Fields are kept in entry order, values cut to what is left of the budget. Names are
    never cut: from the first field whose name does not fit in what is left, the fields
    are left out. So an entry with a huge name, a huge value or thousands of fields fits
    in ``max_bytes`` (``None``: no cap), and ``truncated`` says something was cut or left out.
    """
    out: dict[str, str] = {}
    budget = max_bytes
    truncated = False
    for name, value in fields.items():
        key = text(name) or ""
        if budget is not None:
            budget -= len(key.encode("utf-8"))
            if budget < 0:
                return out, True
        piece, cut = capped(value, budget)
        out[key] = piece or ""
        truncated = truncated or cut
        if budget is not None:
            budget -= len((piece or "").encode("utf-8"))
    return out, truncated


@dataclass(frozen=True)
class JsonValue:
    """A JSON text read under a byte cap.

    ``value`` is the parsed document when the text is valid JSON within the cap; otherwise
    ``None`` and ``preview`` holds the (cut) text. ``document`` is the full parsed document
    whatever its size (for callers that need a field of it), ``None`` when not JSON.
    """

    value: Any
    preview: str | None
    truncated: bool
    valid_json: bool
    size_bytes: int
    document: Any


def read_json(raw: bytes | str | None, max_bytes: int | None) -> JsonValue:
    """Parse ``raw`` as JSON; keep the parsed value only when it fits in ``max_bytes``."""
    if raw is None:
        return JsonValue(None, None, False, False, 0, None)
    data = raw if isinstance(raw, bytes) else raw.encode("utf-8", errors="replace")
    try:
        document = json.loads(data)
        valid = True
    except ValueError:
        document, valid = None, False
    fits = max_bytes is None or len(data) <= max_bytes
    if valid and fits:
        return JsonValue(document, None, False, True, len(data), document)
    preview, cut = capped(data, max_bytes)
    return JsonValue(None, preview, cut, valid, len(data), document)
