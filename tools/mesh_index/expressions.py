"""Syntax nodes to small, JSON-ready expressions the resolver can evaluate later.

An expression is a list whose first item is its tag:

- ``["s", text]`` string literal; ``["num", text]`` number
- ``["r", [name, prop, ...]]`` reference chain (``JobMessagingType.X``, ``this.queue``)
- ``["t", [part, ...]]`` template string (parts are str or expressions)
- ``["+", [a, b]]`` string concatenation; ``["|", [a, b]]`` alternatives (``a ?? b``, ``c ? a : b``)
- ``["a", [item, ...]]`` array; ``["o", [entry, ...]]`` object (entries ``["k", key, value]``
  with key a str or an expression for computed keys, or ``["...", expr]``)
- ``["c", callee, [args], [type_args]]`` call; ``["n", callee, [args]]`` ``new``
- ``["x", object, index]`` subscript; ``["ty", ref]`` ``typeof X.Y`` in a type position
- ``["p", name]`` a function parameter; ``["?", raw]`` anything else

Identifiers naming a ``const``/``let`` declared earlier in an enclosing block are
replaced by their initializer (a few levels deep), so ``const t = getEventForJob(j);
createEvent({ type: t })`` is seen as ``type: getEventForJob(j)``.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # tree-sitter is imported only where files are parsed
    from tree_sitter import Node

Expr = list[Any]
MAX_RAW = 160
MAX_ITEMS = 400
UNWRAP = {
    "as_expression",
    "satisfies_expression",
    "non_null_expression",
    "parenthesized_expression",
    "type_assertion",
    "await_expression",
}
FUNCTION_NODES = {
    "function_declaration",
    "method_definition",
    "arrow_function",
    "function_expression",
    "function",
    "generator_function_declaration",
}
SCOPE_NODES = {"statement_block", "switch_case", "switch_default"}


def text(node: Node | None) -> str:
    if node is None:
        return ""
    raw_bytes = node.text  # one access: each one copies the node's bytes out of the source
    return "" if raw_bytes is None else raw_bytes.decode("utf-8", "replace")


def raw(node: Node) -> Expr:
    value = " ".join(text(node).split())
    return ["?", value if len(value) <= MAX_RAW else value[: MAX_RAW - 1] + "…"]


def string_value(node: Node) -> str:
    """The value of a ``string`` node, with the common escapes decoded."""
    body = text(node)[1:-1]
    if "\\" not in body:
        return body
    out, i = [], 0
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            out.append({"n": "\n", "t": "\t", "r": "\r", "0": "\0"}.get(nxt, nxt))
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def line_of(node: Node) -> int:
    return node.start_point[0] + 1


def param_names(fn: Node) -> list[str]:
    """Names of a function's parameters, in order ("" for a destructured one)."""
    names: list[str] = []
    params = fn.child_by_field_name("parameters")
    single = fn.child_by_field_name("parameter")
    if single is not None and single.type == "identifier":
        names.append(text(single))
    if params is not None:
        for p in params.named_children:
            pat = p.child_by_field_name("pattern") or p
            names.append(text(pat) if pat.type == "identifier" else "")
    return names


def _local_init(node: Node, name: str) -> tuple[str, Node | None]:
    """('init', value node) for a block-scoped const/let, ('param', None), or ('', None)."""
    child = node
    parent = node.parent
    while parent is not None and parent.type != "program":
        if parent.type in SCOPE_NODES:
            found: Node | None = None
            for stmt in parent.named_children:
                if stmt.start_byte >= child.start_byte:
                    break
                if stmt.type in ("lexical_declaration", "variable_declaration"):
                    for decl in stmt.named_children:
                        if decl.type == "variable_declarator" and text(decl.child_by_field_name("name")) == name:
                            found = decl.child_by_field_name("value")
            if found is not None:
                return "init", found
        elif parent.type in FUNCTION_NODES and name in param_names(parent):
            return "param", None
        elif parent.type in ("for_in_statement", "for_statement") and re.search(
                rf"(?<![\w$]){re.escape(name)}(?![\w$])", text(parent.child_by_field_name("left"))):
            return "loop", None
        child = parent
        parent = parent.parent
    return "", None


