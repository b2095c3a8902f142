"""The Mermaid picture of a ``trace_job`` / ``trace_event`` result: the hops it walked and their state.

Reads only the result's ``hops`` and ``verdict`` (``name``, ``ref``, ``state``, ``healthy``,
``found``; ``verdict.code`` and ``verdict.hop``), so the tracer can change how it judges a
hop without this module changing. Layout: each hop follows the previous one; a hop named like
an earlier one is drawn beside it (same parent: two outcome events of one job); a
``...stream_entry`` hop hangs from the last event row before it, a ``...group`` hop from the
last stream entry. Classes: ``ok`` (healthy), ``error`` (unhealthy), ``grey`` (not observed or
not judged); the hop the verdict names is also ``broken`` and says so.
"""

from __future__ import annotations

from typing import Any

from tools.flow_map import mermaid as mm

STATE_CLASS = {True: "ok", False: "error", None: "grey"}
LEGEND = {"ok": "hop ok", "error": "hop in trouble", "grey": "not observed / not judged",
          "broken": "the verdict's hop"}


def _verdict_hops(hops: list[Any], verdict: Any) -> set[int]:
    if verdict is None or getattr(verdict, "code", "ok") == "ok" or not getattr(verdict, "hop", None):
        return set()
    named = [i for i, h in enumerate(hops) if h.name == verdict.hop]
    unhealthy = [i for i in named if hops[i].healthy is False]
    return set(unhealthy or named)


def _parents(hops: list[Any]) -> list[int | None]:
    parents: list[int | None] = []
    main_last: int | None = None
    entry_last: int | None = None
    first_of_name: dict[str, int] = {}
    for i, hop in enumerate(hops):
        name = str(hop.name)
        if name.endswith("group"):
            parent = entry_last if entry_last is not None else main_last
        elif name.endswith("stream_entry"):
            parent = main_last
            entry_last = i
        else:
            parent = parents[first_of_name[name]] if name in first_of_name else main_last
            first_of_name.setdefault(name, i)
            main_last = i
            entry_last = None
        parents.append(parent if parent != i else None)
    return parents


def trace_mermaid(report: Any, direction: str = "LR") -> str:
    """The flowchart of ``report``'s hops (a :class:`~tools.outbox.model.TraceReport`)."""
    hops = list(report.hops)
    verdict = getattr(report, "verdict", None)
    marked = _verdict_hops(hops, verdict)
    ids = [mm.node_id("h", i, h.name, h.ref) for i, h in enumerate(hops)]
    out = [f"flowchart {direction}"]
    classes: dict[str, list[str]] = {"ok": [], "error": [], "grey": [], "broken": []}
    for i, hop in enumerate(hops):
        lines = [str(hop.name), hop.state or ("found" if hop.found else "absent"), mm.shorten(str(hop.ref), 44)]
        if i in marked:
            lines.append(f"✖ verdict {verdict.code}")
        out.append(mm.node_line(ids[i], "hop", mm.label(*lines)))
        classes[STATE_CLASS.get(hop.healthy, "grey")].append(ids[i])
        if i in marked:
            classes["broken"].append(ids[i])
    for i, parent in enumerate(_parents(hops)):
        if parent is not None:
            out.append(mm.edge_line(ids[parent], ids[i], dashed=hops[i].found is False))
    if verdict is not None and not hops:
        out.append(f"  {mm.node_id('v', verdict.code)}[{mm.label('verdict ' + str(verdict.code))}]")
    out.extend(mm.assign_lines(classes))
    used = [k for k, v in classes.items() if v]
    wanted = [k for k in LEGEND if k in used]
    if wanted:
        out.extend(['  subgraph legend["legend"]', "    direction TB"])
        out.extend(f"    {mm.node_id('lg', 'trace', k)}[{mm.label(LEGEND[k])}]:::{k}" for k in wanted)
        out.append("  end")
    out.extend(mm.class_lines(used))
    return "\n".join(out) + "\n"
