"""Where to insert a copy of a sibling's element in an existing file, and how.

A sibling flow shows up in a file as *elements*: an import, a constructor parameter, an
entry of a handler list, a ``case`` clause, a ``providers`` entry, a member of an enum.
:func:`sibling_edits` finds each element that names the sibling (by identifier, with the
syntax tree) and returns an :class:`Edit` that adds the same element renamed for the new
flow right after it: a copied line when the element stands on its own lines, the same
line with the new element appended when it shares a line with others.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from tree_sitter import Node, Parser

from server import workspace_files
from tools.mesh_index.ts_queries import language

LIST_TYPES = frozenset(
    {
        "array",
        "formal_parameters",
        "named_imports",
        "switch_body",
        "class_body",
        "statement_block",
        "program",
        "object",
        "enum_body",
        "interface_body",
        "object_type",
    }
)
IDENT_TYPES = frozenset(
    {
        "identifier",
        "type_identifier",
        "property_identifier",
        "shorthand_property_identifier",
        "shorthand_property_identifier_pattern",
    }
)


@dataclass
class Edit:
    """``insert``: add ``snippet`` after ``line``; ``replace``: ``snippet`` replaces ``line``..``end_line``."""

    mode: str
    line: int
    end_line: int
    anchor: str
    snippet: str


@dataclass
class Source:
    text: str
    lines: list[str]
    root: Node
    data: bytes

    def node_text(self, node: Node) -> str:
        return self.data[node.start_byte : node.end_byte].decode("utf-8", errors="replace")


def parse_text(text: str, tsx: bool = False) -> Source:
    data = text.encode()
    root = Parser(language("tsx" if tsx else "ts")).parse(data).root_node
    return Source(text, text.splitlines(), root, data)


def read_source(path: Path) -> Source | None:
    try:
        return parse_text(workspace_files.read_regular_file(path).decode("utf-8"), path.suffix == ".tsx")
    except (OSError, UnicodeDecodeError):
        return None


def walk(node: Node) -> Iterable[Node]:
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(n.children))


def find_identifiers(src: Source, names: set[str], within: Node | None = None) -> list[Node]:
    return [n for n in walk(within or src.root) if n.type in IDENT_TYPES and src.node_text(n) in names]


def _element(node: Node, names: set[str], src: Source) -> tuple[Node, Node] | None:
    """(element, container): the child of the nearest list-like ancestor that holds ``node``."""
    elem = node
    while elem.parent is not None and elem.parent.type not in LIST_TYPES:
        elem = elem.parent
    container = elem.parent
    if container is None:
        return None
    # `[h.jobType, h]` inside a list: the inner array is the element, not `h`
    while container.type == "array" and container.parent is not None:
        items = [c for c in container.named_children if c.type != "comment"]
        if not all(find_identifiers(src, names, c) for c in items):
            break
        up = container
        while up.parent is not None and up.parent.type not in LIST_TYPES:
            up = up.parent
        if up.parent is None or up.parent.type not in ("array", "arguments"):
            break
        elem, container = up, up.parent
    return elem, container


def _line_span(elem: Node) -> tuple[int, int]:
    return elem.start_point[0], elem.end_point[0]


def _alone(elem: Node, container: Node) -> bool:
    start, end = _line_span(elem)
    for other in container.named_children:
        if other.id == elem.id or other.type == "comment":
            continue
        o_start, o_end = _line_span(other)
        if o_start <= end and o_end >= start:
            return False
    # the container's own brackets on the same line (`[a]`, `{ A }`) make it share the line too
    return not (container.start_point[0] == start or container.end_point[0] == end) or container.type in (
        "program",
        "class_body",
        "statement_block",
        "switch_body",
    )


def edit_for_element(src: Source, elem: Node, container: Node, rename: Callable[[str], str]) -> Edit:
    start, end = _line_span(elem)
    if container.type == "named_imports" or (container.type == "program" and elem.type == "import_statement"):
        stmt = elem
        while stmt.type != "import_statement" and stmt.parent is not None:
            stmt = stmt.parent
        whole = src.node_text(stmt)
        if rename(whole) != whole and "from" in whole and rename(_source_of(src, stmt)) != _source_of(src, stmt):
            s, e = _line_span(stmt)
            block = "\n".join(src.lines[s : e + 1])
            return Edit("insert", e + 1, e + 1, src.lines[e].strip(), rename(block))
    if _alone(elem, container):
        block = "\n".join(src.lines[start : end + 1])
        needs_comma = container.type in (
            "array",
            "formal_parameters",
            "named_imports",
            "object",
            "enum_body",
        ) and not src.lines[end].rstrip().endswith(",")
        if needs_comma:
            return Edit(
                "replace", end + 1, end + 1, src.lines[end].strip(), src.lines[end].rstrip() + ",\n" + rename(block)
            )
        return Edit("insert", end + 1, end + 1, src.lines[end].strip(), rename(block))
    # shares its line(s): append the renamed element right after it, on the same line
    line_start = sum(len(x) + 1 for x in src.lines[:start])
    text_before = src.text[line_start:]
    rel_end = len(src.data[: elem.end_byte].decode("utf-8", errors="replace")) - line_start
    element = src.node_text(elem)
    old = "\n".join(src.lines[start : end + 1])
    new = text_before[:rel_end] + ", " + rename(element) + text_before[rel_end : len(old)]
    return Edit("replace", start + 1, end + 1, src.lines[start].strip(), new)


def _source_of(src: Source, stmt: Node) -> str:
    node = stmt.child_by_field_name("source")
    return src.node_text(node) if node is not None else ""


def sibling_edits(
    src: Source,
    names: set[str],
    rename: Callable[[str], str],
    within: Node | None = None,
    skip: Callable[[Node], bool] | None = None,
    accept: Callable[[Node], bool] | None = None,
) -> list[Edit]:
    """One edit per element of ``src`` naming any of ``names`` (a class, a variable, a member);
    ``accept`` filters the identifiers (e.g. members read through one enum only)."""
    edits: list[Edit] = []
    seen: set[int] = set()
    for ident in find_identifiers(src, names, within):
        if accept is not None and not accept(ident):
            continue
        found = _element(ident, names, src)
        if found is None:
            continue
        elem, container = found
        if elem.id in seen or (skip is not None and skip(elem)):
            continue
        if any(a.id in seen for a in _ancestors(elem)):
            continue
        seen.add(elem.id)
        edits.append(edit_for_element(src, elem, container, rename))
    edits.sort(key=lambda e: e.line)
    return edits


def _ancestors(node: Node) -> Iterable[Node]:
    parent = node.parent
    while parent is not None:
        yield parent
        parent = parent.parent


def apply_edits(text: str, edits: list[Edit]) -> str:
    """The text with ``edits`` applied (bottom-up, so line numbers refer to the original text)."""
    lines = text.splitlines()
    for edit in sorted(edits, key=lambda e: (e.line, e.mode == "replace"), reverse=True):
        new = edit.snippet.splitlines()
        if edit.mode == "replace":
            lines[edit.line - 1 : edit.end_line] = new
        else:
            lines[edit.line : edit.line] = new
    return "\n".join(lines) + ("\n" if text.endswith("\n") else "")


STATEMENTS = frozenset(
    {"return_statement", "expression_statement", "lexical_declaration", "variable_declaration", "if_statement"}
)


def comparison_edits(
    src: Source, names: set[str], rename: Callable[[str], str], accept: Callable[[Node], bool] | None = None
) -> list[Edit]:
    """``type === X`` comparisons naming ``names``: the same line with ``|| type === NEW`` after the comparison."""
    out: list[Edit] = []
    seen: set[int] = set()
    for ident in find_identifiers(src, names):
        if accept is not None and not accept(ident):
            continue
        node = ident.parent
        while node is not None and not (
            node.type == "binary_expression" and src.node_text(node.child_by_field_name("operator")) in ("===", "==")
        ):
            if node.type in STATEMENTS:
                node = None
                break
            node = node.parent
        if node is None or node.id in seen:
            continue
        seen.add(node.id)
        start, end = node.start_point[0], node.end_point[0]
        line_start = sum(len(x) + 1 for x in src.lines[:start])
        rel_start = len(src.data[: node.start_byte].decode("utf-8", errors="replace")) - line_start
        rel_end = len(src.data[: node.end_byte].decode("utf-8", errors="replace")) - line_start
        old = "\n".join(src.lines[start : end + 1])
        expr = src.node_text(node)
        new = old[:rel_start] + expr + " || " + rename(expr) + old[rel_end:]
        out.append(Edit("replace", start + 1, end + 1, src.lines[start].strip(), new))
    return out