def chain(node: Node) -> list[str] | None:
    """``A.B.C`` as ``["A", "B", "C"]`` (``this`` kept), or None for anything else."""
    parts: list[str] = []
    cur = node
    while cur.type == "member_expression":
        prop = cur.child_by_field_name("property")
        if prop is None:
            return None
        parts.append(text(prop))
        cur = cur.child_by_field_name("object")
        if cur is None:
            return None
        while cur.type in UNWRAP and cur.named_child_count:
            cur = cur.named_children[0]
    if cur.type in ("identifier", "this", "type_identifier", "property_identifier"):
        parts.append(text(cur))
        parts.reverse()
        return parts
    return None


def to_expr(node: Node | None, depth: int = 0, local: bool = True) -> Expr:
    """The expression of ``node`` (see the module docstring)."""
    if node is None:
        return ["?", ""]
    t = node.type
    if depth > 12:
        return raw(node)
    if t in UNWRAP:
        inner = node.named_children[0] if node.named_child_count else None
        return to_expr(inner, depth + 1, local)
    if t == "string":
        return ["s", string_value(node)]
    if t == "template_string":
        parts: list[Any] = []
        for child in node.named_children:
            if child.type == "template_substitution":
                inner = child.named_children[0] if child.named_child_count else None
                parts.append(to_expr(inner, depth + 1, local))
            elif child.type == "escape_sequence":
                parts.append(string_value(child) if len(text(child)) > 1 else text(child))
            else:
                parts.append(text(child))
        if all(isinstance(p, str) for p in parts):
            return ["s", "".join(parts)]
        return ["t", parts]
    if t == "number":
        return ["num", text(node)]
    if t == "identifier":
        name = text(node)
        if local and depth < 6:
            how, init = _local_init(node, name)
            if how == "init" and init is not None and init.start_byte != node.start_byte:
                return to_expr(init, depth + 3, local)
            if how in ("param", "loop"):
                return ["p", name]
        return ["r", [name]]
    if t in ("member_expression", "this"):
        parts_chain = chain(node)
        if parts_chain is None:
            return raw(node)
        if local and parts_chain[0] != "this" and depth < 6:
            how, init = _local_init(node, parts_chain[0])
            if how in ("param", "loop"):
                return ["p", ".".join(parts_chain)]
            if how == "init" and init is not None:
                base = to_expr(init, depth + 3, local)
                if base[0] == "r":
                    return ["r", base[1] + parts_chain[1:]]
                return ["?", ".".join(parts_chain)]
        return ["r", parts_chain]
    if t == "subscript_expression":
        return ["x", to_expr(node.child_by_field_name("object"), depth + 1, local),
                to_expr(node.child_by_field_name("index"), depth + 1, local)]
    if t == "binary_expression":
        op = node.child_by_field_name("operator")
        left = to_expr(node.child_by_field_name("left"), depth + 1, local)
        right = to_expr(node.child_by_field_name("right"), depth + 1, local)
        op_text = text(op)
        if op_text == "+":
            return ["+", [left, right]]
        if op_text in ("??", "||"):
            return ["|", [left, right]]
        return raw(node)
    if t == "ternary_expression":
        return ["|", [to_expr(node.child_by_field_name("consequence"), depth + 1, local),
                      to_expr(node.child_by_field_name("alternative"), depth + 1, local)]]
    if t == "array":
        items = []
        for child in node.named_children[:MAX_ITEMS]:
            if child.type == "spread_element":
                inner = child.named_children[0] if child.named_child_count else None
                items.append(["...", to_expr(inner, depth + 1, local)])
            else:
                items.append(to_expr(child, depth + 1, local))
        return ["a", items]
    if t == "object":
        return ["o", object_entries(node, depth + 1, local)]
    if t in ("call_expression", "new_expression"):
        fn = node.child_by_field_name("function") or node.child_by_field_name("constructor")
        args_node = node.child_by_field_name("arguments")
        args = [to_expr(a, depth + 1, local) for a in args_node.named_children[:MAX_ITEMS]] if args_node else []
        if fn is not None and fn.type == "member_expression" and not args:
            prop = text(fn.child_by_field_name("property"))
            if prop in ("toString", "valueOf", "trim"):
                return to_expr(fn.child_by_field_name("object"), depth + 1, local)
        callee = to_expr(fn, depth + 1, local) if fn is not None else ["?", ""]
        if t == "new_expression":
            return ["n", callee, args]
        type_args = node.child_by_field_name("type_arguments")
        return ["c", callee, args, type_exprs(type_args) if type_args is not None else []]
    if t == "type_query":
        inner = node.named_children[0] if node.named_child_count else None
        return ["ty", to_expr(inner, depth + 1, False)]
    return raw(node)


