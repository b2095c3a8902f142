"""Fold big fan-out: past ``limit`` branches of one kind at a node, the rest become one '+N more' node.

A branch is a neighbour together with everything that hangs only from it (the part of the
graph reached from it without crossing the node, holding no target). Branches are grouped
by direction and by what they are (producers, consumers, job types, queues, ...); in a group
of more than ``limit``, the ones kept are those in trouble first, then the exact ones, then by
label; every node folded away is listed in :class:`~tools.flow_map.model.Folded` with its
file:line, so nothing disappears from the data. Nodes are visited from the targets
outwards, so the fan-out nearest the target is folded first.
"""

from __future__ import annotations

from collections import deque

from tools.flow_map.graph import KIND_WORD, FlowGraph
from tools.flow_map.mermaid import node_id
from tools.flow_map.model import FlowEdge, FlowNode, Folded

MAX_BRANCH = 400  # a branch bigger than this is not a fan (it is the rest of the graph)


def _adjacency(graph: FlowGraph) -> dict[str, set[str]]:
    adj: dict[str, set[str]] = {nid: set() for nid in graph.nodes}
    for s, t in graph.edges:
        if s in adj and t in adj:
            adj[s].add(t)
            adj[t].add(s)
    return adj


def _branch(adj: dict[str, set[str]], at: str, start: str, protected: set[str]) -> set[str] | None:
    """Nodes reached from ``start`` without crossing ``at``; None when a target is among them or it is huge."""
    seen = {start}
    queue = deque([start])
    while queue:
        nid = queue.popleft()
        if nid in protected:
            return None
        for other in adj[nid]:
            if other != at and other not in seen:
                seen.add(other)
                if len(seen) > MAX_BRANCH:
                    return None
                queue.append(other)
    return seen


def _what(node: FlowNode, incoming: bool) -> str:
    if node.role == "code":
        return "producers" if incoming else "consumers"
    if node.role == "type":
        return f"{KIND_WORD.get(node.kind, node.kind)}s"
    return f"{node.kind}s"


def _where(node: FlowNode) -> str:
    return f"{node.label} ({node.file}:{node.line})" if node.file else node.label


def fold(graph: FlowGraph, limit: int) -> tuple[FlowGraph, list[Folded]]:
    """A copy of ``graph`` with every fan-out group above ``limit`` folded (see the module docstring)."""
    g = graph.copy()
    folded: list[Folded] = []
    protected = {nid for nid, n in g.nodes.items() if n.target}
    order: list[str] = []
    adj = _adjacency(g)
    queue = deque(sorted(protected, key=list(g.nodes).index))
    seen = set(queue)
    while queue:
        nid = queue.popleft()
        order.append(nid)
        for other in sorted(adj[nid], key=list(g.nodes).index):
            if other not in seen:
                seen.add(other)
                queue.append(other)
    order.extend(nid for nid in g.nodes if nid not in seen)
    for at in order:
        if at not in g.nodes:
            continue
        adj = _adjacency(g)
        groups: dict[tuple[bool, str], list[tuple[str, set[str]]]] = {}
        for other in adj[at]:
            incoming = (other, at) in g.edges
            branch = _branch(adj, at, other, protected - {at})
            if branch is None:
                continue
            groups.setdefault((incoming, _what(g.nodes[other], incoming)), []).append((other, branch))
        for (incoming, what), branches in sorted(groups.items()):
            if len(branches) <= limit:
                continue
            branches.sort(key=lambda b: (not any(g.nodes[n].trouble for n in b[1]),
                                         g.nodes[b[0]].confidence != "exact", g.nodes[b[0]].label))
            # two branches may share a node (both reach it without crossing `at`): fold it once, and never
            # a node a kept branch still needs (a branch whose head a kept branch reaches is not folded)
            kept = {n for _head, branch in branches[:limit] for n in branch}
            gone = [(head, branch) for head, branch in branches[limit:] if head not in kept]
            if not gone:
                continue
            members = list(dict.fromkeys(n for _head, branch in gone for n in sorted(branch, key=list(g.nodes).index)
                                         if n not in kept))
            broken = sum(1 for n in members if g.nodes[n].trouble)
            fid = node_id("f", at, what, incoming)
            text = f"+{len(gone)} more {what}" + (f" ({broken} in trouble)" if broken else "")
            items = [_where(g.nodes[n]) for n in members]
            for n in members:
                del g.nodes[n]
            g.edges = {k: e for k, e in g.edges.items() if k[0] in g.nodes and k[1] in g.nodes}
            g.nodes[fid] = FlowNode(id=fid, role="folded", kind="folded", label=text, lines=[])
            if incoming:
                g.edges[(fid, at)] = FlowEdge(source=fid, target=at, label=None, confidence="exact")
            else:
                g.edges[(at, fid)] = FlowEdge(source=at, target=fid, label=None, confidence="exact")
            folded.append(Folded(at=at, node=fid, what=what, count=len(gone), items=items))
            adj = _adjacency(g)
    return g, folded
