"""The keys a TypeScript object type allows, read from the workspace's declarations.

``interface T extends A, B { ... }`` and ``type T = { ... } & A`` are followed through every
declaration of the workspace with that name; anything that cannot be read in full (a base
from ``node_modules``, a generic such as ``Partial<T>``, an index signature, two different
declarations with one name) makes the type *open*: :meth:`TypeTable.keys` returns ``None``
and no key is judged against it.
"""

from __future__ import annotations

import re

from tree_sitter import Node

from tools.lint.context import LintContext
from tools.verify.tsparse import ParsedFile, line_of, walk

_MEMBER_NODES = ("property_signature", "method_signature")


class TypeTable:
    def __init__(self, ctx: LintContext) -> None:
        self.ctx = ctx
        self._cache: dict[str, tuple[frozenset[str], str, int] | None] = {}

    def _declarations(self, name: str) -> list[tuple[str, ParsedFile, Node]]:
        pattern = re.compile(rf"\b(?:interface|type)\s+{re.escape(name)}\b")
        out = []
        for rel in self.ctx.source_files:
            if name not in self.ctx.text(rel) or not pattern.search(self.ctx.text(rel)):
                continue
            pf = self.ctx.parse(rel)
            if pf is None:
                continue
            for node in walk(pf.root):
                if node.type in ("interface_declaration", "type_alias_declaration") \
                        and pf.text(node.child_by_field_name("name")) == name:
                    out.append((rel, pf, node))
        return out

    def keys(self, name: str, depth: int = 0) -> tuple[frozenset[str], str, int] | None:
        """(allowed keys, file, line) of type ``name``, or None when the type is open or not found."""
        if name in self._cache:
            return self._cache[name]
        self._cache[name] = None  # cycles stay open
        decls = self._declarations(name) if depth < 8 else []
        results = {self._read(pf, node, depth) for _rel, pf, node in decls}
        found = None
        if len(results) == 1 and None not in results:
            allowed = results.pop()
            assert allowed is not None
            rel, _pf, node = decls[0]
            found = (allowed, rel, line_of(node))
        self._cache[name] = found
        return found

    def _read(self, pf: ParsedFile, node: Node, depth: int) -> frozenset[str] | None:
        if node.type == "interface_declaration":
            keys: set[str] = set()
            for clause in node.named_children:
                if clause.type == "extends_type_clause":
                    for base in clause.named_children:
                        if base.type != "type_identifier":
                            return None
                        found = self.keys(pf.text(base), depth + 1)
                        if found is None:
                            return None
                        keys |= found[0]
            body = node.child_by_field_name("body")
            own = self._members(pf, body)
            return None if own is None else frozenset(keys | own)
        return self._type_keys(pf, node.child_by_field_name("value"), depth)

    def _type_keys(self, pf: ParsedFile, node: Node | None, depth: int) -> frozenset[str] | None:
        if node is None:
            return None
        if node.type == "object_type":
            return self._members(pf, node)
        if node.type == "type_identifier":
            found = self.keys(pf.text(node), depth + 1)
            return None if found is None else found[0]
        if node.type == "intersection_type":
            keys: set[str] = set()
            for part in node.named_children:
                got = self._type_keys(pf, part, depth)
                if got is None:
                    return None
                keys |= got
            return frozenset(keys)
        if node.type == "parenthesized_type":
            return self._type_keys(pf, next(iter(node.named_children), None), depth)
        return None

    @staticmethod
    def _members(pf: ParsedFile, body: Node | None) -> frozenset[str] | None:
        if body is None:
            return None
        keys = set()
        for member in body.named_children:
            if member.type in _MEMBER_NODES:
                keys.add(pf.text(member.child_by_field_name("name")).strip("'\""))
            elif member.type in ("index_signature", "call_signature", "construct_signature"):
                return None
        return frozenset(keys)
