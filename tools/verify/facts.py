"""File-level facts verify_flow needs and the static index does not record.

Each extractor re-parses one file (through :mod:`tools.verify.tsparse`) and reports
what it sees with 1-based line numbers; it never resolves a symbol across files (that
is the index's job) and never guesses: a shape it does not recognise is reported as
``opaque`` / ``unresolved`` so the checks can answer ``unknown``.

- :func:`handler_facts` — the ways a handler's ``handle`` method returns (each ``return``,
  and falling off its end), its reads of ``job.data.<field>`` outside the envelope fields,
  and the places it hands the job or its envelope to other code;
- :func:`bare_throws` — ``throw new Error(...)`` inside a class (the routing worker);
- :func:`registry_entries` — the keys of the job registry interface.

Module providers live in :mod:`tools.verify.modules`, producer-site facts (direct queue
pushes, transactions) in :mod:`tools.verify.facts_producers`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from tree_sitter import Node

from server.config import StaticConventions
from tools.verify.tsparse import (
    FUNCTION_NODES,
    ParsedFile,
    class_methods,
    enclosing,
    find_classes,
    line_of,
    local_imports,
    object_pairs,
    unwrap,
    walk,
)

_SPACE = re.compile(r"\s+|[?!](?=\.)")


def norm_expr(text: str) -> str:
    """Expression text without blanks, optional chaining or non-null marks: ``job?.data`` -> ``job.data``."""
    return _SPACE.sub("", text)


# --- handlers ---------------------------------------------------------------------------

ReturnKind = Literal["original_payload", "nothing", "missing_key", "wrong_value", "opaque"]


@dataclass(frozen=True)
class ReturnFact:
    """One way ``handle`` can return: ``kind`` says what the returned value is."""

    line: int
    kind: ReturnKind
    text: str


@dataclass(frozen=True)
class EnvelopeRead:
    """A read of ``job.data.<field>`` where ``field`` is not an envelope field."""

    line: int
    field: str
    text: str


@dataclass
class HandlerFacts:
    class_line: int | None = None
    method_line: int | None = None
    returns: list[ReturnFact] = field(default_factory=list)
    envelope_reads: list[EnvelopeRead] = field(default_factory=list)
    envelope_passed: list[EnvelopeRead] = field(default_factory=list)
    """Places where the job or its envelope is handed to other code (what is read there is not visible)."""

    @property
    def found(self) -> bool:
        return self.method_line is not None


class _Envelope:
    """Expressions that denote the job envelope (``job.data``) and its payload inside ``handle``."""

    def __init__(self, conv: StaticConventions) -> None:
        self.conv = conv
        self.jobs: set[str] = set()
        self.envelopes: set[str] = set()
        self.payloads: set[str] = set()

    def add_job(self, name: str) -> None:
        self.jobs.add(name)
        self.add_envelope(f"{name}.{self.conv.job_data_field}")

    def add_envelope(self, expr: str) -> None:
        self.envelopes.add(expr)
        self.payloads.add(f"{expr}.{self.conv.job_payload_field}")

    def is_payload(self, expr: str) -> bool:
        return expr in self.payloads


def _bind_parameter(pf: ParsedFile, method: Node, env: _Envelope) -> None:
    params = method.child_by_field_name("parameters")
    first = next((p for p in (params.named_children if params else []) if p.type.endswith("_parameter")), None)
    if first is None:
        return
    pattern = first.child_by_field_name("pattern")
    if pattern is None:
        return
    if pattern.type == "identifier":
        env.add_job(pf.text(pattern))
    elif pattern.type == "object_pattern":
        _bind_destructuring(pf, pattern, env, source="job")


def _bind_destructuring(
    pf: ParsedFile, pattern: Node, env: _Envelope, *, source: str, reads: list[EnvelopeRead] | None = None
) -> None:
    """``{ data } = job`` binds an envelope; ``{ payload, x } = job.data`` binds a payload and reads x."""
    conv = env.conv
    for child in pattern.named_children:
        if child.type == "shorthand_property_identifier_pattern":
            key = local = pf.text(child)
        elif child.type == "pair_pattern":
            key = pf.text(child.child_by_field_name("key")).strip("'\"")
            value = child.child_by_field_name("value")
            local = pf.text(value) if value is not None and value.type == "identifier" else ""
        elif child.type == "object_assignment_pattern":
            left = child.child_by_field_name("left")
            key = local = pf.text(left)
        else:
            continue
        if source == "job":
            if key == conv.job_data_field and local:
                env.add_envelope(local)
        elif source == "envelope":
            if key == conv.job_payload_field:
                if local:
                    env.payloads.add(local)
            elif key not in conv.job_envelope_fields and reads is not None:
                reads.append(EnvelopeRead(line_of(child), key, pf.text(child)))


def _classify_return(pf: ParsedFile, node: Node, env: _Envelope) -> ReturnKind:
    return _classify_value(pf, next((c for c in node.named_children if c.type != "comment"), None), env)


def _classify_value(pf: ParsedFile, value: Node | None, env: _Envelope) -> ReturnKind:
    value = unwrap(value)
    if value is None or pf.text(value) == "undefined":
        return "nothing"
    if value.type != "object":
        return "opaque"
    key = env.conv.original_payload_key
    pairs = object_pairs(pf, value)
    if key not in pairs:
        has_spread = any(c.type == "spread_element" for c in value.named_children)
        return "opaque" if has_spread else "missing_key"
    target = unwrap(pairs[key])
    return "original_payload" if target is not None and env.is_payload(norm_expr(pf.text(target))) else "wrong_value"


Ending = Literal["returns", "falls_through", "unclear"]

_PLAIN_STATEMENTS = frozenset(
    {"expression_statement", "lexical_declaration", "variable_declaration", "empty_statement"}
)


def _ending(node: Node | None) -> Ending:
    """How control leaves ``node`` (a statement): always by ``return``/``throw``, by falling off its end, or unclear.

    Blocks are judged by their last statement, ``if`` by both branches (no ``else`` can fall
    through), ``try`` by its block and handler unless its ``finally`` always leaves. Loops,
    ``switch`` and labels are ``unclear``: whether they fall through is not read.
    """
    if node is None:
        return "falls_through"
    kind = node.type
    if kind in ("return_statement", "throw_statement"):
        return "returns"
    if kind in _PLAIN_STATEMENTS:
        return "falls_through"
    if kind == "statement_block":
        statements = [c for c in node.named_children if c.type != "comment"]
        return _ending(statements[-1] if statements else None)
    if kind in ("else_clause", "catch_clause", "finally_clause"):
        inner = node.child_by_field_name("body")
        return _ending(inner or next((c for c in reversed(node.named_children) if c.type != "comment"), None))
    if kind == "if_statement":
        alternative = node.child_by_field_name("alternative")
        if alternative is None:
            return "falls_through"
        return _both(_ending(node.child_by_field_name("consequence")), _ending(alternative))
    if kind == "try_statement":
        finalizer = node.child_by_field_name("finalizer")
        if finalizer is not None and _ending(finalizer) == "returns":
            return "returns"
        handler = node.child_by_field_name("handler")
        body = _ending(node.child_by_field_name("body"))
        return body if handler is None else _both(body, _ending(handler))
    return "unclear"


def _both(first: Ending, second: Ending) -> Ending:
    """Ending of two alternative paths: falls through if either can, returns only if both do."""
    if "falls_through" in (first, second):
        return "falls_through"
    return "returns" if first == second == "returns" else "unclear"


def handler_facts(pf: ParsedFile, class_name: str, conv: StaticConventions) -> HandlerFacts:
    """Return shapes and envelope reads of ``class_name``'s handle method (see module doc)."""
    return pf.memoized(("handler", class_name, id(conv)), lambda: _handler_facts(pf, class_name, conv))


