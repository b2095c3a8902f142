"""The ``detail="summary"`` shape of flow_map (:mod:`tools.detail`).

The picture is in both shapes: in the text content (a ```mermaid block) and in ``mermaid`` (the
point of the tool: Claude Code gives the model only the structured content), folded further
when needed to fit :data:`PICTURE_BYTES` (fewer branches per kind, no click links, no legend).
The summary keeps the counts, the nodes in trouble (static or live) first, then the queues and
streams (the names the runtime tools take), then the rest, up to the cap; the lists are what is
cut: edges and the nodes past the cap are counted in ``omitted`` (``detail="full"`` has them).
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from tools.detail import Cutter, SummaryBase
from tools.flow_map.fold import fold
from tools.flow_map.graph import FlowGraph
from tools.flow_map.model import FlowMap, FlowNode, ServiceProblem, Trouble
from tools.flow_map.render import render
from tools.mesh_index.summary import IndexBrief, MatchBrief


class NodeBrief(BaseModel):
    id: str
    role: str
    kind: str
    label: str
    value: str | None = None
    at: str | None = Field(default=None, description="file:line of a code node")
    groups: list[str] = Field(default_factory=list)
    trouble: list[Trouble] = Field(default_factory=list)
    live: str | None = Field(default=None, description="live status: sentence (live=true)")
    verdicts: list[str] = Field(default_factory=list, description="trace verdict codes of the live read")


class FlowSummary(SummaryBase):
    """flow_map, detail="summary"."""

    target: str
    depth: int
    direction: str
    live: bool
    matches: list[MatchBrief]
    counts: dict[str, int] = Field(description="nodes, edges, folded of the full picture")
    trouble: int
    mermaid: str = Field(description="the Mermaid flowchart, folded to fit (as in the text content)")
    nodes: list[NodeBrief] = Field(description="nodes in trouble first, then queues and streams, then the rest")
    unavailable: list[ServiceProblem] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    index: IndexBrief


PICTURE_BYTES = 2200  # the summary's picture: the rest of a summary (counts, first nodes) fits beside it


def small_picture(result: FlowMap) -> tuple[str, bool]:
    """The picture folded to fit :data:`PICTURE_BYTES` (as is when it does), and whether it was folded further."""
    if len(result.mermaid.encode("utf-8")) <= PICTURE_BYTES:
        return result.mermaid, False
    graph = FlowGraph(list(result.matches), {n.id: n for n in result.nodes},
                      {(e.source, e.target): e for e in result.edges})
    text = result.mermaid
    for limit in (4, 3, 2, 1):
        g, _more = fold(graph, limit)
        text = render(g.nodes.values(), g.edges.values(), result.direction, legend=False)
        if len(text.encode("utf-8")) <= PICTURE_BYTES:
            break
    return text, True


def _rank(node: FlowNode) -> int:
    troubled = bool(node.trouble) or (node.live is not None and node.live.status not in ("ok",))
    return 0 if troubled else 1 if node.kind in ("queue", "stream") else 2


def _brief(node: FlowNode) -> NodeBrief:
    return NodeBrief(
        id=node.id, role=node.role, kind=node.kind, label=node.label, value=node.value,
        at=f"{node.file}:{node.line}" if node.file and node.line else None, groups=node.groups,
        trouble=node.trouble, live=f"{node.live.status}: {node.live.sentence}" if node.live else None,
        verdicts=node.live.verdicts if node.live else [],
    )


def summarise_flow(result: FlowMap, items: int) -> FlowSummary:
    cut = Cutter(items)
    cut.drop("edges", len(result.edges))
    nodes = sorted(result.nodes, key=_rank)
    picture, refolded = small_picture(result)
    notes = list(result.notes)
    if refolded:
        notes.insert(0, f"the summary's picture is folded further to fit {PICTURE_BYTES} bytes (no links, no legend): "
                        'detail="full" has the whole one')
    return FlowSummary(
        target=result.target, depth=result.depth, direction=result.direction, live=result.live,
        matches=[MatchBrief(kind=m.kind, name=m.name, value=m.value,
                            defined_at=f"{m.defined_at.file}:{m.defined_at.line}" if m.defined_at else None)
                 for m in cut.first("matches", result.matches)],
        counts={"nodes": len(result.nodes), "edges": len(result.edges), "folded": len(result.folded)},
        trouble=result.trouble, mermaid=picture,
        nodes=[_brief(n) for n in cut.first("nodes", nodes, max(items // 2, 3))],
        unavailable=result.unavailable, notes=cut.first("notes", notes),
        index=IndexBrief(files=result.index.files, parse_errors=result.index.parse_errors,
                         indexed_at=result.index.indexed_at, stale_files=len(result.index.stale_files)),
        related_skills=cut.related(result.related_skills), omitted=cut.omitted(),
    )
