"""Redis stream entry ids (``<milliseconds>-<sequence>``): parse, order, step.

Ids compare as ``(ms, seq)`` pairs, never as strings (``"9-0" > "10-0"`` as text).
:meth:`StreamId.successor` gives the smallest id after an id, which is how pages
continue from an exclusive cursor on every Redis version (the ``(`` exclusive range
prefix only exists from Redis 6.2 on).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from server.errors import InvalidArgument

_ID_RE = re.compile(r"^(\d{1,20})-(\d{1,20})$")
_MAX_U64 = 2**64 - 1


@dataclass(frozen=True, order=True)
class StreamId:
    """One stream entry id; orders like Redis orders entries."""

    ms: int
    seq: int

    @classmethod
    def parse(cls, value: str | bytes) -> StreamId:
        """``"1700000000000-3"`` -> ``StreamId(1700000000000, 3)``; a bare ``"5"`` means ``5-0``.

        Raises ``ValueError`` when ``value`` is not an id.
        """
        text = value.decode("ascii", errors="replace") if isinstance(value, bytes) else value
        if text.isdigit():
            text = f"{text}-0"
        match = _ID_RE.match(text)
        if match is None:
            raise ValueError(f"not a stream id: {text!r}")
        ms, seq = int(match.group(1)), int(match.group(2))
        if ms > _MAX_U64 or seq > _MAX_U64:
            raise ValueError(f"stream id out of range: {text!r}")
        return cls(ms, seq)

    def successor(self) -> StreamId:
        """The smallest id greater than this one."""
        if self.seq < _MAX_U64:
            return StreamId(self.ms, self.seq + 1)
        return StreamId(self.ms + 1, 0)

    def predecessor(self) -> StreamId | None:
        """The greatest id smaller than this one; ``None`` for ``0-0``."""
        if self.seq > 0:
            return StreamId(self.ms, self.seq - 1)
        if self.ms > 0:
            return StreamId(self.ms - 1, _MAX_U64)
        return None

    def __str__(self) -> str:
        return f"{self.ms}-{self.seq}"


def parse_id_argument(value: str, what: str) -> StreamId:
    """A stream id given by a user; ``InvalidArgument`` naming ``what`` when malformed."""
    try:
        return StreamId.parse(value.strip())
    except ValueError:
        raise InvalidArgument(
            f"{what} {value!r} is not a stream id: use the form <milliseconds>-<sequence>, e.g. 1700000000000-0"
        ) from None


def try_parse(value: str | bytes | None) -> StreamId | None:
    """The id, or ``None`` for ``None`` / malformed text (as Redis replies sometimes hold)."""
    if value is None:
        return None
    try:
        return StreamId.parse(value)
    except ValueError:
        return None
