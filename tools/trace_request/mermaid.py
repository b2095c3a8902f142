"""A Mermaid flowchart of a request's causal tree (items, then their hops), labels escaped."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tools.trace_request.model import RequestItem, WsMessage

_ESCAPES = {'"': "#quot;", "<": "#lt;", ">": "#gt;", "[": "#91;", "]": "#93;", "{": "#123;", "}": "#125;",
            "|": "#124;", "`": "#96;", ";": "#59;", "#": "#35;"}
MAX_LABEL = 80


def escape(text: str) -> str:
    """Text safe inside a quoted Mermaid label (one line, entities for the characters Mermaid reads)."""
    flat = " ".join(str(text).split())
    if len(flat) > MAX_LABEL:
        flat = flat[: MAX_LABEL - 3] + "..."
    return "".join(_ESCAPES.get(ch, ch) for ch in flat)


def render(items: list[RequestItem], ws: list[WsMessage] | None = None) -> str:
    """``flowchart TD``: one node per item (service, table, type, status), its hops below it, and last
    the websocket messages the consumers send (static evidence: a dotted edge, a dashed node)."""
    lines = ["flowchart TD"]
    ids = {item.key: f"n{i}" for i, item in enumerate(items)}
    group_nodes: dict[tuple[str, str, str | None], str] = {}  # (item, stream, group) -> its hop node
    for item in items:
        node = ids[item.key]
        label = escape(f"{item.service} {item.table} {item.type or '?'} {item.status or '?'}")
        lines.append(f'    {node}["{label}"]')
        if item.broken:
            lines.append(f"    class {node} broken")
        for j, hop in enumerate(item.hops[1:] if item.hops else []):
            hop_node = f"{node}h{j}"
            hop_label = escape(f"{hop.name}: {hop.state or '-'}")
            lines.append(f'    {hop_node}["{hop_label}"]')
            lines.append(f"    {node} --> {hop_node}")
            if hop.delivery is not None:
                group_nodes[(item.key, hop.delivery.stream, hop.delivery.group)] = hop_node
            if hop.healthy is False:
                lines.append(f"    class {hop_node} broken")
        if item.parent and item.parent in ids:
            lines.append(f'    {ids[item.parent]} -->|"{escape(item.link)}"| {node}')
    for k, msg in enumerate(ws or []):
        if msg.parent not in ids:
            continue
        node = f"w{k}"
        label = escape(f"ws {msg.value} (static, not seen at run time)")
        edge = escape(f"{msg.consumer} sends" if msg.group is None else f"{msg.consumer} ({msg.group}) sends")
        lines.append(f'    {node}(["{label}"])')
        source = group_nodes.get((msg.parent, msg.stream, msg.group), ids[msg.parent])
        lines.append(f'    {source} -.->|"{edge}"| {node}')
        lines.append(f"    class {node} static")
    lines.append("    classDef broken stroke:#c00,stroke-width:2px")
    if ws:
        lines.append("    classDef static stroke-dasharray:4 3")
    return "\n".join(lines)
