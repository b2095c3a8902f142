"""Opaque page cursors: where the next page starts, bound to the query that made it.

A cursor is ``c1.`` followed by URL-safe base64 of a small JSON object holding the
position (e.g. the last stream id returned: the next page starts strictly after it)
and a short fingerprint of the query arguments. Reusing a cursor with other arguments
is refused instead of silently skipping entries.
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

from server.errors import InvalidArgument

_PREFIX = "c1."
MAX_CURSOR_CHARS = 2048


def fingerprint(*parts: Any) -> str:
    """A short digest of the query arguments a cursor belongs to."""
    raw = json.dumps(parts, sort_keys=True, default=str).encode("utf-8")
    return hashlib.sha256(raw).hexdigest()[:12]


def encode_cursor(position: dict[str, Any], query: str) -> str:
    body = json.dumps({"p": position, "q": query}, separators=(",", ":"), sort_keys=True).encode("utf-8")
    return _PREFIX + base64.urlsafe_b64encode(body).decode("ascii").rstrip("=")


def decode_cursor(cursor: str, query: str) -> dict[str, Any]:
    """The position held by ``cursor``; ``InvalidArgument`` when malformed or made by another query."""
    bad = InvalidArgument(
        "cursor is not one this tool returned: pass the next_cursor of the previous page unchanged, "
        "or omit it to start from the beginning"
    )
    if len(cursor) > MAX_CURSOR_CHARS or not cursor.startswith(_PREFIX):
        raise bad
    body = cursor[len(_PREFIX) :]
    try:
        data = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    except (ValueError, TypeError):
        raise bad from None
    if not isinstance(data, dict) or not isinstance(data.get("p"), dict):
        raise bad
    if data.get("q") != query:
        raise InvalidArgument(
            "cursor belongs to a query with other arguments: repeat the same arguments with it, "
            "or omit the cursor to start a new listing"
        )
    return data["p"]