def type_exprs(type_args: Node) -> list[Expr]:
    """Expressions of ``<typeof X.Y, Z.W>`` type arguments (``typeof`` refs and qualified type names)."""
    out: list[Expr] = []
    for arg in type_args.named_children:
        if arg.type == "type_query":
            out.append(to_expr(arg, 1, False))
        elif arg.type in ("nested_type_identifier", "type_identifier", "generic_type"):
            name = text(arg).split("<", 1)[0]
            out.append(["r", name.split(".")])
        else:
            out.append(raw(arg))
    return out


def object_entries(node: Node, depth: int = 0, local: bool = True) -> list[Expr]:
    entries: list[Expr] = []
    for child in node.named_children[:MAX_ITEMS]:
        if child.type == "pair":
            key = child.child_by_field_name("key")
            value = child.child_by_field_name("value")
            if key is None:
                continue
            if key.type == "computed_property_name":
                inner = key.named_children[0] if key.named_child_count else None
                key_expr: Any = to_expr(inner, depth + 1, local)
            elif key.type == "string":
                key_expr = string_value(key)
            else:
                key_expr = text(key)
            entries.append(["k", key_expr, to_expr(value, depth + 1, local), line_of(child)])
        elif child.type == "spread_element":
            inner = child.named_children[0] if child.named_child_count else None
            entries.append(["...", to_expr(inner, depth + 1, local), line_of(child)])
        elif child.type == "shorthand_property_identifier":
            entries.append(["k", text(child), to_expr_identifier(child, depth, local), line_of(child)])
    return entries


def to_expr_identifier(node: Node, depth: int, local: bool) -> Expr:
    """A shorthand property ``{ type }`` seen as the identifier ``type``."""
    name = text(node)
    if local:
        how, init = _local_init(node, name)
        if how == "init" and init is not None:
            return to_expr(init, depth + 3, local)
        if how in ("param", "loop"):
            return ["p", name]
    return ["r", [name]]


def enclosing_symbol(node: Node) -> str | None:
    """``Class.method``, ``function`` or ``Class`` around ``node``."""
    method: str | None = None
    cur = node.parent
    while cur is not None:
        t = cur.type
        if (t == "method_definition" and method is None) or (t in ("public_field_definition",) and method is None):
            method = text(cur.child_by_field_name("name"))
        elif t in ("class_declaration", "abstract_class_declaration", "class"):
            cls = text(cur.child_by_field_name("name")) or "<class>"
            return f"{cls}.{method}" if method else cls
        elif t in ("function_declaration", "generator_function_declaration") and method is None:
            return text(cur.child_by_field_name("name")) or None
        elif t == "variable_declarator" and method is None:
            value = cur.child_by_field_name("value")
            if value is not None and value.type in ("arrow_function", "function_expression", "function"):
                return text(cur.child_by_field_name("name")) or None
        cur = cur.parent
    return method
