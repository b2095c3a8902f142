"""Why an expression did not resolve: the raw text and a one-line reason an engineer can act on.

``Streams.EVENT_CREATED`` in a file where ``Streams`` is an enum without that member gives
"Streams (npm-packages/.../streams.enum.ts) has no member 'EVENT_CREATED'"; a name imported
from a package outside the workspace says so; a function parameter says the value comes
from the callers.
"""

from __future__ import annotations

from typing import Any

from tools.mesh_index.symbols import Decl, Namespace, Resolver

MAX_RAW = 160


def render(expr: Any, compact: bool = False) -> str:
    """Source-like text of an expression (``compact``: call arguments shown as ``...``)."""
    if not expr:
        return ""
    tag = expr[0]
    if tag == "s":
        return repr(expr[1])
    if tag == "num":
        return expr[1]
    if tag == "r":
        return ".".join(expr[1])
    if tag == "p":
        return expr[1]
    if tag == "c":
        if compact:
            return f"{render(expr[1], True)}(...)"
        return f"{render(expr[1])}({', '.join(render(a) for a in expr[2])})"
    if tag == "n":
        return f"new {render(expr[1])}(...)"
    if tag == "t":
        return "`" + "".join(p if isinstance(p, str) else "${" + render(p) + "}" for p in expr[1]) + "`"
    if tag == "+":
        return " + ".join(render(p) for p in expr[1])
    if tag == "|":
        return " ?? ".join(render(p) for p in expr[1])
    if tag == "x":
        return f"{render(expr[1])}[{render(expr[2])}]"
    if tag == "a":
        return "[" + ", ".join(render(p) for p in expr[1][:5]) + (", ..." if len(expr[1]) > 5 else "") + "]"
    if tag == "ty":
        return f"typeof {render(expr[1])}"
    if tag == "o":
        return "{...}"
    return str(expr[1]) if len(expr) > 1 else str(expr)


def _ref_reason(r: Resolver, parts: list[str], path: str) -> str:
    head = parts[0]
    if head == "this":
        return f"'{'.'.join(parts)}' is a field read at run time"
    cur: Decl | Namespace | None = r.symbol(path, head)
    if cur is None:
        imp = r._import_table(path).get(head)
        if imp is None:
            return f"'{head}' is neither declared nor imported in this file"
        target = r.layout.resolve(path, imp[1])
        if target is None:
            return f"'{head}' is imported from '{imp[1]}', which is not in the workspace"
        return f"'{imp[0]}' is not exported by {target}"
    for i, prop in enumerate(parts[1:], 1):
        if isinstance(cur, Namespace):
            nxt = r.export(cur.path, prop)
            if nxt is None:
                return f"'{prop}' is not exported by {cur.path}"
            cur = nxt
            continue
        if cur.kind in ("enum", "object"):
            if prop not in r.members(cur):
                return f"{cur.name} ({cur.path}) has no member '{prop}'"
            if i < len(parts) - 1:
                return f"'{'.'.join(parts[:i + 1])}' is a string, not an object"
            return f"{cur.name}.{prop} is not a string value"
        if cur.kind == "class":
            return f"'{cur.name}.{prop}' is a static member of a class (not resolved)"
        return f"'{'.'.join(parts[:i])}' is a {cur.kind}, not an enum or object"
    if isinstance(cur, Decl):
        return f"'{cur.name}' is a {cur.kind} whose value is not a string"
    return f"'{head}' is a module namespace"


def reason(r: Resolver, expr: Any, path: str, depth: int = 0) -> str:
    """The first thing that prevents ``expr`` from resolving to a string."""
    if not expr:
        return "missing argument"
    tag = expr[0]
    if tag == "p":
        return "a function parameter: the value comes from the callers"
    if tag == "r":
        return _ref_reason(r, expr[1], path)
    if depth < 4 and tag in ("t", "+", "|"):
        for part in expr[1]:
            if not isinstance(part, str) and not r.eval(part, path):
                return reason(r, part, path, depth + 1)
    if tag == "c":
        for arg in expr[2]:
            if arg and arg[0] not in ("o", "a") and not r.eval(arg, path):
                return reason(r, arg, path, depth + 1)
        target = r.resolve_decl(expr[1], path) if expr[1][0] == "r" else None
        if isinstance(target, Decl) and target.kind == "function":
            return f"{target.name}() ({target.path}) does not return a template of its parameters or a table lookup"
        return f"'{render(expr[1])}' is not a function of the workspace that the index can evaluate"
    if tag == "x":
        return f"'{render(expr[1])}' is not a mapping table of the workspace"
    if tag == "?":
        return "expression not understood"
    return "value computed at run time"


def explain(r: Resolver, expr: Any, path: str) -> tuple[str, str]:
    """(raw text, reason) of an expression that did not resolve."""
    raw = render(expr)
    if len(raw) > MAX_RAW:
        raw = raw[: MAX_RAW - 1] + "…"
    return raw, reason(r, expr, path)