def _handler_facts(pf: ParsedFile, class_name: str, conv: StaticConventions) -> HandlerFacts:
    facts = HandlerFacts()
    classes = find_classes(pf, class_name)
    if not classes:
        return facts
    facts.class_line = line_of(classes[0])
    methods = class_methods(pf, classes[0], conv.handler_methods)
    if not methods:
        return facts
    method = methods[0]
    facts.method_line = line_of(method)
    body = method.child_by_field_name("body")
    if body is None:
        return facts
    env = _Envelope(conv)
    _bind_parameter(pf, method, env)
    for node in walk(body):
        named = node.type in ("identifier", "shorthand_property_identifier")  # `job`, or `{ job }` in an object
        is_envelope = (named or node.type == "member_expression") and norm_expr(pf.text(node)) in env.envelopes
        is_job = named and pf.text(node) in env.jobs
        if (is_envelope or is_job) and _passed_along(node):
            facts.envelope_passed.append(EnvelopeRead(line_of(node), "", pf.text(node.parent or node)[:200]))
        if node.type == "variable_declarator":
            _track_declarator(pf, node, env, facts.envelope_reads)
        elif node.type == "member_expression":
            obj = unwrap(node.child_by_field_name("object"))  # `(job.data as any).x` reads job.data too
            prop = pf.text(node.child_by_field_name("property"))
            if obj is not None and norm_expr(pf.text(obj)) in env.envelopes and prop not in conv.job_envelope_fields:
                facts.envelope_reads.append(EnvelopeRead(line_of(node), prop, pf.text(node)))
        elif node.type == "subscript_expression":
            obj = unwrap(node.child_by_field_name("object"))
            index = node.child_by_field_name("index")
            if obj is not None and index is not None and norm_expr(pf.text(obj)) in env.envelopes:
                key = pf.text(index).strip("'\"`")
                if index.type == "string" and key not in conv.job_envelope_fields:
                    facts.envelope_reads.append(EnvelopeRead(line_of(node), key, pf.text(node)))
    if body.type != "statement_block":  # handle = async (job) => ({ ... }): the expression is the return value
        facts.returns.append(ReturnFact(line_of(body), _classify_value(pf, body, env), pf.text(body)[:200]))
        return facts
    for node in walk(body, skip=FUNCTION_NODES):
        if node.type == "return_statement":
            facts.returns.append(ReturnFact(line_of(node), _classify_return(pf, node, env), pf.text(node)[:200]))
    ending = _ending(body)
    if ending == "falls_through":
        facts.returns.append(ReturnFact(body.end_point[0] + 1, "nothing", "(end of handle without return)"))
    elif ending == "unclear":
        last = next((c for c in reversed(body.named_children) if c.type != "comment"), body)
        what = last.type.replace("_", " ")
        facts.returns.append(ReturnFact(line_of(last), "opaque", f"(the {what} ending it may finish without a return)"))
    return facts


