"""File-level facts verify_flow needs and the static index does not record.

Each extractor re-parses one file (through :mod:`tools.verify.tsparse`) and reports
what it sees with 1-based line numbers; it never resolves a symbol across files (that
is the index's job) and never guesses: a shape it does not recognise is reported as
``opaque`` / ``unresolved`` so the checks can answer ``unknown``.

- :func:`handler_facts` — the return statements of a handler's ``handle`` method and
  its reads of ``job.data.<field>`` outside the envelope fields;
- :func:`bare_throws` — ``throw new Error(...)`` inside a class (the routing worker);
- :func:`module_providers` — the ``providers`` of every Nest ``@Module`` in a file;
- :func:`direct_queue_calls` — ``queue.add(name, ...)`` on a BullMQ ``Queue`` object;
- :func:`transaction_context` — whether a producer call sits inside a DB transaction.
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
    call_arguments,
    callee_name,
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


def _norm(text: str) -> str:
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


def _bind_destructuring(pf: ParsedFile, pattern: Node, env: _Envelope, *, source: str, reads=None) -> None:
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
    value = next((c for c in node.named_children if c.type != "comment"), None)
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
    return "original_payload" if target is not None and env.is_payload(_norm(pf.text(target))) else "wrong_value"


def _falls_through(body: Node) -> bool:
    """True when the last statement of ``body`` is a plain statement (the function ends there)."""
    statements = [c for c in body.named_children if c.type != "comment"]
    if not statements:
        return True
    last = statements[-1]
    return last.type in ("expression_statement", "lexical_declaration", "variable_declaration", "empty_statement")


def handler_facts(pf: ParsedFile, class_name: str, conv: StaticConventions) -> HandlerFacts:
    """Return shapes and envelope reads of ``class_name``'s handle method (see module doc)."""
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
        if node.type == "variable_declarator":
            _track_declarator(pf, node, env, facts.envelope_reads)
        elif node.type == "member_expression":
            obj = node.child_by_field_name("object")
            prop = pf.text(node.child_by_field_name("property"))
            if obj is not None and _norm(pf.text(obj)) in env.envelopes and prop not in conv.job_envelope_fields:
                facts.envelope_reads.append(EnvelopeRead(line_of(node), prop, pf.text(node)))
        elif node.type == "subscript_expression":
            obj = node.child_by_field_name("object")
            index = node.child_by_field_name("index")
            if obj is not None and index is not None and _norm(pf.text(obj)) in env.envelopes:
                key = pf.text(index).strip("'\"`")
                if index.type == "string" and key not in conv.job_envelope_fields:
                    facts.envelope_reads.append(EnvelopeRead(line_of(node), key, pf.text(node)))
    for node in walk(body, skip=FUNCTION_NODES):
        if node.type == "return_statement":
            facts.returns.append(ReturnFact(line_of(node), _classify_return(pf, node, env), pf.text(node)[:200]))
    if _falls_through(body):
        facts.returns.append(ReturnFact(body.end_point[0] + 1, "nothing", "(end of handle without return)"))
    return facts


def _track_declarator(pf: ParsedFile, node: Node, env: _Envelope, reads: list[EnvelopeRead]) -> None:
    name = node.child_by_field_name("name")
    value = unwrap(node.child_by_field_name("value"))
    if name is None or value is None:
        return
    value_text = _norm(pf.text(value))
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


# --- Nest modules -----------------------------------------------------------------------


@dataclass
class ModuleFacts:
    """One ``@Module`` class: its providers (class name -> line) and what could not be read."""

    name: str
    line: int
    providers: dict[str, int] = field(default_factory=dict)
    unresolved: list[tuple[str, int]] = field(default_factory=list)


def _local_arrays(pf: ParsedFile) -> dict[str, Node]:
    out: dict[str, Node] = {}
    for node in walk(pf.root, skip=FUNCTION_NODES | {"class_body"}):
        if node.type == "variable_declarator":
            name = node.child_by_field_name("name")
            value = unwrap(node.child_by_field_name("value"))
            if name is not None and name.type == "identifier" and value is not None and value.type == "array":
                out[pf.text(name)] = value
    return out


def _module_class_name(pf: ParsedFile, decorator: Node) -> str:
    holder = decorator.parent
    if holder is None:
        return ""
    candidates = [holder] if holder.type.endswith("class_declaration") else list(holder.named_children)
    for node in candidates:
        if node.type in ("class_declaration", "abstract_class_declaration"):
            return pf.text(node.child_by_field_name("name"))
    return ""


