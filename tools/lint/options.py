"""option-dropped and config-key-unread: options that never reach their reader.

``option-dropped``: an object literal that becomes a typed options object, with keys the type
does not declare (types read by :mod:`tools.lint.option_types`):

- ``new C(a, { ... })`` where C's constructor declares the parameter at that position with a
  workspace type;
- a provider ``{ provide: TOKEN, useFactory: () => ({ ... }) }`` whose value is injected as
  ``@Inject(TOKEN) options: T`` in a constructor, or as the typed parameter of another
  provider's ``useFactory`` at TOKEN's position in its ``inject: [...]``, or returned under
  the factory's own return type.

``config-key-unread`` (heuristic): in a package's JSON configuration (``config/*.json``), a key
whose sibling keys are read in the workspace's sources but whose own name appears in none.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator
from dataclasses import dataclass

from tree_sitter import Node, Query

from tools.lint import config_keys
from tools.lint.context import LintContext
from tools.lint.model import Evidence, Finding
from tools.lint.option_types import TypeTable
from tools.mesh_index.ts_queries import captures, language
from tools.verify.tsparse import (
    FUNCTION_NODES,
    ParsedFile,
    call_arguments,
    class_methods,
    line_of,
    local_imports,
    object_pairs,
    unwrap,
    walk,
)

# Without a leading ``\b`` (which makes the engine try every position): the literal ``class`` /
# ``new`` is searched fast, and :func:`_at_word_start` checks the boundary the ``\b`` stood for.
_CLASS_NAME = re.compile(r"class\s+(?=(\w+))")  # the name looked at, not consumed: `class\nclass X` finds X
_NEW_WITH_OBJECT = re.compile(r"new\s+[A-Z]\w*\s*\((?:[^(){};]|\([^()]*\))*\{")


def _at_word_start(pattern: re.Pattern[str], text: str) -> Iterator[re.Match[str]]:
    """The matches of ``pattern`` that start a word (what ``\\b`` before it would allow), leftmost first;
    after a match that does not, the search resumes one character further (overlaps are not skipped)."""
    pos = 0
    while (m := pattern.search(text, pos)) is not None:
        before = text[m.start() - 1] if m.start() else " "
        if not (before.isalnum() or before == "_"):
            yield m
            pos = m.end()
        else:
            pos = m.start() + 1


@dataclass(frozen=True)
class Sink:
    type_name: str
    file: str
    line: int
    what: str


@dataclass(frozen=True)
class Literal:
    file: str
    line: int
    keys: tuple[tuple[str, int], ...]  # (key, line)
    what: str


def _type_name(pf: ParsedFile, param: Node) -> str | None:
    ann = param.child_by_field_name("type")
    inner = next(iter(ann.named_children), None) if ann is not None else None
    return pf.text(inner) if inner is not None and inner.type == "type_identifier" else None


def _params(node: Node) -> list[Node]:
    params = node.child_by_field_name("parameters")
    return [p for p in (params.named_children if params else []) if p.type.endswith("_parameter")]


def _literal_keys(pf: ParsedFile, obj: Node) -> tuple[tuple[str, int], ...]:
    keys = []
    for child in obj.named_children:
        if child.type == "pair":
            key = child.child_by_field_name("key")
            if key is not None and key.type in ("property_identifier", "string"):
                keys.append((pf.text(key).strip("'\""), line_of(child)))
        elif child.type == "shorthand_property_identifier":
            keys.append((pf.text(child), line_of(child)))
    return tuple(keys)


def _returned_objects(fn: Node) -> list[Node]:
    body = fn.child_by_field_name("body")
    if body is None:
        return []
    if body.type != "statement_block":
        value = unwrap(body)
        return [value] if value is not None and value.type == "object" else []
    out = []
    for node in walk(body, skip=FUNCTION_NODES):
        if node.type == "return_statement":
            value = unwrap(next(iter(node.named_children), None))
            if value is not None and value.type == "object":
                out.append(value)
    return out


_QUERY_SOURCE = """
[(class_declaration) (abstract_class_declaration)] @cls
(new_expression constructor: (identifier) arguments: (arguments (object))) @new
(pair key: (property_identifier) value: [(arrow_function) (function_expression)]) @factory
"""
_QUERIES: dict[str, Query] = {}


def _query(pf: ParsedFile) -> Query:
    kind = "tsx" if pf.path.suffix == ".tsx" else "ts"
    if kind not in _QUERIES:
        _QUERIES[kind] = Query(language(kind), _QUERY_SOURCE)
    return _QUERIES[kind]


class _Scan:
    def __init__(self, ctx: LintContext) -> None:
        self.ctx = ctx
        self.ctor_params: dict[str, list[list[str | None]]] = {}  # class -> one list per declaration
        self.token_sinks: dict[str, list[Sink]] = {}
        self.token_literals: dict[str, list[Literal]] = {}
        self.typed_literals: list[tuple[Literal, Sink]] = []
        self.new_calls: list[tuple[str, int, Literal]] = []  # (class, arg position, literal)
        self.bases: dict[str, set[str]] = {}  # class without a constructor -> its base class(es)

    def constructor_types(self, cls: str, depth: int = 0) -> list[list[str | None]]:
        """Parameter types of ``cls``'s constructor declarations (inherited through ``extends``)."""
        if cls in self.ctor_params or depth > 6:
            return self.ctor_params.get(cls, [])
        bases = self.bases.get(cls, set())
        return self.constructor_types(next(iter(bases)), depth + 1) if len(bases) == 1 else []

    def token(self, pf: ParsedFile, node: Node | None, imports: dict[str, str]) -> str | None:
        node = unwrap(node)
        if node is None:
            return None
        if node.type == "identifier":
            return imports.get(pf.text(node), pf.text(node))
        if node.type == "string":
            return pf.text(node)[1:-1]
        return None

    def sources(self, rel: str) -> None:
        """Object literals of ``rel`` that become options: ``new C({...})`` arguments, ``useFactory`` results."""
        pf = self.ctx.parse(rel)
        if pf is None:
            return
        imports = local_imports(pf)
        found = captures(_query(pf), pf.root)
        for node in found.get("new", []):
            self._new(rel, pf, node)
        for pair in found.get("factory", []):
            if pf.text(pair.child_by_field_name("key")) in self.ctx.lint.factory_fields and pair.parent is not None:
                self._provider(rel, pf, pair.parent, imports)

    def classes(self, rel: str, names: set[str] | None) -> None:
        """Constructors of the classes of ``rel`` (``names`` only, unless None): parameter types, @Inject sinks."""
        pf = self.ctx.parse(rel)
        if pf is None:
            return
        imports = local_imports(pf)
        for node in captures(_query(pf), pf.root).get("cls", []):
            if names is None or pf.text(node.child_by_field_name("name")) in names:
                self._class(rel, pf, node, imports)

    def _class(self, rel: str, pf: ParsedFile, cls: Node, imports: dict[str, str]) -> None:
        name = pf.text(cls.child_by_field_name("name"))
        ctors = class_methods(pf, cls, ["constructor"])
        if name and not ctors:  # the constructor is inherited: remember the base class
            heritage = next((c for c in cls.named_children if c.type == "class_heritage"), None)
            clauses = heritage.named_children if heritage is not None else []
            clause = next((c for c in clauses if c.type == "extends_clause"), None)
            base = unwrap(clause.child_by_field_name("value")) if clause is not None else None
            if base is not None and base.type == "identifier":
                self.bases.setdefault(name, set()).add(imports.get(pf.text(base), pf.text(base)))
        if not name or not ctors:
            return
        types: list[str | None] = []
        for param in _params(ctors[0]):
            type_name = _type_name(pf, param)
            types.append(type_name)
            for deco in (c for c in param.named_children if c.type == "decorator"):
                call = unwrap(next(iter(deco.named_children), None))
                if call is None or call.type != "call_expression":
                    continue
                fn = pf.text(call.child_by_field_name("function"))
                args = call_arguments(call)
                if fn in self.ctx.lint.inject_decorators and args and type_name:
                    token = self.token(pf, args[0], imports)
                    if token:
                        self.token_sinks.setdefault(token, []).append(
                            Sink(type_name, rel, line_of(param), f"@{fn}({token}) parameter of {name}'s constructor"))
        self.ctor_params.setdefault(name, []).append(types)

    def _new(self, rel: str, pf: ParsedFile, node: Node) -> None:
        ctor = node.child_by_field_name("constructor")
        if ctor is None or ctor.type != "identifier":
            return
        args = node.child_by_field_name("arguments")
        for i, arg in enumerate(a for a in (args.named_children if args else []) if a.type != "comment"):
            if arg.type == "object":
                keys = _literal_keys(pf, arg)
                if keys:
                    self.new_calls.append((pf.text(ctor), i, Literal(rel, line_of(arg), keys,
                                                                      f"argument {i + 1} of new {pf.text(ctor)}(...)")))

    def _provider(self, rel: str, pf: ParsedFile, obj: Node, imports: dict[str, str]) -> None:
        pairs = object_pairs(pf, obj)
        factory = next((unwrap(pairs[f]) for f in self.ctx.lint.factory_fields if f in pairs), None)
        if factory is None or factory.type not in ("arrow_function", "function_expression", "function"):
            return
        token = next((self.token(pf, pairs[f], imports) for f in self.ctx.lint.provide_fields if f in pairs), None)
        for value in _returned_objects(factory):
            keys = _literal_keys(pf, value)
            if not keys:
                continue
            literal = Literal(rel, line_of(value), keys, f"value of the provider of {token or '?'} (useFactory)")
            if token:
                self.token_literals.setdefault(token, []).append(literal)
            ret = factory.child_by_field_name("return_type")
            inner = next(iter(ret.named_children), None) if ret is not None else None
            if inner is not None and inner.type == "type_identifier":
                self.typed_literals.append((literal, Sink(pf.text(inner), rel, line_of(factory),
                                                          "return type of the useFactory")))
        inject = unwrap(pairs.get("inject"))
        if inject is not None and inject.type == "array":
            tokens = [self.token(pf, t, imports) for t in inject.named_children if t.type != "comment"]
            for token_i, param in zip(tokens, _params(factory), strict=False):
                type_name = _type_name(pf, param)
                if token_i and type_name:
                    self.token_sinks.setdefault(token_i, []).append(
                        Sink(type_name, rel, line_of(param), f"typed useFactory parameter injected with {token_i}"))


