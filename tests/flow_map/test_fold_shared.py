"""The fold step on branches that share a node (issue 33: KeyError on catalogue names such as
``event:job:outbox:success``)."""

from __future__ import annotations

from tools.flow_map.fold import fold
from tools.flow_map.graph import FlowGraph
from tools.flow_map.model import FlowEdge, FlowNode


def _node(nid: str, role: str = "code", target: bool = False) -> FlowNode:
    return FlowNode(id=nid, role=role, kind="post_processor" if role == "code" else "event", label=nid, target=target)


def _edge(g: FlowGraph, a: str, b: str) -> None:
    g.edges[(a, b)] = FlowEdge(source=a, target=b, confidence="exact")


def test_a_node_shared_by_two_folded_branches_is_folded_once_and_a_kept_branch_keeps_its_nodes() -> None:
    g = FlowGraph()
    g.nodes["T"] = _node("T", role="type", target=True)
    for i in range(6):  # six consumers of the target
        g.nodes[f"c{i}"] = _node(f"c{i}")
        _edge(g, "T", f"c{i}")
    g.nodes["S"] = _node("S", role="type")  # emitted by c3 and c4: two folded branches share it
    _edge(g, "c3", "S")
    _edge(g, "c4", "S")
    g.nodes["K"] = _node("K", role="type")  # emitted by c0 (kept) and c5: c5's branch is c0's too
    _edge(g, "c0", "K")
    _edge(g, "c5", "K")
    out, folded = fold(g, 2)
    (f,) = folded
    assert f.count == 3 and {i.split(" ")[0] for i in f.items} == {"c2", "c3", "c4", "S"}
    assert {"c0", "c1", "c5", "K"} <= set(out.nodes) and not {"c2", "c3", "c4", "S"} & set(out.nodes)
    assert all(a in out.nodes and b in out.nodes for a, b in out.edges)


def test_the_summary_keeps_the_picture(fixture_index) -> None:
    from tools.flow_map.service import build_map
    from tools.flow_map.summary import PICTURE_BYTES, summarise_flow

    result, _graph = build_map(fixture_index, "FALLBACK_CREATE_EVENT", 3, "LR")
    small = summarise_flow(result, 3)
    assert small.mermaid.startswith("flowchart") and len(small.mermaid.encode()) < len(result.mermaid.encode())
    assert len(small.mermaid.encode()) <= PICTURE_BYTES + 100  # one branch per kind: the chain itself stays
    assert len(result.mermaid.encode()) > PICTURE_BYTES and "folded further" in small.notes[0]
    assert "mermaid_chars" not in small.omitted.counts and len(small.nodes) < len(result.nodes)