def _passed_along(node: Node) -> bool:
    """True when the job or its envelope (``job``, ``job.data``) is handed to other code rather than read here."""
    current = node
    parent = node.parent
    while parent is not None and parent.type in ("parenthesized_expression", "as_expression", "non_null_expression",
                                                  "satisfies_expression", "await_expression"):
        current, parent = parent, parent.parent
    if parent is None:
        return False
    if parent.type in ("member_expression", "subscript_expression"):
        return parent.child_by_field_name("object") != current
    if parent.type == "variable_declarator":
        return False
    return not (parent.type == "return_statement" or enclosing(current, frozenset({"return_statement"})))


def _track_declarator(pf: ParsedFile, node: Node, env: _Envelope, reads: list[EnvelopeRead]) -> None:
    name = node.child_by_field_name("name")
    value = unwrap(node.child_by_field_name("value"))
    if name is None or value is None:
        return
    value_text = norm_expr(pf.text(value))
    if name.type == "identifier":
        local = pf.text(name)
        if value_text in env.envelopes:
            env.add_envelope(local)
        elif env.is_payload(value_text):
            env.payloads.add(local)
    elif name.type == "object_pattern":
        if value_text in env.jobs:
            _bind_destructuring(pf, name, env, source="job")
        elif value_text in env.envelopes:
            _bind_destructuring(pf, name, env, source="envelope", reads=reads)


