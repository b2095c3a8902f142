"""Facts held in literals: stream/group/DI-provider object literals, SQL strings, JSON config.

A mixin of the file extractor (:mod:`tools.mesh_index.parser`) plus the JSON config reader.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # tree-sitter is imported only where files are parsed
    from tree_sitter import Node

from tools.mesh_index.expressions import enclosing_symbol, line_of, object_entries, text, to_expr
from tools.mesh_index.sql_sites import sql_facts
from tools.mesh_index.ts_queries import ExtractConfig, captures, word_nodes

FACTS_VERSION = 18
BUILTINS = frozenset({"Date", "Map", "Set", "Error", "Promise", "URL", "RegExp", "Array", "Proxy", "WeakMap",
                      "Intl", "Logger"})


def json_facts(source: bytes, cfg: ExtractConfig) -> dict[str, Any]:
    facts: dict[str, Any] = {"v": FACTS_VERSION}
    try:
        data = json.loads(source)
    except ValueError:
        facts["error"] = True
        return facts
    flat: list[list[str]] = []
    bindings: list[Any] = []

    def walk(value: Any, path: list[str]) -> None:
        if len(flat) > 2000:
            return
        if isinstance(value, dict):
            if any(k in value for k in cfg.stream_fields) or any(k in value for k in cfg.group_fields):
                fields = {k: ["s", v] for k, v in value.items() if isinstance(v, str)}
                bindings.append({"fields": fields, "line": 1, "path": ".".join(path)})
            for k, v in value.items():
                walk(v, [*path, str(k)])
        elif isinstance(value, list):
            for i, v in enumerate(value[:200]):
                walk(v, [*path, str(i)])
        elif isinstance(value, str):
            flat.append([".".join(path), value])

    walk(data, [])
    facts["json"] = flat
    if bindings:
        facts["json_bindings"] = bindings
    return facts


class LiteralFacts:
    src: bytes
    cfg: ExtractConfig
    f: dict[str, Any]
    q: dict[str, Any]

    def add(self, key: str, item: Any) -> None:
        self.f.setdefault(key, []).append(item)

    def objects(self, root: Node) -> None:
        seen: set[int] = set()
        for pair in key_pairs(root, self.src, self.cfg):
            obj = pair.parent
            if obj is None or obj.type != "object" or obj.id in seen:
                continue
            seen.add(obj.id)
            entries = {e[1]: e[2] for e in object_entries(obj) if e[0] == "k" and isinstance(e[1], str)}
            line = line_of(obj)
            if "provide" in entries:
                news = sorted({text(n.child_by_field_name("constructor")) for n in _descendants(obj, "new_expression")})
                inject = entries.get("inject", ["a", []])
                self.add("providers", [entries["provide"], inject[1] if inject[0] == "a" else [], news, line])
            keys = self.cfg.stream_fields + self.cfg.group_fields
            if any(k in entries for k in keys):
                binding: dict[str, Any] = {"fields": entries, "line": line, "symbol": enclosing_symbol(obj)}
                owner = _binding_owner(obj)
                if owner is not None:
                    binding.update(owner)
                elif obj.parent is not None and obj.parent.type == "variable_declarator":
                    binding["const"] = text(obj.parent.child_by_field_name("name"))
                self.add("bindings", binding)

    def news(self, root: Node) -> None:
        """``new X(a, OPTIONS)``: constructions passing a named value after the first argument."""
        for node in captures(self.q["news"], root).get("n", []):
            name = text(node.child_by_field_name("constructor"))
            args = node.child_by_field_name("arguments")
            if not name[:1].isupper() or name in BUILTINS or args is None or args.named_child_count < 2:
                continue
            idents = [text(a) for a in args.named_children[1:] if a.type == "identifier"]
            if idents:
                self.add("news", [name, idents, line_of(node)])

    def sql_strings(self, root: Node) -> None:
        tokens = tuple(t.lower() for t in self.cfg.sql_tokens)
        for node in captures(self.q["strings"], root).get("s", []):
            raw_text = (node.text or b"").lower()
            if not any(tok.encode() in raw_text for tok in tokens):
                continue
            symbol = enclosing_symbol(node)
            if symbol is not None and symbol.split(".")[-1] == "down":
                continue
            expr = to_expr(node, 0, True)
            parsed = sql_facts(expr[1], line_of(node), symbol, self.cfg.event_table) if expr[0] == "s" else None
            self.add("sql_strings", [expr, line_of(node), symbol, parsed])


    def migration_refs(self, root: Node) -> None:
        """Strings naming a migrations folder (``join(__dirname, '../src/database/migrations/*.ts')``, a
        DataSource's ``migrations: ['dist/migrations/*.js']``): who runs a repository's migrations."""
        refs = sorted({text(n).strip("'\"`") for n in captures(self.q["strings"], root).get("s", [])
                       if b"migrations" in (n.text or b"") and len(n.text or b"") < 300})
        if refs:
            self.f["migration_refs"] = refs


def key_pairs(root: Node, src: bytes, cfg: ExtractConfig) -> list[Node]:
    """The object properties ``stream: ...`` / ``group: ...`` / ``provide: ...`` (and the other
    configured stream and group fields; a quoted key is not one), in document order.

    The same pairs as the query ``(pair key: [(property_identifier) (string (string_fragment))] @k
    (#any-of? @k KEYS))`` (whose quoted keys never equal a name), found from the keys' places in
    the text instead of by matching every node of the tree."""
    found = []
    for node in word_nodes(root, src, cfg.stream_fields + cfg.group_fields + ("provide",)):
        pair = node.parent if node.type == "property_identifier" else None
        if pair is not None and pair.type == "pair" and pair.child_by_field_name("key") == node:
            found.append(pair)
    return found


def _descendants(node: Node, node_type: str) -> list[Node]:
    out: list[Node] = []
    stack = [node]
    while stack:
        cur = stack.pop()
        if cur.type == node_type:
            out.append(cur)
        stack.extend(cur.named_children)
    return out


def _binding_owner(obj: Node) -> dict[str, Any] | None:
    """The provider (``provide``), ``new X(...)`` or ``super(...)`` an options object belongs to."""
    cur = obj.parent
    depth = 0
    while cur is not None and depth < 12:
        if cur.type == "new_expression":
            return {"new": text(cur.child_by_field_name("constructor"))}
        fn = cur.child_by_field_name("function") if cur.type == "call_expression" else None
        if fn is not None and fn.type == "super":
            sym = enclosing_symbol(cur) or ""
            return {"super_of": sym.split(".")[0]}
        if cur.type == "object":
            for e in object_entries(cur):
                if e[0] == "k" and e[1] == "provide":
                    return {"provide": e[2]}
        cur = cur.parent
        depth += 1
    return None
