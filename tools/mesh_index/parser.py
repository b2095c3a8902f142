"""Per-file facts: parse one file with tree-sitter and keep what the index links later.

:func:`extract` returns a JSON-ready dict (cached by content hash) holding only this file's
syntax: imports and exports, top-level enums / objects / constants / functions, classes
(bases, decorators, fields, the filter methods of post-processors, the names a worker
mentions, its ``switch`` cases), the calls named in the conventions (createJob,
withFallback, createEvent, queue.add, ...), object literals naming streams, groups or DI
providers, and SQL held in strings. Nothing here resolves a name across files: that is
:mod:`tools.mesh_index.symbols`' job, so one changed file never invalidates another's facts.

Extraction relies on tree-sitter queries (run in C) and byte pre-filters, never on a
Python walk of every node, to stay within a small factor of the parse time.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # tree-sitter is imported only where files are parsed
    from tree_sitter import Node

from tools.mesh_index.class_facts import ClassFacts
from tools.mesh_index.decl_facts import DeclFacts
from tools.mesh_index.expressions import (
    enclosing_symbol,
    line_of,
    object_entries,
    param_names,
    string_value,
    text,
    to_expr,
    type_exprs,
)
from tools.mesh_index.literal_facts import BUILTINS, FACTS_VERSION, LiteralFacts, json_facts
from tools.mesh_index.sql_sites import sql_facts
from tools.mesh_index.ts_queries import ExtractConfig, parser, queries
from tools.mesh_index.word_sites import call_sites, lookup_objects, return_values

__all__ = ["FACTS_VERSION", "ExtractConfig", "call_sites", "extract", "lookup_objects", "return_values"]

NEW_CALL = re.compile(rb"new\s+[A-Z]\w*\s*\(")
CONSTRUCTED = re.compile(rb"new\s+([A-Z][\w$]*)\s*[(<]")  # no leading \b: it would disable the literal search
WORD_BYTES = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
NAMED = re.compile(rb"\s*[A-Za-z_$][\w$]*\s*[,)]")
BRACKETS = re.compile(rb"[()\[\]{},]")


def has_new_with_named_arg(src: bytes) -> bool:
    """Pre-filter of :meth:`LiteralFacts.news`: ``new X(a, NAME)`` somewhere in the file.

    Looks at most 400 bytes past each ``new X(``, jumping from bracket to bracket (a regex
    finds them in C) until the call's ``(`` closes."""
    for m in NEW_CALL.finditer(src):
        depth, end = 1, min(len(src), m.end() + 400)
        for b in BRACKETS.finditer(src, m.end(), end):
            ch = src[b.start()]
            if ch in b"([{":
                depth += 1
            elif ch in b")]}":
                depth -= 1
                if not depth:
                    break
            elif depth == 1 and NAMED.match(src, b.start() + 1):  # a top-level ", NAME"
                return True
    return False


def constructed(src: bytes) -> list[str]:
    """Class names of every ``new X(`` / ``new X<`` whose ``new`` starts a word (as ``\bnew`` would)."""
    return [m.group(1).decode() for m in CONSTRUCTED.finditer(src)
            if m.start() == 0 or src[m.start() - 1] not in WORD_BYTES]


@lru_cache(maxsize=8)
def _sql_needles(cfg: ExtractConfig) -> tuple[bytes, ...]:
    """The SQL tokens of :meth:`_FileExtractor.run`'s pre-filter, encoded once per config."""
    return tuple(t.encode() for t in cfg.sql_tokens)


def extract(source: bytes, kind: str, cfg: ExtractConfig) -> dict[str, Any]:
    """Facts of one file (``kind`` is ts, tsx, sql or json)."""
    if kind == "sql":
        return {"v": FACTS_VERSION, "sql": sql_facts(source.decode("utf-8", "replace"), 1, None, cfg.event_table)}
    if kind == "json":
        return json_facts(source, cfg)
    tree = parser(kind).parse(source)
    root = tree.root_node
    facts: dict[str, Any] = {"v": FACTS_VERSION}
    if root.has_error:
        facts["error"] = True
    _FileExtractor(source, kind, cfg, facts).run(root)
    return facts


class _FileExtractor(ClassFacts, LiteralFacts, DeclFacts):
    def __init__(self, source: bytes, kind: str, cfg: ExtractConfig, facts: dict[str, Any]):
        self.src = source
        self.kind = kind
        self.cfg = cfg
        self.f = facts
        self.q = queries(kind, cfg)

    def run(self, root: Node) -> None:
        for node in root.named_children:
            self.top_level(node)
        sql_tokens = _sql_needles(self.cfg)
        self.calls(root)  # each finds its names in the text first: nothing to do in most files
        self.objects(root)
        if b"new " in self.src:
            built = sorted(set(constructed(self.src)) - BUILTINS)
            if built:
                self.f["constructs"] = built  # classes this file instantiates (a post-processor is started here)
            if has_new_with_named_arg(self.src):
                self.news(root)
        if sql_tokens:
            low = self.src.lower()  # once, not once per token
            if any(tok in low for tok in sql_tokens):
                self.sql_strings(root)
        if b"migrations" in self.src:
            self.migration_refs(root)
        if b"getService" in self.src:
            self.grpc_clients(root)
        if b"require(" in self.src or b"import(" in self.src:
            self.dynamic_imports(root)
        if b"setGlobalPrefix" in self.src or b"defaultVersion" in self.src:
            self.http_prefix()

    # -- top level -------------------------------------------------------------------------
    def add(self, key: str, item: Any) -> None:
        self.f.setdefault(key, []).append(item)

    def top_level(self, node: Node, exported: bool = False, decorators: list[Node] | None = None) -> None:
        t = node.type
        if t == "import_statement":
            self.import_statement(node)
        elif t == "export_statement":
            self.export_statement(node)
        elif t == "ambient_declaration":
            for child in node.named_children:
                self.top_level(child, exported)
        elif t in ("enum_declaration", "class_declaration", "abstract_class_declaration",
                   "function_declaration", "lexical_declaration", "variable_declaration", "interface_declaration",
                   "type_alias_declaration"):
            for name in self.declaration(node, decorators or []):
                if exported:
                    self.add("exports", [name, name])
        elif t == "expression_statement" and exported is False:
            return

    def import_statement(self, node: Node) -> None:
        source = node.child_by_field_name("source")
        if source is None:
            return
        spec = string_value(source)
        clause = next((c for c in node.named_children if c.type == "import_clause"), None)
        if clause is None:
            self.add("side_imports", spec)
            return
        for part in clause.named_children:
            if part.type == "identifier":
                self.add("imports", [text(part), "default", spec])
            elif part.type == "namespace_import":
                ident = next((c for c in part.named_children if c.type == "identifier"), None)
                if ident is not None:
                    self.add("imports", [text(ident), "*", spec])
            elif part.type == "named_imports":
                for s in part.named_children:
                    if s.type != "import_specifier":
                        continue
                    name = text(s.child_by_field_name("name"))
                    alias = s.child_by_field_name("alias")
                    self.add("imports", [text(alias) if alias is not None else name, name, spec])

    def export_statement(self, node: Node) -> None:
        source = node.child_by_field_name("source")
        spec = string_value(source) if source is not None else None
        decl = node.child_by_field_name("declaration")
        named = node.named_children  # each access builds new Node objects: once
        decorators = [c for c in named if c.type == "decorator"]
        if decl is not None:
            is_default = any(c.type == "default" for c in node.children)
            names = self.declaration(decl, decorators)
            for name in names:
                self.add("exports", ["default" if is_default else name, name])
            return
        clause = next((c for c in named if c.type == "export_clause"), None)
        ns = next((c for c in named if c.type == "namespace_export"), None)
        if clause is not None:
            for s in clause.named_children:
                if s.type != "export_specifier":
                    continue
                name = text(s.child_by_field_name("name"))
                alias = s.child_by_field_name("alias")
                exported = text(alias) if alias is not None else name
                if spec is None:
                    self.add("exports", [exported, name])
                else:
                    self.add("reexports", [exported, name, spec])
        elif ns is not None and spec is not None:
            ident = next((c for c in ns.named_children if c.type in ("identifier", "string")), None)
            if ident is not None:
                self.add("reexports", [text(ident).strip("'\""), "*", spec])
        elif spec is not None:
            self.add("stars", spec)
        else:
            value = node.child_by_field_name("value")
            if value is not None and value.type == "identifier":
                self.add("exports", ["default", text(value)])

    def declaration(self, node: Node, decorators: list[Node]) -> list[str]:
        t = node.type
        if t == "enum_declaration":
            name = text(node.child_by_field_name("name"))
            members = []
            body = node.child_by_field_name("body")
            for m in body.named_children if body is not None else []:
                if m.type == "enum_assignment":
                    key = m.child_by_field_name("name")
                    key_text = string_value(key) if key is not None and key.type == "string" else text(key)
                    members.append([key_text, to_expr(m.child_by_field_name("value"), local=False), line_of(m)])
                elif m.type in ("property_identifier", "string"):
                    members.append([text(m).strip("'\""), ["?", "auto"], line_of(m)])
            self.f.setdefault("enums", {})[name] = [line_of(node), members]
            self.record_decl(node, name, "enum")
            return [name]
        if t in ("class_declaration", "abstract_class_declaration"):
            name = self.class_declaration(node, decorators)
            self.record_decl(node, name, "class")
            return [name]
        if t == "type_alias_declaration":
            self.record_decl(node, text(node.child_by_field_name("name")), "type")
            return []
        if t == "interface_declaration":
            name = text(node.child_by_field_name("name"))
            self.record_decl(node, name, "interface")
            if name in self.cfg.job_registries:
                self.registry(node)
            return []
        if t == "function_declaration":
            name = text(node.child_by_field_name("name"))
            self.function(name, node)
            self.record_decl(node, name, "function")
            return [name]
        if t in ("lexical_declaration", "variable_declaration"):
            names = []
            for d in node.named_children:
                if d.type != "variable_declarator":
                    continue
                name_node = d.child_by_field_name("name")
                if name_node is None or name_node.type != "identifier":
                    continue
                name = text(name_node)
                names.append(name)
                value = d.child_by_field_name("value")
                self.variable(name, value, line_of(d))
                self.record_var_decl(d, name, value)
            return names
        return []

    def variable(self, name: str, value: Node | None, line: int) -> None:
        if value is None:
            return
        as_const = False
        while value.type in ("as_expression", "satisfies_expression", "parenthesized_expression"):
            as_const = as_const or text(value).endswith("as const")
            value = value.named_children[0]
        if value.type == "object":
            self.f.setdefault("objects", {})[name] = [line, object_entries(value, 0, False), as_const]
        elif value.type in ("arrow_function", "function_expression", "function"):
            self.function(name, value)
        elif len(value.text or b"") < 4000:
            self.f.setdefault("consts", {})[name] = [line, to_expr(value, 0, False)]

    def function(self, name: str, node: Node) -> None:
        params = []
        p_node = node.child_by_field_name("parameters")
        single = node.child_by_field_name("parameter")
        if single is not None:
            params.append(text(single))
        for p in p_node.named_children if p_node is not None else []:
            pat = p.child_by_field_name("pattern") or p
            params.append(text(pat) if pat.type == "identifier" else "")
        body = node.child_by_field_name("body")
        ret = None
        lookups: list[str] = []
        body_text = (body.text or b"") if body is not None else b""  # one copy of the body's bytes
        if body is not None:
            if body.type != "statement_block":
                ret = to_expr(body, 0, False)
            else:
                returns = return_values(body, self.src)
                if len(returns) == 1:
                    ret = to_expr(returns[0], 0, False)
            if b"[" in body_text or b".get(" in body_text or b".has(" in body_text:
                lookups = sorted({text(n) for n in lookup_objects(body, self.src)})
        self.f.setdefault("functions", {})[name] = [line_of(node), params, ret, lookups]

    def registry(self, node: Node) -> None:
        """Keys of the job registry interface (``[JobMessagingType.X]: Payload``): each names a job."""
        body = node.child_by_field_name("body")
        keys = []
        for prop in body.named_children if body is not None else ():
            key = prop.child_by_field_name("name") if prop.type == "property_signature" else None
            if key is not None and key.type == "computed_property_name" and key.named_child_count:
                keys.append(to_expr(key.named_children[0], 0, False))
            elif key is not None and key.type == "string":
                keys.append(["s", string_value(key)])
        if keys:
            self.f.setdefault("registry", []).extend(keys)

    # -- classes ---------------------------------------------------------------------------

    def calls(self, root: Node) -> None:
        for call in call_sites(root, self.src, self.cfg):
            fn = call.child_by_field_name("function")
            if fn is None:
                continue
            if fn.type == "member_expression":
                name = text(fn.child_by_field_name("property"))
                receiver = text(fn.child_by_field_name("object"))
            else:
                name, receiver = text(fn), ""
            if name not in self.cfg.call_names:
                continue
            args = call.child_by_field_name("arguments")
            if name in self.cfg.repo_create_calls and not _has_object_arg_with(args, b"type"):
                continue  # repository.create(...) matters only for an event row ({ type, targetServices, ... })
            type_args = call.child_by_field_name("type_arguments")
            self.add("calls", [
                name,
                receiver[:80],
                [to_expr(a) for a in args.named_children] if args is not None else [],
                type_exprs(type_args) if type_args is not None else [],
                line_of(call),
                enclosing_symbol(call),
                _method_params(call),
            ])


def _has_object_arg_with(args: Node | None, key: bytes) -> bool:
    """Whether a call has an object literal argument with a ``key`` property (``create({ type, ... })``)."""
    for a in args.named_children if args is not None else ():
        if a.type == "object" and any(
                c.type in ("pair", "shorthand_property_identifier")
                and ((c.child_by_field_name("key") or c).text or b"") == key for c in a.named_children):
            return True
    return False


NAMED_FUNCTIONS = ("method_definition", "function_declaration", "generator_function_declaration")


def _method_params(node: Node) -> list[str]:
    """Parameter names of the method (or function) around a call, in order: the positions callers bind
    (``write(kind, userId)`` called as ``this.writer.write(RankingListKind.FEED, id)``)."""
    cur, nearest = node.parent, None
    while cur is not None:
        if cur.type in NAMED_FUNCTIONS:
            return param_names(cur)
        if nearest is None and cur.type in ("arrow_function", "function_expression", "function"):
            nearest = cur
        if cur.type in ("class_body", "program"):
            break
        cur = cur.parent
    return param_names(nearest) if nearest is not None else []
