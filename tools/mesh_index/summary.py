"""The ``detail="summary"`` shape of analyze_impact (:mod:`tools.detail`).

Counts of every list, then the first sites, routes and follow-ups with the names the runtime
tools take (queue, stream, group in each site's ``detail``); unresolved references are counted,
the index is reduced to its state (``detail="full"`` has the rest).
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from tools.code_nav.model import RequestMap
from tools.detail import Cutter, SummaryBase
from tools.mesh_index.model import ImpactResult, NodeMatch, Route, Site


class MatchBrief(BaseModel):
    kind: str
    name: str
    value: str
    defined_at: str | None = Field(default=None, description="file:line of the declaration")


class FollowUpBrief(BaseModel):
    depth: int
    from_value: str
    kind: str
    value: str
    via: str
    confidence: str
    at: str = Field(description="file:line")


class IndexBrief(BaseModel):
    files: int
    parse_errors: int
    indexed_at: str
    stale_files: int = 0


class ImpactSummary(SummaryBase):
    """analyze_impact, detail="summary"."""

    target: str
    counts: dict[str, int] = Field(description="total items of each list of the full result")
    matches: list[MatchBrief]
    producers: list[Site]
    consumers: list[Site]
    candidates: list[Site] = Field(default_factory=list, description="sites whose value is not resolved (reason)")
    routes: list[Route]
    followups: list[FollowUpBrief]
    upstream: list[FollowUpBrief] = Field(default_factory=list, description="direction=upstream|both")
    nodes: list[NodeMatch] = Field(default_factory=list, description="the target as a class or config key")
    index: IndexBrief
    suggestions: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    request_map: RequestMap | None = None  # request-map hook (issue 34): every hop, even in summary


def _where(site: Site | None) -> str | None:
    return f"{site.file}:{site.line}" if site is not None else None


def summarise_impact(result: ImpactResult, items: int) -> ImpactSummary:
    cut = Cutter(items)
    cut.drop("unresolved", len(result.unresolved))
    return ImpactSummary(
        target=result.target,
        counts={name: len(getattr(result, name))
                for name in ("matches", "producers", "consumers", "candidates", "routes", "followups",
                              "upstream", "unresolved")},
        matches=[MatchBrief(kind=m.kind, name=m.name, value=m.value, defined_at=_where(m.defined_at))
                 for m in cut.first("matches", result.matches)],
        producers=cut.first("producers", result.producers),
        consumers=cut.first("consumers", result.consumers),
        candidates=cut.first("candidates", result.candidates),
        routes=cut.first("routes", result.routes),
        followups=[FollowUpBrief(depth=f.depth, from_value=f.from_value, kind=f.kind, value=f.value, via=f.via,
                                 confidence=f.confidence, at=_where(f.site) or "")
                   for f in cut.first("followups", result.followups)],
        upstream=[FollowUpBrief(depth=f.depth, from_value=f.from_value, kind=f.kind, value=f.value, via=f.via,
                                confidence=f.confidence, at=_where(f.site) or "")
                  for f in cut.first("upstream", result.upstream)],
        nodes=result.nodes,
        index=IndexBrief(files=result.index.files, parse_errors=result.index.parse_errors,
                         indexed_at=result.index.indexed_at, stale_files=len(result.index.stale_files)),
        suggestions=cut.first("suggestions", result.suggestions),
        notes=cut.first("notes", result.notes),
        related_skills=cut.related(result.related_skills),
        omitted=cut.omitted(),
        request_map=result.request_map,
    )
