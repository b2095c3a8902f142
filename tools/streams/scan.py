"""Bounded ``SCAN``: the only way these tools enumerate keys (never ``KEYS``).

A scan walks the keyspace in steps of ``COUNT`` keys and stops after at most
``max_iterations`` steps, so its cost is bounded whatever the size of the database. The
answer says whether the walk finished (``complete``); an incomplete walk may miss keys
and the caller reports that rather than pretending the list is whole.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tools.streams.values import text


@dataclass(frozen=True)
class ScanOutcome:
    keys: list[str]
    """Distinct keys found (or what ``select`` kept of them), sorted."""
    complete: bool
    """The SCAN cursor came back to 0: every key that existed throughout the walk was seen."""
    iterations: int


async def bounded_scan(
    redis: Any,
    *,
    match: str,
    type_: str | None,
    count: int,
    max_iterations: int,
    select: Callable[[str], str | None] | None = None,
) -> ScanOutcome:
    """``SCAN 0 MATCH match [TYPE type_] COUNT count`` repeated at most ``max_iterations`` times.

    ``select`` maps each key to what is kept (``None`` drops it), so a caller that needs
    a projection of the keys (e.g. queue names) does not hold every key in memory.
    """
    cursor = 0
    seen: set[str] = set()
    iterations = 0
    while iterations < max_iterations:
        cursor, batch = await redis.scan(cursor=cursor, match=match, count=count, _type=type_)
        iterations += 1
        for raw in batch:
            key = text(raw) or ""
            kept = key if select is None else select(key)
            if kept is not None:
                seen.add(kept)
        if int(cursor) == 0:
            return ScanOutcome(sorted(seen), True, iterations)
    return ScanOutcome(sorted(seen), False, iterations)