def module_providers(pf: ParsedFile, conv: StaticConventions) -> list[ModuleFacts]:
    """Every ``@Module({ providers: [...] })`` of the file, providers flattened through local arrays."""
    imports = local_imports(pf)
    arrays = _local_arrays(pf)
    modules = []
    for node in walk(pf.root, skip=FUNCTION_NODES):
        if node.type != "decorator":
            continue
        call = unwrap(next(iter(node.named_children), None))
        if call is None or call.type != "call_expression" or callee_name(pf, call) not in conv.module_decorators:
            continue
        args = call_arguments(call)
        facts = ModuleFacts(name=_module_class_name(pf, node), line=line_of(node))
        modules.append(facts)
        if not args or unwrap(args[0]) is None or unwrap(args[0]).type != "object":
            if args:
                facts.unresolved.append((pf.text(args[0])[:120], line_of(args[0])))
            continue
        pairs = object_pairs(pf, unwrap(args[0]))
        for key in conv.module_provider_fields:
            if key in pairs:
                _collect_providers(pf, pairs[key], facts, imports, arrays, depth=0)
    return modules


def _collect_providers(pf, node, facts: ModuleFacts, imports, arrays, depth: int) -> None:
    node = unwrap(node)
    if node is None or depth > 8:
        return
    if node.type in ("identifier", "shorthand_property_identifier"):
        name = pf.text(node)
        if name in arrays:
            _collect_providers(pf, arrays[name], facts, imports, arrays, depth + 1)
        else:
            facts.providers.setdefault(imports.get(name, name), line_of(node))
    elif node.type == "array":
        for element in node.named_children:
            _collect_providers(pf, element, facts, imports, arrays, depth + 1)
    elif node.type == "spread_element":
        inner = unwrap(next(iter(node.named_children), None))
        if inner is not None and inner.type in ("identifier", "array") and (
            inner.type == "array" or pf.text(inner) in arrays
        ):
            _collect_providers(pf, inner, facts, imports, arrays, depth + 1)
        else:
            facts.unresolved.append((pf.text(node)[:120], line_of(node)))
    elif node.type == "object":
        pairs = object_pairs(pf, node)
        for key in ("provide", "useClass", "useExisting"):
            value = unwrap(pairs.get(key))
            if value is not None and value.type == "identifier":
                name = pf.text(value)
                facts.providers.setdefault(imports.get(name, name), line_of(value))
    elif node.type != "comment":
        facts.unresolved.append((pf.text(node)[:120], line_of(node)))


# --- direct BullMQ pushes ---------------------------------------------------------------


@dataclass(frozen=True)
class DirectQueueCall:
    """``<queue>.add(<name>, ...)`` on a BullMQ object: the job name and queue as written."""

    line: int
    symbol: str
    method: str
    name_expr: str
    queue_expr: str | None


def _queue_bindings(pf: ParsedFile, conv: StaticConventions) -> dict[str, str | None]:
    """Receiver expression (``this.q`` or ``q``) -> queue expression (``@InjectQueue(X)`` / ``new Queue(X)``)."""
    imports = local_imports(pf)
    classes = set(conv.direct_queue_classes)

    def is_queue_type(annotation: Node | None) -> bool:
        if annotation is None:
            return False
        names = [pf.text(n) for n in walk(annotation) if n.type == "type_identifier"]
        return any(imports.get(n, n) in classes for n in names[:1])

    def new_queue(value: Node | None) -> tuple[bool, str | None]:
        value = unwrap(value)
        if value is None or value.type != "new_expression":
            return False, None
        ctor = value.child_by_field_name("constructor")
        if ctor is None or imports.get(pf.text(ctor), pf.text(ctor)) not in classes:
            return False, None
        args = call_arguments(value)
        return True, (pf.text(args[0]) if args else None)

    out: dict[str, str | None] = {}
    for node in walk(pf.root):
        if node.type in ("required_parameter", "optional_parameter"):
            pattern = node.child_by_field_name("pattern")
            if pattern is None or pattern.type != "identifier":
                continue
            queue_expr = None
            injected = False
            for deco in (c for c in node.named_children if c.type == "decorator"):
                call = unwrap(next(iter(deco.named_children), None))
                if call is not None and call.type == "call_expression" and callee_name(pf, call) in (
                    conv.inject_queue_decorators
                ):
                    injected = True
                    args = call_arguments(call)
                    queue_expr = pf.text(args[0]) if args else None
            if injected or is_queue_type(node.child_by_field_name("type")):
                name = pf.text(pattern)
                out[f"this.{name}"] = queue_expr
                out[name] = queue_expr
        elif node.type in ("public_field_definition", "variable_declarator"):
            name_node = node.child_by_field_name("name")
            if name_node is None or name_node.type not in ("identifier", "property_identifier"):
                continue
            is_new, queue_expr = new_queue(node.child_by_field_name("value"))
            if is_new or is_queue_type(node.child_by_field_name("type")):
                key = pf.text(name_node)
                out["this." + key if node.type == "public_field_definition" else key] = queue_expr
    return out


