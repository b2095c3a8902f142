"""Facts for code navigation: declared symbols with signature and skeleton, method decorators,
gRPC clients and their calls, the gateway's global prefix.

A mixin of the file extractor (:mod:`tools.mesh_index.parser`), run in the same parse (no second
parse for ``smart_search``, ``find_dependents``, ``analyze_grpc`` or the request map). Format:

- ``decls``: ``[name, kind, line, end_line, signature, skeleton, exported]``; kind in class,
  interface, enum, function, method, const, type; methods are named ``Class.method``; the
  skeleton lists member signatures (a class's fields and methods, an interface's members, an
  enum's members), bodies stripped.
- ``mdecos``: ``[class, method, line, [[decorator, [args]], ...]]`` for methods with decorators
  (``@GrpcMethod('Svc', 'Method')``, ``@Post('events')``, ...); an argument is a string literal's
  value, ``["ref", name]`` for a constant's name, else its text.
- ``grpc_clients``: ``[field, service, client_type, line, symbol]`` for each
  ``x = client.getService<T>('Service')`` (service ``["ref", name]`` for a constant);
  ``grpc_calls``: ``[field, method, line, symbol]`` for each
  ``this.<field>.<method>(...)`` of such a field in the same file.
- ``dyn_imports``: specifiers of ``require('x')`` / ``import('x')`` calls.
- ``http_prefix``: ``[prefix, default_version, line]`` of ``app.setGlobalPrefix`` / ``enableVersioning``.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tree_sitter import Node

from tools.mesh_index.expressions import enclosing_symbol, line_of, string_value, text
from tools.mesh_index.ts_queries import word_spans

MAX_SIG = 240
MAX_MEMBER = 160
MAX_MEMBERS = 60
BODY_FIELDS = ("body", "value")
PREFIX = re.compile(rb"setGlobalPrefix\(\s*['\"`]([^'\"`]*)['\"`]")
DEFAULT_VERSION = re.compile(rb"defaultVersion\s*:\s*['\"`]?([\w.]+)")
DYNAMIC_IMPORT = re.compile(rb"\b(require|import)\s*\(\s*['\"]([^'\"\n]{1,200})['\"]\s*\)")


def _squash(raw: str, cap: int) -> str:
    one = " ".join(raw.split())
    return one if len(one) <= cap else one[: cap - 1] + "…"


def _head(node: Node, src: bytes, cap: int = MAX_SIG) -> str:
    """The text of ``node`` up to its body (a function's ``{``, a class's ``{``), whitespace squashed."""
    end = node.end_byte
    for field in ("body",):
        body = node.child_by_field_name(field)
        if body is not None:
            end = body.start_byte
            break
    return _squash(src[node.start_byte:end].decode("utf-8", "replace"), cap).rstrip(" {=>")


def _arg(node: Node) -> str | list[str]:
    """A decorator argument: a string literal's value, ``["ref", name]`` for a name (a constant the
    linker resolves: ``@GrpcMethod(EVENT_SERVICE_NAME, 'CreateEvent')``), else the squashed text."""
    if node.type == "string":
        return string_value(node)
    if node.type in ("identifier", "member_expression"):
        return ["ref", text(node)]
    return _squash(text(node), 80)


def _decorator(node: Node) -> list[Any] | None:
    inner = node.named_children[0] if node.named_child_count else None
    if inner is None:
        return None
    if inner.type == "call_expression":
        fn = inner.child_by_field_name("function")
        args = inner.child_by_field_name("arguments")
        return [text(fn).split(".")[-1], [_arg(a) for a in args.named_children[:4]] if args else []]
    return [text(inner).split(".")[-1], []]


class DeclFacts:
    src: bytes
    f: dict[str, Any]

    def record_decl(self, node: Node, name: str, kind: str) -> None:
        if not name:
            return  # `export default class {}`: nothing to find it by
        parent = node.parent
        exported = parent is not None and parent.type == "export_statement"
        skeleton: list[str] = []
        if kind == "class":
            skeleton = self._class_outline(node, name, exported)
        elif kind in ("interface", "enum"):
            body = node.child_by_field_name("body")
            for m in (body.named_children if body is not None else ())[:MAX_MEMBERS]:
                if m.type not in ("comment",):
                    cut = min(m.end_byte, m.start_byte + 4 * MAX_MEMBER)
                    skeleton.append(_squash(self.src[m.start_byte:cut].decode("utf-8", "replace"),
                                            MAX_MEMBER).rstrip(",;"))
        sig = _head(node, self.src) if kind != "type" else _squash(
            self.src[node.start_byte:min(node.end_byte, node.start_byte + 4 * MAX_SIG)].decode("utf-8", "replace"),
            MAX_SIG)
        start = node if not exported else parent  # `export class X`: the signature says export
        if exported:
            sig = _squash("export " + sig, MAX_SIG)
        self.f.setdefault("decls", []).append(
            [name, kind, line_of(start), node.end_point[0] + 1, sig, skeleton, exported])

    def record_var_decl(self, declarator: Node, name: str, value: Node | None) -> None:
        decl = declarator.parent
        if decl is None:
            return
        parent = decl.parent
        exported = parent is not None and parent.type == "export_statement"
        kind = "function" if value is not None and value.type in ("arrow_function", "function_expression",
                                                                   "function") else "const"
        if kind == "function":
            body = value.child_by_field_name("body") if value is not None else None
            end = body.start_byte if body is not None else declarator.end_byte
            sig = _squash(self.src[declarator.start_byte:end].decode("utf-8", "replace"), MAX_SIG).rstrip(" {=>")
        else:
            cut = min(declarator.end_byte, declarator.start_byte + 4 * MAX_SIG)
            sig = _squash(self.src[declarator.start_byte:cut].decode("utf-8", "replace"), MAX_SIG)
        keyword = text(decl.children[0]) if decl.child_count else "const"
        sig = ("export " if exported else "") + keyword + " " + sig
        self.f.setdefault("decls", []).append(
            [name, kind, line_of(declarator), declarator.end_point[0] + 1, _squash(sig, MAX_SIG), [], exported])

    def _class_outline(self, node: Node, cls: str, exported: bool) -> list[str]:
        body = node.child_by_field_name("body")
        skeleton: list[str] = []
        pending: list[list[Any]] = []
        for m in body.named_children if body is not None else ():
            t = m.type
            if t == "decorator":
                deco = _decorator(m)
                if deco is not None:
                    pending.append(deco)
                continue
            if t == "method_definition" or t == "abstract_method_signature" or t == "method_signature":
                mname = text(m.child_by_field_name("name"))
                sig = _head(m, self.src, MAX_MEMBER)
                skeleton.append(sig)
                decos = pending + [d for d in (_decorator(c) for c in m.named_children if c.type == "decorator")
                                   if d is not None]
                if decos:
                    self.f.setdefault("mdecos", []).append([cls, mname, line_of(m), decos])
                self.f.setdefault("decls", []).append(
                    [f"{cls}.{mname}", "method", line_of(m), m.end_point[0] + 1, sig, [], exported])
            elif t in ("public_field_definition", "property_signature", "index_signature"):
                value = m.child_by_field_name("value")
                end = value.start_byte if value is not None else m.end_byte
                skeleton.append(_squash(self.src[m.start_byte:end].decode("utf-8", "replace"),
                                        MAX_MEMBER).rstrip(" =;"))
            pending = []
            if len(skeleton) >= MAX_MEMBERS:
                break
        return skeleton

    def grpc_clients(self, root: Node) -> None:
        """``this.x = this.client.getService<XClient>('XService')`` and the ``this.x.method(...)`` calls."""
        clients: list[list[Any]] = []
        for start, end in word_spans(self.src, ("getService",)):
            node = root.descendant_for_byte_range(start, end)
            call = node.parent.parent if node is not None and node.parent is not None else None
            if call is None or call.type != "call_expression":
                continue
            args = call.child_by_field_name("arguments")
            first = args.named_children[0] if args is not None and args.named_child_count else None
            if first is None or first.type not in ("string", "identifier", "member_expression"):
                continue
            targs = call.child_by_field_name("type_arguments")
            ctype = text(targs.named_children[0]).split("<", 1)[0] if targs is not None and targs.named_child_count \
                else ""
            field = _assigned_name(call)
            service = string_value(first) if first.type == "string" else ["ref", text(first)]
            clients.append([field, service, ctype, line_of(call), enclosing_symbol(call)])
        if not clients:
            return
        self.f["grpc_clients"] = clients
        fields = sorted({c[0] for c in clients if c[0]})
        if not fields:
            return
        pattern = re.compile(rb"this\s*\.\s*(" + b"|".join(re.escape(f.encode()) for f in fields)
                             + rb")\s*\??\.\s*([A-Za-z_$][\w$]*)\s*(?:<[^()]*>)?\s*\(")
        calls = []
        for m in pattern.finditer(self.src):
            node = root.descendant_for_byte_range(m.start(2), m.end(2))
            if node is None or node.type != "property_identifier":
                continue  # inside a comment or a string
            calls.append([m.group(1).decode(), m.group(2).decode(), node.start_point[0] + 1,
                          enclosing_symbol(node)])
            if len(calls) >= 500:
                break
        if calls:
            self.f["grpc_calls"] = calls

    def dynamic_imports(self, root: Node) -> None:
        """``require('x')`` and ``import('x')`` with a literal specifier (not in a comment or a string)."""
        specs = []
        for m in DYNAMIC_IMPORT.finditer(self.src):
            node = root.descendant_for_byte_range(m.start(2), m.end(2))
            if node is not None and node.type == "string_fragment" and node.parent is not None \
                    and node.parent.parent is not None and node.parent.parent.type == "arguments":
                specs.append(m.group(2).decode("utf-8", "replace"))
        if specs:
            self.f["dyn_imports"] = sorted(set(specs))

    def http_prefix(self) -> None:
        prefix = PREFIX.search(self.src)
        version = DEFAULT_VERSION.search(self.src)
        if prefix is None and version is None:
            return
        line = self.src.count(b"\n", 0, (prefix or version).start()) + 1  # type: ignore[union-attr]
        self.f["http_prefix"] = [prefix.group(1).decode() if prefix else None,
                                 version.group(1).decode() if version else None, line]


def _assigned_name(call: Node) -> str:
    """The field or variable a ``getService`` call is stored in (``this.x = ...``, ``x = ...``), else ""."""
    cur = call.parent
    for _ in range(4):
        if cur is None:
            return ""
        if cur.type == "assignment_expression":
            left = cur.child_by_field_name("left")
            if left is not None and left.type == "member_expression":
                return text(left.child_by_field_name("property"))
            return text(left)
        if cur.type in ("variable_declarator", "public_field_definition"):
            return text(cur.child_by_field_name("name"))
        cur = cur.parent
    return ""
