"""Which Redis the tools talk to, and what its stream commands can do.

Replies differ between Redis 6.2 and 7.x (``entries-read`` / ``lag`` in ``XINFO GROUPS``
from 7.0, ``inactive`` in ``XINFO CONSUMERS`` from 7.2). The tools detect those fields
in each reply rather than trusting the version; the version is used only for a command
whose *syntax* is missing on older servers (``XPENDING ... IDLE``: 6.2) and for the
doctor's report.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from server.errors import InvalidArgument, NotFound
from tools.streams.values import text

MIN_SUPPORTED = (6, 2, 0)


@dataclass(frozen=True)
class RedisServer:
    version: str
    version_tuple: tuple[int, int, int]

    @property
    def has_pending_idle_filter(self) -> bool:
        """``XPENDING key group IDLE ms ...`` (Redis 6.2)."""
        return self.version_tuple >= (6, 2, 0)

    @property
    def has_group_lag(self) -> bool:
        """``entries-read`` and ``lag`` in ``XINFO GROUPS`` (Redis 7.0)."""
        return self.version_tuple >= (7, 0, 0)

    @property
    def has_consumer_inactive(self) -> bool:
        """``inactive`` in ``XINFO CONSUMERS`` (Redis 7.2)."""
        return self.version_tuple >= (7, 2, 0)


def parse_version(raw: str) -> tuple[int, int, int]:
    numbers = [int(n) for n in re.findall(r"\d+", raw)[:3]]
    while len(numbers) < 3:
        numbers.append(0)
    return numbers[0], numbers[1], numbers[2]


def server_from_info(info: dict[str, Any]) -> RedisServer:
    """A :class:`RedisServer` from an ``INFO server`` reply."""
    raw = text(info.get("redis_version")) or "0.0.0"
    return RedisServer(version=raw, version_tuple=parse_version(raw))


def require_stream(key: str, key_type: bytes | str | None, what: str = "stream") -> None:
    """Raise unless ``TYPE key`` answered ``stream``: ``NotFound`` when absent, else ``InvalidArgument``."""
    kind = text(key_type) or "none"
    if kind == "none":
        raise NotFound(f"{what} '{key}' does not exist in this Redis database: list_streams shows the streams there")
    if kind != "stream":
        raise InvalidArgument(f"'{key}' is a Redis {kind}, not a stream: list_streams shows the streams")
