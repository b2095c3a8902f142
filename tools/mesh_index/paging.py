"""``limit`` / ``offset`` paging of every list of an analyze_impact answer, with the totals kept."""

from __future__ import annotations

from server.errors import InvalidArgument
from tools.mesh_index.model import ImpactResult

DIRECTIONS = ("downstream", "upstream", "both")
MAX_LIMIT = 500
PAGED = ("producers", "consumers", "candidates", "routes", "followups", "upstream", "unresolved")


def page(result: ImpactResult, limit: int | None, offset: int) -> ImpactResult:
    """``result`` with each list cut to ``[offset, offset + limit)``; ``totals`` holds every list's full length."""
    result.totals = {name: len(getattr(result, name)) for name in PAGED}
    result.offset, result.limit = offset, limit
    if limit is None and not offset:
        return result
    end = None if limit is None else offset + limit
    for name in PAGED:
        setattr(result, name, getattr(result, name)[offset:end])
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
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_LIMIT):
        raise InvalidArgument(f"limit must be between 1 and {MAX_LIMIT} (got {limit!r}); omit it for every item")
    if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
        raise InvalidArgument(f"offset must be 0 or more (got {offset!r})")
