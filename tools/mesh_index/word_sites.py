"""Syntax nodes found from where their names are written, instead of by a query over the tree.

A tree-sitter query matches its pattern against every node under the node it runs on: over
a whole file that costs about as much as the parse. The nodes extraction wants are few and
named in the text (a call name, ``return``, ``[``, ``get``); a substring search finds those
places and tree-sitter's ``descendant_for_byte_range`` the node at each
(:func:`tools.mesh_index.ts_queries.word_nodes`). Each function returns the nodes the query
it replaced captured (``tests/static/test_word_sites.py`` compares them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # tree-sitter is imported only where files are parsed
    from tree_sitter import Node

    from tools.mesh_index.ts_queries import ExtractConfig

from tools.mesh_index.ts_queries import word_nodes, word_spans

__all__ = ["call_sites", "lookup_objects", "return_values"]


def call_sites(root: Node, src: bytes, cfg: ExtractConfig) -> list[Node]:
    """The calls ``name(...)`` / ``x.name(...)`` / ``x?.name<T>(...)`` / ``name`...` `` of the
    configured call names, by start and end (of a chain ``a.add(x).add(y)``, the inner call first).

    The same calls as the query ``(call_expression function: [(identifier) @fn (member_expression
    property: (property_identifier) @fn)] (#any-of? @fn NAMES))``, found from the names' places
    in the text instead of by matching every node of the tree."""
    found = []
    for node in word_nodes(root, src, cfg.call_names):
        t = node.type
        if t == "property_identifier":
            member = node.parent
            if member is None or member.type != "member_expression" or member.child_by_field_name("property") != node:
                continue
            node = member
        elif t != "identifier":
            continue
        call = node.parent
        if call is not None and call.type == "call_expression" and call.child_by_field_name("function") == node:
            found.append(call)
    found.sort(key=_span)
    return found


def return_values(body: Node, src: bytes) -> list[Node]:
    """What the return statements in ``body`` (nested functions included) return: the named
    children of each (an ERROR node aside), in order. The nodes the query ``(return_statement (_) @r)`` captured, found
    from the ``return`` keywords written in the body."""
    out: list[Node] = []
    for start, end in word_spans(src, ("return",), body.start_byte, body.end_byte):
        keyword = body.descendant_for_byte_range(start, end)
        statement = keyword.parent if keyword is not None and keyword.type == "return" else None
        if statement is not None and statement.type == "return_statement":
            out.extend(c for c in statement.named_children if c.type != "ERROR")  # `(_)` matches no ERROR
    return out


def lookup_objects(body: Node, src: bytes) -> list[Node]:
    """The identifiers ``body`` indexes or asks: ``X[...]``, ``X.get(...)``, ``X.has(...)`` (nested
    functions included), in order. The nodes the query ``[(subscript_expression object: (identifier)
    @o) (call_expression function: (member_expression object: (identifier) @o property:
    (property_identifier) @p) (#any-of? @p "get" "has"))]`` captured, found from the ``[`` and
    the names written in the body."""
    found: list[Node] = []
    lo, hi = body.start_byte, body.end_byte
    i = src.find(b"[", lo, hi)
    while i >= 0:
        bracket = body.descendant_for_byte_range(i, i + 1)
        sub = bracket.parent if bracket is not None and bracket.type == "[" else None
        obj = sub.child_by_field_name("object") if sub is not None and sub.type == "subscript_expression" else None
        if obj is not None and obj.type == "identifier":
            found.append(obj)
        i = src.find(b"[", i + 1, hi)
    for start, end in word_spans(src, ("get", "has"), lo, hi):
        prop = body.descendant_for_byte_range(start, end)
        member = prop.parent if prop is not None and prop.type == "property_identifier" else None
        if member is None or member.type != "member_expression" or member.child_by_field_name("property") != prop:
            continue
        call, obj = member.parent, member.child_by_field_name("object")
        if (call is not None and call.type == "call_expression" and call.child_by_field_name("function") == member
                and obj is not None and obj.type == "identifier"):
            found.append(obj)
    found.sort(key=_span)
    return found


def _span(node: Node) -> tuple[int, int]:
    return node.start_byte, node.end_byte