def _finding(types: TypeTable, literal: Literal, sink: Sink) -> Finding | None:
    found = types.keys(sink.type_name)
    if found is None:
        return None
    allowed, type_file, type_line = found
    extra = [(k, line) for k, line in literal.keys if k not in allowed]
    if not extra:
        return None
    hints = []
    for key, _line in extra:
        close = difflib.get_close_matches(key, sorted(allowed), n=1, cutoff=0.6)
        hints.append(f"'{key}'" + (f" (did you mean '{close[0]}'?)" if close else ""))
    evidence = [Evidence(file=literal.file, line=line, note=f"key '{k}' is set here") for k, line in extra]
    evidence += [Evidence(file=sink.file, line=sink.line, note=f"read as {sink.type_name}: {sink.what}"),
                 Evidence(file=type_file, line=type_line,
                          note=f"{sink.type_name} declares {', '.join(sorted(allowed)) or '(no keys)'}")]
    return Finding(
        code="option-dropped", severity="error", file=literal.file, line=extra[0][1],
        message=f"{literal.what} sets {', '.join(hints)}, which {sink.type_name} does not declare: nothing reads it, "
                "the option is silently dropped",
        fix=f"rename the key to the option {sink.type_name} declares, or add it to {sink.type_name} and read it",
        evidence=evidence, subject=f"options:{sink.type_name}:{','.join(k for k, _l in extra)}",
    )


