"""A Mermaid flowchart of a request's causal tree (items, then their hops), labels escaped."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tools.trace_request.model import RequestItem

_ESCAPES = {'"': "#quot;", "<": "#lt;", ">": "#gt;", "[": "#91;", "]": "#93;", "{": "#123;", "}": "#125;",
            "|": "#124;", "`": "#96;", ";": "#59;", "#": "#35;"}
MAX_LABEL = 80


def escape(text: str) -> str:
    """Text safe inside a quoted Mermaid label (one line, entities for the characters Mermaid reads)."""
    flat = " ".join(str(text).split())
    if len(flat) > MAX_LABEL:
        flat = flat[: MAX_LABEL - 3] + "..."
    return "".join(_ESCAPES.get(ch, ch) for ch in flat)


def render(items: list[RequestItem]) -> str:
    """``flowchart TD``: one node per item (service, table, type, status), its hops below it."""
    lines = ["flowchart TD"]
    ids = {item.key: f"n{i}" for i, item in enumerate(items)}
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
            if hop.healthy is False:
                lines.append(f"    class {hop_node} broken")
        if item.parent and item.parent in ids:
            lines.append(f'    {ids[item.parent]} -->|"{escape(item.link)}"| {node}')
    lines.append("    classDef broken stroke:#c00,stroke-width:2px")
    return "\n".join(lines)