def direct_queue_calls(pf: ParsedFile, conv: StaticConventions) -> list[DirectQueueCall]:
    """Calls of ``direct_queue_calls`` (``add``, ``addBulk``) on BullMQ queue objects of the file."""
    bindings = _queue_bindings(pf, conv)
    if not bindings and not any(c.encode() in pf.source for c in conv.direct_queue_classes):
        return []
    out = []
    for node in walk(pf.root):
        if node.type != "call_expression":
            continue
        fn = unwrap(node.child_by_field_name("function"))
        if fn is None or fn.type != "member_expression":
            continue
        method = pf.text(fn.child_by_field_name("property"))
        if method not in conv.direct_queue_calls:
            continue
        receiver = unwrap(fn.child_by_field_name("object"))
        receiver_text = _norm(pf.text(receiver))
        if receiver_text not in bindings:
            continue
        queue_expr = bindings[receiver_text]
        symbol = _enclosing_symbol(pf, node)
        for name_expr, queue in _pushed_names(pf, call_arguments(node), queue_expr):
            out.append(DirectQueueCall(line_of(node), symbol, method, name_expr, queue))
    return out


def _pushed_names(pf: ParsedFile, args: list[Node], queue_expr: str | None) -> list[tuple[str, str | None]]:
    if not args:
        return []
    first = unwrap(args[0])
    if first is None:
        return []
    if first.type == "array":
        out = []
        for element in first.named_children:
            out.extend(_pushed_names(pf, [element], queue_expr))
        return out
    if first.type == "object":
        pairs = object_pairs(pf, first)
        name = pairs.get("name")
        queue = pairs.get("queueName")
        return [(pf.text(name) if name is not None else "", pf.text(queue) if queue is not None else queue_expr)]
    return [(pf.text(first), queue_expr)]


def _enclosing_symbol(pf: ParsedFile, node: Node) -> str:
    parts = []
    current = node.parent
    while current is not None:
        if current.type in ("method_definition", "function_declaration", "class_declaration"):
            name = current.child_by_field_name("name")
            if name is not None:
                parts.append(pf.text(name))
        current = current.parent
    return ".".join(reversed(parts))


# --- transactions -----------------------------------------------------------------------

TxStatus = Literal["in_transaction", "after_commit", "caller_supplied", "unknown"]


@dataclass(frozen=True)
class TransactionFact:
    status: TxStatus
    line: int | None
    note: str


def transaction_context(pf: ParsedFile, line: int, calls: list[str], conv: StaticConventions) -> TransactionFact:
    """Whether the producer call named in ``calls`` on ``line`` runs inside a database transaction."""
    sites = [
        n
        for n in walk(pf.root)
        if n.type == "call_expression"
        and line_of(n) <= line <= n.end_point[0] + 1
        and callee_name(pf, n) in calls
    ]
    if not sites:
        return TransactionFact("unknown", None, f"no call of {'/'.join(calls)} found on line {line}")
    site = min(sites, key=lambda n: (line_of(n) != line, n.end_byte - n.start_byte))
    current: Node | None = site
    while current is not None:
        current = enclosing(current, FUNCTION_NODES)
        if current is None:
            break
        holder = current.parent
        if holder is not None and holder.type == "arguments" and holder.parent is not None:
            call = holder.parent
            if call.type == "call_expression" and callee_name(pf, call) in conv.transaction_calls:
                callee = pf.text(call.child_by_field_name("function"))
                return TransactionFact("in_transaction", line_of(call), f"inside {callee}(...)")
        fact = _explicit_transaction(pf, current, line, conv)
        if fact is not None:
            return fact
    return TransactionFact("unknown", None, "no transaction visible around the call")


def _explicit_transaction(pf: ParsedFile, fn: Node, line: int, conv: StaticConventions) -> TransactionFact | None:
    starts, commits = [], []
    for node in walk(fn):
        if node.type == "call_expression":
            name = callee_name(pf, node)
            if name in conv.start_transaction_calls:
                starts.append(line_of(node))
            elif name in conv.commit_transaction_calls:
                commits.append(line_of(node))
    started = [s for s in starts if s < line]
    if started:
        if any(started[0] < c < line for c in commits):
            commit = max(c for c in commits if started[0] < c < line)
            return TransactionFact("after_commit", commit, "the transaction is committed before the call")
        return TransactionFact("in_transaction", started[-1], "after an explicit transaction start")
    params = fn.child_by_field_name("parameters")
    for param in params.named_children if params is not None else []:
        annotation = param.child_by_field_name("type")
        names = {pf.text(n) for n in walk(annotation)} if annotation is not None else set()
        if names & set(conv.transaction_param_types):
            return TransactionFact("caller_supplied", line_of(param), f"written through the parameter {pf.text(param)}")
    return None


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
                key = _norm(pf.text(inner))
                head, _, rest = key.partition(".")
                key = f"{imports.get(head, head)}.{rest}" if rest else imports.get(head, head)
                out.append(RegistryEntry(name, line_of(prop), key, False, payload))
            elif key_node.type == "string":
                out.append(RegistryEntry(name, line_of(prop), pf.text(key_node).strip("'\"`"), True, payload))
    return out