def check(ctx: LintContext) -> list[Finding]:
    scan = _Scan(ctx)
    inject_markers = [f"@{d}(" for d in ctx.lint.inject_decorators]
    for rel in ctx.production_files:  # pass 1: the literals (few files hold them)
        text = ctx.text(rel)
        if any(f in text for f in ctx.lint.factory_fields) or next(_at_word_start(_NEW_WITH_OBJECT, text), None):
            scan.sources(rel)
    tokens = set(scan.token_literals)
    for rel in ctx.production_files:  # pass 2: constructors injecting a provided token
        text = ctx.text(rel)
        if tokens and any(m in text for m in inject_markers) and any(t in text for t in tokens):
            scan.classes(rel, None)
    wanted = {cls for cls, _p, _l in scan.new_calls} - set(scan.ctor_params)
    declared: dict[str, set[str]] = {}  # the class names each file declares, read once for every round
    for _round in range(6):  # pass 3: the constructed classes, then the bases of those without a constructor
        if not wanted:
            break
        for rel in ctx.production_files:
            if rel not in declared:
                declared[rel] = {m.group(1) for m in _at_word_start(_CLASS_NAME, ctx.text(rel))}
            if not declared[rel].isdisjoint(wanted):
                scan.classes(rel, wanted)
        seen = set(scan.ctor_params) | set(scan.bases)
        wanted = {b for cls in wanted if cls in scan.bases for b in scan.bases[cls]} - seen
    types = TypeTable(ctx)
    pairs: list[tuple[Literal, Sink]] = list(scan.typed_literals)
    for token, literals in scan.token_literals.items():
        for sink in scan.token_sinks.get(token, []):
            pairs.extend((lit, sink) for lit in literals)
    for cls, position, literal in scan.new_calls:
        decls = scan.constructor_types(cls)
        names = {d[position] if position < len(d) else None for d in decls}
        if len(names) == 1 and (name := names.pop()):
            pairs.append((literal, Sink(name, literal.file, literal.line, f"parameter {position + 1} of {cls}")))
    findings: dict[str, Finding] = {}
    for literal, sink in pairs:
        found = _finding(types, literal, sink)
        if found is not None:
            findings.setdefault(f"{literal.file}:{literal.line}:{sink.type_name}", found)
    return [*findings.values(), *config_keys.check(ctx)]

