"""``limit`` / ``offset`` paging of every list of an analyze_impact answer, with the totals kept."""

from __future__ import annotations

from tools.mesh_index.model import ImpactResult

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
