"""``limit`` / ``offset`` paging of every list of an analyze_impact answer, with the totals kept.

The limit and offset are checked and each list is cut by :mod:`tools.paging` (its
:func:`~tools.paging.validate_window` and :func:`~tools.paging.window`); this module adds what is
analyze_impact's own: the ``direction`` check, its limit cap (500, ``None`` for every item), the
lists it pages, their ``totals`` and the note naming the lists that were cut.
"""

from __future__ import annotations

from server.errors import InvalidArgument
from tools.mesh_index.model import ImpactResult
from tools.paging import validate_window, window

DIRECTIONS = ("downstream", "upstream", "both")
MAX_LIMIT = 500
PAGED = ("producers", "consumers", "candidates", "routes", "followups", "upstream", "unresolved")


def page(result: ImpactResult, limit: int | None, offset: int) -> ImpactResult:
    """``result`` with each list cut to ``[offset, offset + limit)``; ``totals`` holds every list's full length."""
    result.totals = {name: len(getattr(result, name)) for name in PAGED}
    result.offset, result.limit = offset, limit
    if limit is None and not offset:
        return result
    for name in PAGED:
        setattr(result, name, window(getattr(result, name), limit, offset))
    cut = [f"{name} {len(getattr(result, name))}/{n}" for name, n in result.totals.items()
           if len(getattr(result, name)) < n]
    if cut:
        result.notes.append(f"page offset={offset} limit={limit}: " + ", ".join(cut)
                            + " (call again with another offset for the rest)")
    return result


def validate_page(direction: str, limit: int | None, offset: int) -> None:
    """Refuse a direction other than the three, a limit out of 1-500, a negative offset (a clear message each)."""
    if direction not in DIRECTIONS:
        raise InvalidArgument(f"direction must be one of {', '.join(DIRECTIONS)} (got {direction!r})")
    validate_window(limit, offset, MAX_LIMIT, limit_optional=True)
