"""Facts about producer call sites the index does not record.

- :func:`direct_queue_calls` — ``queue.add(name, ...)`` on a BullMQ ``Queue`` object, with
  the job name and the queue as written (``@InjectQueue(X)`` / ``new Queue(X)``);
- :func:`collection_receivers` — receivers bound to a ``Set``/``Map``/array, whose ``add`` is no push;
- :func:`transaction_context` — whether a producer call sits inside a database
  transaction (a ``transaction(cb)`` callback, an explicit start/commit pair, or a
  transaction handle received from the caller).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from tree_sitter import Node

from server.config import StaticConventions
from tools.verify.facts import norm_expr
from tools.verify.tsparse import (
    FUNCTION_NODES,
    ParsedFile,
    call_arguments,
    callee_name,
    calls_in,
    enclosing,
    line_of,
    local_imports,
    object_pairs,
    unwrap,
    walk,
)


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
    return pf.memoized(("direct", id(conv)), lambda: _direct_queue_calls(pf, conv))


def _direct_queue_calls(pf: ParsedFile, conv: StaticConventions) -> list[DirectQueueCall]:
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
        receiver_text = norm_expr(pf.text(receiver))
        if receiver_text not in bindings:
            continue
        queue_expr = bindings[receiver_text]
        symbol = _enclosing_symbol(pf, node)
        for name_expr, queue in _pushed_names(pf, call_arguments(node), queue_expr):
            out.append(DirectQueueCall(line_of(node), symbol, method, name_expr, queue))
    return out


BUILTIN_COLLECTIONS = frozenset({"Set", "Map", "WeakSet", "WeakMap", "Array"})
"""JavaScript collections whose ``add`` is not a queue push."""


def collection_receivers(pf: ParsedFile) -> set[str]:
    """Receivers (``this.x`` and ``x``) the file binds to a built-in Set/Map or an array literal.

    ``x.add(JobType.X)`` on one of them stores a value; it pushes nothing. A binding is
    recognised from a class field or variable initialised with ``new Set(...)`` (or Map,
    WeakSet, WeakMap, Array) or ``[...]``; anything else is not listed.
    """
    return pf.memoized(("collections",), lambda: _collection_receivers(pf))


def _collection_receivers(pf: ParsedFile) -> set[str]:
    out: set[str] = set()
    for node in walk(pf.root):
        if node.type not in ("public_field_definition", "variable_declarator"):
            continue
        name = node.child_by_field_name("name")
        value = unwrap(node.child_by_field_name("value"))
        if name is None or value is None or name.type not in ("identifier", "property_identifier"):
            continue
        ctor = value.child_by_field_name("constructor") if value.type == "new_expression" else None
        if value.type == "array" or (ctor is not None and pf.text(ctor) in BUILTIN_COLLECTIONS):
            key = pf.text(name)
            out.add(f"this.{key}" if node.type == "public_field_definition" else key)
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
    sites = [n for first, last, name, n in calls_in(pf) if first <= line <= last and name in calls]
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
