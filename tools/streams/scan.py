"""Bounded ``SCAN``: the only way these tools enumerate keys (never ``KEYS``).

A scan walks the keyspace in steps of ``COUNT`` keys and stops after at most
``max_iterations`` steps, so its cost is bounded whatever the size of the database. The
answer says whether the walk finished (``complete``); an incomplete walk may miss keys
and the caller reports that rather than pretending the list is whole.

On a Redis Cluster every primary is scanned (each with its own cursor and its own
``max_iterations`` budget): keys live on the node owning their slot, so a scan of one
node would miss the others. ``complete`` is true only when every primary's walk finished.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from server.redis_clients import scan_targets
from tools.streams.values import text


@dataclass(frozen=True)
class ScanOutcome:
    keys: list[str]
    """Distinct keys found (or what ``select`` kept of them), sorted."""
    complete: bool
    """The SCAN cursor came back to 0: every key that existed throughout the walk was seen."""
    iterations: int
    nodes: int = 1
    """Servers scanned (every primary of a cluster)."""


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
    seen: set[str] = set()
    iterations = 0
    complete = True
    targets = await scan_targets(redis)
    for _name, node in targets:
        cursor = 0
        node_iterations = 0
        extra = {} if node is None else {"target_nodes": node}
        while True:
            if node_iterations >= max_iterations:
                complete = False
                break
            reply_cursor, batch = await redis.scan(cursor=cursor, match=match, count=count, _type=type_, **extra)
            cursor = int(next(iter(reply_cursor.values())) if isinstance(reply_cursor, dict) else reply_cursor)
            node_iterations += 1
            for raw in batch:
                key = text(raw) or ""
                kept = key if select is None else select(key)
                if kept is not None:
                    seen.add(kept)
            if cursor == 0:
                break
        iterations += node_iterations
    return ScanOutcome(sorted(seen), complete, iterations, len(targets))
