"""Mermaid text and the short text summary of a flow map.

Node shapes: types are hexagons, queues and streams cylinders, code rectangles. Classes:
the role (``type``, ``route``, ``code``, ``folded``), then ``broken`` or ``deadend`` for
static trouble, then, with live state, ``ok`` / ``warn`` / ``error`` / ``grey`` (later classes
win). A legend subgraph explains the trouble and state classes used. With ``links``, code
nodes get a ``click`` link to their file:line (see :func:`tools.flow_map.mermaid.click_line`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from server.text_safety import defuse_fences, one_line
from tools.flow_map import mermaid as mm

if TYPE_CHECKING:  # the models call these renderers (summary_text): types only here
    from tools.flow_map.model import FlowEdge, FlowMap, FlowNode

TROUBLE_WORDS = {
    "no_producer": "nobody produces it",
    "only_test_producers": "only tests produce it",
    "no_consumer": "no handler takes it",
    "dead_end": "dead end: nobody consumes it",
    "handler_not_routed": "no worker routes it",
    "queue_no_worker": "no worker reads it",
    "stream_no_consumer": "no consumer group",
    "filter_matches_nothing": "filter matches nothing here",
    "not_started": "nothing starts it",
}
STATE_CLASS = {"ok": "ok", "warning": "warn", "error": "error", "unknown": "grey"}


def _lines(node: FlowNode) -> list[str]:
    lines = [node.label]
    if node.role == "code":
        lines.append(" · ".join(p for p in (" ".join(node.kinds) or node.kind, node.service or node.repo) if p))
        if node.groups:
            lines.append("group " + ", ".join(node.groups))
    for t in node.trouble:
        lines.append("⚠ " + TROUBLE_WORDS.get(t.code, t.code))
    if node.live is not None:
        lines.extend(node.live.sentence.split("; "))
    return lines


def trouble_class(node: FlowNode) -> str | None:
    if not node.trouble:
        return None
    return "deadend" if all(t.code == "dead_end" for t in node.trouble) else "broken"


def render(nodes: Iterable[FlowNode], edges: Iterable[FlowEdge], direction: str, *, legend: bool = True,
           links: bool = False) -> str:
    """The Mermaid flowchart of ``nodes`` and ``edges`` (``links``: a ``click`` line per code node)."""
    out = [f"flowchart {direction}"]
    extra: dict[str, list[str]] = {"broken": [], "deadend": [], "ok": [], "warn": [], "error": [], "grey": []}
    used: set[str] = set()
    for node in nodes:
        shape = node.role
        out.append(mm.node_line(node.id, shape, mm.label(*_lines(node)), node.role))
        used.add(node.role)
        cls = trouble_class(node)
        if cls:
            extra[cls].append(node.id)
        if node.live is not None and not (cls and node.live.status == "ok"):
            extra[STATE_CLASS[node.live.status]].append(node.id)  # a static trouble stays visible when live is ok
    clicks = []
    for node in nodes:
        if links and node.role == "code" and node.file:
            line = mm.click_line(node.id, node.file, node.line)
            if line:
                clicks.append(line)
    for e in edges:
        out.append(mm.edge_line(e.source, e.target, e.label, dashed=e.confidence == "heuristic"))
    out.extend(clicks)
    used.update(k for k, ids in extra.items() if ids)
    out.extend(mm.assign_lines(extra))
    if legend:
        out.extend(mm.legend_lines(used))
    out.extend(mm.class_lines(used))
    return "\n".join(out) + "\n"


def summary_text(result: FlowMap) -> str:
    """The picture and what it shows, for clients that only show text. Every value from the workspace
    (labels, files, values, sentences) is kept on its line (:func:`server.text_safety.one_line`) and no
    line before the picture can open a Markdown fence: the ```mermaid block below is the only one."""
    matches = ", ".join(f"{m.kind} {one_line(m.value)}" for m in result.matches)
    head = (f"flow of {one_line(result.target)} ({matches}), depth {result.depth}: {len(result.nodes)} nodes, "
            f"{len(result.edges)} edges, {result.trouble} in trouble, {result.mermaid_bytes} bytes of Mermaid")
    lines = [head]
    for node in result.nodes:
        label = one_line(node.label)
        where = f" ({one_line(node.file)}:{node.line})" if node.file else ""
        for t in node.trouble:
            lines.append(f"! [{t.code}] {label}{where}: {one_line(t.sentence)}")
        if node.live is not None and node.live.status != "ok":
            codes = f" [{', '.join(node.live.verdicts)}]" if node.live.verdicts else ""
            lines.append(f"live {node.live.status}{codes} {label}: {one_line(node.live.sentence)}")
    for f in result.folded:
        lines.append(f"folded at {f.at}: {f.count} {one_line(f.what)} ({len(f.items)} node(s), listed in "
                     "folded[].items)")
    for p in result.unavailable:
        lines.append(f"unavailable: {one_line(p.service)}: {one_line(p.error)}")
    lines.extend(f"note: {one_line(n)}" for n in result.notes)
    text = defuse_fences("\n".join(lines))
    return f"{text}\n```mermaid\n{result.mermaid.rstrip(chr(10))}\n```"
