"""Mermaid text primitives: safe labels, stable node ids, node and edge lines, class definitions.

Labels are always written quoted, and every character that could end the quote, start
Mermaid markup or be read as an entity or a comment is written as a Mermaid entity code
(``#quot;``, ``#35;``, ...). Line breaks inside a label are the ``<br/>`` this module joins
with; a line break in the text itself becomes a space. So no text from the code base (a
class name, a type value, a Redis error) can change the structure of the diagram.

A code node may carry a ``click`` line: a link to its file (relative to the workspace, with a
``#L<line>`` anchor); a path with any character outside
``[A-Za-z0-9_./@+-]`` gets no link.

Node ids are ``<prefix><hex>`` from a hash of the thing's identity: the same thing has the
same id in every picture (a link or a note can name it), and an id never collides with a
Mermaid keyword (``end``, ``graph``, ``class``, ...).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

from server.text_safety import one_line

DIRECTIONS = ("LR", "TB", "RL", "BT")

_ESCAPES = {
    '"': "#quot;",
    "#": "#35;",
    "&": "#amp;",
    "<": "#lt;",
    ">": "#gt;",
    "`": "#96;",
    "|": "#124;",
    "%": "#37;",
}
MAX_LINE = 60

# name -> style of every class the pictures use (one place, so legend and styles agree)
CLASS_STYLES: dict[str, str] = {
    "type": "fill:#eef4ff,stroke:#3b6fd8",
    "route": "fill:#f4f0ff,stroke:#7a5cc4",
    "code": "fill:#ffffff,stroke:#777777",
    "folded": "fill:#f6f6f6,stroke:#999999,stroke-dasharray:3 3",
    "broken": "fill:#ffe0e0,stroke:#cc0000,stroke-width:2px,color:#800000",
    "deadend": "fill:#fff0e0,stroke:#cc0000,stroke-width:2px,stroke-dasharray:5 3",
    "ok": "fill:#e3f6e3,stroke:#2e8b2e",
    "warn": "fill:#fff6d6,stroke:#c79100",
    "error": "fill:#ffd6d6,stroke:#cc0000,stroke-width:2px",
    "grey": "fill:#e6e6e6,stroke:#8c8c8c,color:#555555",
}

LEGEND_TEXT: dict[str, str] = {
    "broken": "broken: nobody produces / consumes / routes / reads",
    "deadend": "dead end: nobody consumes it",
    "folded": "folded fan-out",
    "ok": "live: ok",
    "warn": "live: warning",
    "error": "live: broken (trace verdict)",
    "grey": "live: could not be read",
}


def escape(text: str) -> str:
    """``text`` made safe inside a quoted Mermaid label (one line; see the module docstring)."""
    flat = one_line(" ".join(str(text).split()))  # control characters written as \uXXXX
    return "".join(_ESCAPES.get(ch, ch) for ch in flat)


def shorten(text: str, limit: int = MAX_LINE) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def label(*lines: str | None) -> str:
    """A quoted label of the non-empty ``lines`` (each escaped and shortened), joined by ``<br/>``."""
    return '"' + "<br/>".join(escape(shorten(line)) for line in lines if line) + '"'


def node_id(prefix: str, *identity: object) -> str:
    """A stable Mermaid-safe id: ``prefix`` (letters) followed by 8 hex digits of the identity's hash."""
    digest = hashlib.sha1("\x1f".join(str(p) for p in identity).encode("utf-8")).hexdigest()
    return f"{prefix}{digest[:8]}"


SHAPES: dict[str, tuple[str, str]] = {
    "type": ("{{", "}}"),
    "route": ("[(", ")]"),
    "code": ("[", "]"),
    "folded": ("[", "]"),
    "hop": ("(", ")"),
}


def node_line(nid: str, shape: str, text: str, cls: str | None = None) -> str:
    """``nid{{"label"}}:::cls`` with the brackets of ``shape`` (a key of :data:`SHAPES`)."""
    left, right = SHAPES.get(shape, SHAPES["code"])
    return f"  {nid}{left}{text}{right}" + (f":::{cls}" if cls else "")


def edge_line(source: str, target: str, text: str | None = None, *, dashed: bool = False) -> str:
    """A solid (``-->``) or dashed (``-.->``) edge, labelled when ``text`` is given."""
    arrow = "-.->" if dashed else "-->"
    if text:
        return f"  {source} {arrow}|{label(text)}| {target}"
    return f"  {source} {arrow} {target}"


_LINK_UNSAFE = re.compile(r'[^A-Za-z0-9_./@+-]')


def click_line(nid: str, file: str, line: int | None) -> str | None:
    """``click nid href "file#Lline"`` (a link to the code), or None when the path holds characters
    that have no place in a link (it is then only in the data)."""
    if not file or _LINK_UNSAFE.search(file):
        return None
    return f'  click {nid} href "{file}{f"#L{line}" if line else ""}"'


def class_lines(used: Iterable[str]) -> list[str]:
    """``classDef`` lines for the classes in ``used`` (known ones only, in a fixed order)."""
    wanted = set(used)
    return [f"  classDef {name} {style}" for name, style in CLASS_STYLES.items() if name in wanted]


def assign_lines(members: dict[str, list[str]]) -> list[str]:
    """``class a,b broken`` lines (one per class, ids in order)."""
    return [f"  class {','.join(ids)} {cls}" for cls, ids in members.items() if ids]


def legend_lines(used: Iterable[str]) -> list[str]:
    """A small ``legend`` subgraph with one sample node per trouble/state class in ``used``."""
    wanted = [name for name in LEGEND_TEXT if name in set(used)]
    if not wanted:
        return []
    lines = ['  subgraph legend["legend"]', "    direction TB"]
    for name in wanted:
        lines.append(f"    {node_id('lg', name)}[{label(LEGEND_TEXT[name])}]:::{name}")
    lines.append("  end")
    return lines
