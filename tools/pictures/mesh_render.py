"""``visualize_mesh`` rendered: the Mermaid flowchart, the text summary and the standalone HTML page.

gRPC methods are subroutine boxes (``[[...]]``); an edge that is only a candidate (a handler matched by
name, a write the index guessed) is dashed, like a heuristic one, and its label says ``candidate``.

Every label comes from the workspace (service folders, queue names, stream keys, type values): it is
escaped by :mod:`tools.flow_map.mermaid` in Mermaid and drawn as text (never as markup) by the page.
"""

from __future__ import annotations

from server.text_safety import defuse_fences, one_line
from tools.flow_map import mermaid as mm
from tools.pictures.mesh_model import MeshGraph

SHAPE = {"service": ("[", "]"), "queue": ("[(", ")]"), "stream": ("[(", ")]"), "websocket": (">", "]"),
         "grpc": ("[[", "]]"), "folded": ("{{", "}}")}
CLASS_STYLES = {
    "service": "fill:#ffffff,stroke:#555555",
    "queue": "fill:#f4f0ff,stroke:#7a5cc4",
    "stream": "fill:#eef4ff,stroke:#3b6fd8",
    "websocket": "fill:#eefaf0,stroke:#2e8b57",
    "grpc": "fill:#fff8e6,stroke:#b8860b",
    "folded": "fill:#f6f6f6,stroke:#999999,stroke-dasharray:3 3",
    "broken": "fill:#ffe0e0,stroke:#cc0000,stroke-width:2px,color:#800000",
}


def mesh_mermaid(graph: MeshGraph) -> str:
    out = ["flowchart LR"]
    classes: dict[str, list[str]] = {name: [] for name in CLASS_STYLES}
    for node in graph.nodes:
        left, right = SHAPE[node.kind]
        lines = [node.label]
        if node.kind in ("queue", "stream", "websocket") and node.types:
            lines.append(f"{len(node.types)} type{'s' * (len(node.types) != 1)}")
        if node.kind == "grpc" and node.types:
            lines.append(f"handler writes {len(node.types)} type{'s' * (len(node.types) != 1)}")
        lines.extend(f"⚠ {t}" for t in node.trouble[:2])
        out.append(f"  {node.id}{left}{mm.label(*lines)}{right}")
        classes["broken" if node.trouble else node.kind].append(node.id)
    for edge in graph.edges:
        out.append(mm.edge_line(edge.source, edge.target, edge.label, dashed=edge.confidence != "exact"))
    out.extend(mm.assign_lines(classes))
    out.extend(f"  classDef {name} {style}" for name, style in CLASS_STYLES.items() if classes[name])
    return "\n".join(out) + "\n"


def summary_lines(graph: MeshGraph) -> list[str]:
    """The head line (counts), trouble, notes and gRPC lines (no picture). Every name from the workspace, the
    database or Redis is kept on its line (:func:`server.text_safety.one_line`): a queue value holding a
    newline and a fence cannot start a line of its own."""
    c = graph.counts
    head = (f"mesh{f' around {one_line(graph.service)}' if graph.service else ''}: {c['services']} services, "
            f"{c['queues']} queues, {c['streams']} streams, {c['websocket_types']} websocket types, "
            + (f"{c['grpc_methods']} gRPC methods, " if c.get("grpc_methods") else "") + f"{c['edges']} edges"
            + (f", {graph.folded} folded" if graph.folded else ""))
    lines = [head]
    lines.extend(f"trouble: {one_line(n.label)}: {'; '.join(one_line(t) for t in n.trouble)}"
                 for n in graph.nodes if n.trouble)
    lines.extend(f"note: {one_line(n)}" for n in graph.notes)
    lines.append(f"gRPC: {one_line(graph.grpc)}")
    lines.append("look closer: visualize_mesh(service=S), inspect_queue(queue=Q), inspect_stream(stream=K)"
                 + (", analyze_grpc(target=Service.Method)" if graph.counts.get("grpc_methods") else ""))
    return lines


def mesh_text(graph: MeshGraph) -> str:
    """The text content of visualize_mesh: the summary lines, then the picture (mermaid) or where the page is.
    The lines before our own fence are defused (:func:`server.text_safety.defuse_fences`): none can open one."""
    lines = summary_lines(graph)
    if graph.format != "mermaid":  # the ids and names of what is drawn (the Mermaid text has them otherwise)
        lines.append("nodes: " + "; ".join(
            f"{one_line(n.id)} {one_line(n.label)}" + (f" ({', '.join(one_line(m) for m in n.members)})"
                                                        if n.members else "")
            for n in graph.nodes))
    text = defuse_fences("\n".join(lines))
    if graph.format == "mermaid" and graph.mermaid:
        return f"{text}\n```mermaid\n{graph.mermaid.rstrip()}\n```"
    if graph.format == "html" and graph.html:
        return (f"{text}\nhtml: a standalone page of {len(graph.html)} bytes is in `html` (save it as a .html file); "
                "`mesh-mcp graph --format html --open` opens it")
    return text