# --- workers ----------------------------------------------------------------------------


@dataclass(frozen=True)
class ThrowFact:
    line: int
    text: str


def bare_throws(pf: ParsedFile, class_name: str, conv: StaticConventions) -> list[ThrowFact] | None:
    """``throw new Error(...)`` (or ``throw Error(...)``) in ``class_name``; ``None`` if the class is absent."""
    return pf.memoized(("throws", class_name, id(conv)), lambda: _bare_throws(pf, class_name, conv))


def _bare_throws(pf: ParsedFile, class_name: str, conv: StaticConventions) -> list[ThrowFact] | None:
    classes = find_classes(pf, class_name)
    if not classes:
        return None
    out = []
    for node in walk(classes[0]):
        if node.type != "throw_statement":
            continue
        expr = unwrap(next((c for c in node.named_children if c.type != "comment"), None))
        if expr is None:
            continue
        if expr.type == "new_expression":
            ctor = expr.child_by_field_name("constructor")
        elif expr.type == "call_expression":
            ctor = expr.child_by_field_name("function")
        else:
            continue
        if ctor is not None and ctor.type == "identifier" and pf.text(ctor) in conv.bare_error_classes:
            out.append(ThrowFact(line_of(node), pf.text(node)[:200]))
    return out


# --- job registry -----------------------------------------------------------------------


@dataclass(frozen=True)
class RegistryEntry:
    """One key of a registry interface: ``[JobMessagingType.X]: IPayload`` gives key ``JobMessagingType.X``."""

    registry: str
    line: int
    key: str
    key_is_string: bool
    payload_type: str


def registry_entries(pf: ParsedFile, conv: StaticConventions) -> list[RegistryEntry]:
    """Keys of every interface (or object type alias) named in ``job_registry`` declared in the file.

    Keys keep the file's local names; ``key`` of an imported alias is rewritten to the imported
    name (``import { JobMessagingType as J }`` turns ``J.X`` into ``JobMessagingType.X``).
    """
    imports = local_imports(pf)
    out: list[RegistryEntry] = []
    for node in walk(pf.root, skip=FUNCTION_NODES):
        if node.type not in ("interface_declaration", "type_alias_declaration"):
            continue
        name = pf.text(node.child_by_field_name("name"))
        if name not in conv.job_registry:
            continue
        body = node.child_by_field_name("body") or node.child_by_field_name("value")
        if body is None:
            continue
        for prop in body.named_children:
            if prop.type != "property_signature":
                continue
            key_node = prop.child_by_field_name("name")
            if key_node is None:
                continue
            annotation = prop.child_by_field_name("type")
            payload = pf.text(annotation).lstrip(":").strip() if annotation is not None else ""
            if key_node.type == "computed_property_name":
                inner = unwrap(next(iter(key_node.named_children), None))
                if inner is None:
                    continue
                if inner.type == "string":
                    out.append(RegistryEntry(name, line_of(prop), pf.text(inner).strip("'\"`"), True, payload))
                    continue
                key = norm_expr(pf.text(inner))
                head, _, rest = key.partition(".")
                key = f"{imports.get(head, head)}.{rest}" if rest else imports.get(head, head)
                out.append(RegistryEntry(name, line_of(prop), key, False, payload))
            elif key_node.type == "string":
                out.append(RegistryEntry(name, line_of(prop), pf.text(key_node).strip("'\"`"), True, payload))
    return out
