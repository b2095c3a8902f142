"""Facts of a class: bases, decorators, fields, filter methods, names it mentions, switch cases.

A mixin of the file extractor (:mod:`tools.mesh_index.parser`); see there for the format.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # tree-sitter is imported only where files are parsed
    from tree_sitter import Node

from tools.mesh_index.expressions import chain, line_of, string_value, text, to_expr, type_exprs
from tools.mesh_index.ts_queries import ExtractConfig, captures, matches

_FIND_METHODS = ("find", "findIndex", "filter")

SET_METHODS = ("has", "includes", "indexOf", "some", "find")


class ClassFacts:
    src: bytes
    cfg: ExtractConfig
    f: dict[str, Any]
    q: dict[str, Any]

    def class_declaration(self, node: Node, outer_decorators: list[Node]) -> str:
        name = text(node.child_by_field_name("name"))
        info: dict[str, Any] = {"line": line_of(node), "end": node.end_point[0] + 1}
        if node.type == "abstract_class_declaration":
            info["abstract"] = True
        children = node.named_children  # each access builds new Node objects: once
        decorators = outer_decorators + [c for c in children if c.type == "decorator"]
        decos = []
        for d in decorators:
            inner = d.named_children[0] if d.named_child_count else None
            if inner is None:
                continue
            if inner.type == "call_expression":
                fn = inner.child_by_field_name("function")
                args = inner.child_by_field_name("arguments")
                arg_exprs = [to_expr(a, 0, False) for a in args.named_children] if args else []
                decos.append([text(fn).split(".")[-1], arg_exprs])
            else:
                decos.append([text(inner).split(".")[-1], []])
        if decos:
            info["decorators"] = decos
        heritage = next((c for c in children if c.type == "class_heritage"), None)
        if heritage is not None:
            for clause in heritage.named_children:
                if clause.type == "extends_clause":
                    value = clause.child_by_field_name("value")
                    if value is not None:
                        info["extends"] = text(value).split("<", 1)[0]
                    targs = clause.child_by_field_name("type_arguments")
                    if targs is not None:
                        info["extends_args"] = type_exprs(targs)
                elif clause.type == "implements_clause":
                    info["implements"] = [text(c).split("<", 1)[0] for c in clause.named_children]
        body = node.child_by_field_name("body")
        if body is not None:
            self.class_body(body, info)
            is_worker = any(d[0] in self.cfg.processor_decorators for d in decos)
            is_handler = not set(info.get("fields", ())).isdisjoint(self.cfg.handler_type_fields)
            if is_worker or is_handler or "extends" in info:  # names it mentions: handlers, collaborators
                info["refs"] = sorted({text(n) for n in captures(self.q["refs"], body).get("id", [])})
                calls = _member_calls(captures(self.q["member_calls"], body).get("call", []))
                if calls:
                    info["member_calls"] = calls
                cases = captures(self.q["cases"], body).get("v", [])
                if cases:
                    info["cases"] = [[to_expr(c), line_of(c)] for c in cases]
        self.f.setdefault("classes", {})[name] = info
        roles = self.f.setdefault("roles", {})
        fields = set(info.get("fields", ())) | set(info.get("filters", ()))
        if fields & set(self.cfg.handler_type_fields):
            roles.setdefault("handler", []).append(name)
        if any(d[0] in self.cfg.processor_decorators for d in decos):
            roles.setdefault("worker", []).append(name)
        if "extends" in info:
            roles.setdefault("derived", []).append(name)
        if not roles:
            del self.f["roles"]
        return name

    def class_body(self, body: Node, info: dict[str, Any]) -> None:
        fields: dict[str, Any] = {}
        members = body.named_children  # each access builds new Node objects: once
        methods: dict[str, Node] | None = None  # by name, built only when a filter calls a helper
        for member in members:
            if member.type == "public_field_definition":
                fname = text(member.child_by_field_name("name"))
                value = member.child_by_field_name("value")
                if value is not None and fname:
                    fields[fname] = [to_expr(value, 0, False), line_of(member)]
                elif fname and _type_name(member):  # private readonly writer: RankingJobWriter;
                    info.setdefault("field_types", {})[fname] = _type_name(member)
            elif member.type == "method_definition":
                mname = text(member.child_by_field_name("name"))
                mbody = member.child_by_field_name("body")
                if mbody is None:
                    continue
                if mname in self.cfg.filter_methods or mname in self.cfg.handler_type_fields:
                    found = self.filter_info(mbody, line_of(member), _first_param(member))
                    for helper in found.pop("this_calls", ()):  # return this.isSupported(type): one level down
                        if methods is None:
                            methods = {text(m.child_by_field_name("name")): m for m in members
                                       if m.type == "method_definition"}
                        hnode = methods.get(helper)
                        hbody = hnode.child_by_field_name("body") if hnode is not None else None
                        if hbody is not None and helper != mname:
                            _merge(found, self.filter_info(hbody, line_of(hnode), _first_param(hnode)))
                    info.setdefault("filters", {})[mname] = found
                elif mname == "constructor":
                    typed = _typed_params(member)
                    if typed:
                        info["field_types"] = typed
                    supers = captures(self.q["supers"], mbody).get("call", [])
                    if supers:
                        args = supers[0].child_by_field_name("arguments")
                        info["super_args"] = [to_expr(a) for a in args.named_children] if args else []
                        info["super_line"] = line_of(supers[0])
                elif _may_compare_in_find(self.src, mbody, param := _first_param(member)):
                    keys = _find_keys(matches(self.q["finds"], mbody), param)
                    if keys:
                        info.setdefault("finds", {})[mname] = keys
        if fields:
            info["fields"] = fields

    def filter_info(self, body: Node, line: int, param: str | None = None) -> dict[str, Any]:
        """What a ``shouldProcess``-like method compares the type with.

        ``param`` is the method's first parameter: ``type.endsWith(SUFFIX)`` on it records
        ``SUFFIX`` (a constant, a member) as a pattern to evaluate when linking."""
        out: dict[str, Any] = {"line": line}
        stmts = body.named_children
        if len(stmts) == 1 and stmts[0].type == "return_statement" and text(stmts[0]).replace(" ", "") in (
            "returntrue;", "returntrue"
        ):
            out["all"] = True
            return out
        members = [n for n in captures(self.q["members"], body).get("m", [])
                   if n.parent is None or n.parent.type != "member_expression"]
        refs = []
        for m in members:
            e = to_expr(m)
            if e[0] == "r" and e[1] and e[1][-1] in ("toString", "valueOf"):
                e = ["r", e[1][:-1]]
            if e[0] == "r" and len(e[1]) >= 2:
                refs.append(e)
        if refs:
            out["refs"] = refs
        patterns: dict[str, list[str]] = {}
        pattern_refs: dict[str, list[Any]] = {}
        calls = captures(self.q["filter_calls"], body)
        called: set[str] = set()
        sets: list[list[str]] = []
        for call in calls.get("call", []):
            fn = call.child_by_field_name("function")
            fname = text(fn).split(".")[-1] if fn is not None else ""
            args = call.child_by_field_name("arguments")
            first = args.named_children[0] if args is not None and args.named_child_count else None
            if fname in ("endsWith", "startsWith", "includes") and first is not None and first.type == "string":
                patterns.setdefault(fname, []).append(string_value(first))
            elif fname in ("endsWith", "startsWith", "includes") and first is not None and param \
                    and fn is not None and fn.type == "member_expression" \
                    and (chain(fn.child_by_field_name("object")) or [""])[0] == param:
                pattern_refs.setdefault(fname, []).append(to_expr(first))
            elif fname in SET_METHODS and fn is not None and fn.type == "member_expression":
                target = chain(fn.child_by_field_name("object"))
                if target:
                    sets.append(target)
            elif fn is not None and fn.type == "identifier":
                called.add(fname)
        strings = [string_value(s) for s in captures(self.q["strings"], body).get("s", []) if s.type == "string"]
        pattern_values = {v for vs in patterns.values() for v in vs}
        strings = [s for s in strings if s not in pattern_values]
        if strings:
            out["strings"] = strings
        if patterns:
            out["patterns"] = patterns
        if pattern_refs:
            out["pattern_refs"] = pattern_refs
        if param:
            out.update(_lookups_of(body, param))
        if called:
            out["calls"] = sorted(called)
        if sets:
            out["sets"] = sets
        return out

    # -- calls, objects, SQL ----------------------------------------------------------------


def _first_param(method: Node) -> str | None:
    """Name of a method's first parameter (``type`` in ``shouldProcess(type: string)``)."""
    params = method.child_by_field_name("parameters")
    first = params.named_children[0] if params is not None and params.named_child_count else None
    pat = first.child_by_field_name("pattern") if first is not None else None
    return text(pat) if pat is not None and pat.type == "identifier" else None


UNWRAPPED = ("as_expression", "satisfies_expression", "non_null_expression", "parenthesized_expression")


def _bare(node: Node | None) -> Node | None:
    while node is not None and node.type in UNWRAPPED and node.named_child_count:
        node = node.named_children[0]
    return node


def _lookups_of(body: Node, param: str) -> dict[str, Any]:
    """Tables a filter looks its parameter up in: ``type in MAP`` / ``MAP[type]`` / ``Object.keys(MAP).includes(type)``
    (``keys_of``), ``Object.values(X).includes(type)`` (``values_of``), and ``this.helper(...)`` calls
    (``this_calls``). A filter method is small: its subtree is walked (bounded)."""
    keys_of: list[Any] = []
    values_of: list[Any] = []
    this_calls: list[str] = []
    stack, seen = [body], 0
    while stack and seen < 2000:
        node = stack.pop()
        seen += 1
        t = node.type
        if t == "binary_expression" and text(node.child_by_field_name("operator")) == "in":
            left, right = _bare(node.child_by_field_name("left")), node.child_by_field_name("right")
            target = chain(right) if right is not None else None
            if left is not None and left.type == "identifier" and text(left) == param and target:
                keys_of.append(["r", target])
        elif t == "subscript_expression":
            index, obj = _bare(node.child_by_field_name("index")), node.child_by_field_name("object")
            target = chain(obj) if obj is not None else None
            if index is not None and index.type == "identifier" and text(index) == param and target:
                keys_of.append(["r", target])
        elif t == "call_expression":
            fn = node.child_by_field_name("function")
            obj = fn.child_by_field_name("object") if fn is not None and fn.type == "member_expression" else None
            prop = text(fn.child_by_field_name("property")) if obj is not None else ""
            if obj is not None and obj.type == "this":
                this_calls.append(prop)
            elif obj is not None and obj.type == "call_expression" and prop in SET_METHODS:
                inner = obj.child_by_field_name("function")
                args = obj.child_by_field_name("arguments")
                first = args.named_children[0] if args is not None and args.named_child_count else None
                target = chain(first) if first is not None else None
                how = chain(inner) if inner is not None else None
                if target and how in (["Object", "keys"], ["Object", "values"]):
                    (keys_of if how[1] == "keys" else values_of).append(["r", target])
        stack.extend(node.named_children)
    out: dict[str, Any] = {}
    for key, items in (("keys_of", keys_of), ("values_of", values_of), ("this_calls", this_calls)):
        if items:
            out[key] = items
    return out


def _may_compare_in_find(src: bytes, body: Node, param: str | None) -> bool:
    """Whether a ``find``-like call of the method may compare with its parameter: after the first
    ``.find`` or ``.filter`` of the method, an ``==`` and the parameter as a word, up to the method's
    end (a superset of what :func:`_compared_field` accepts, whatever the predicate's length). A cheap
    guard: most methods with ``.filter(`` compare with something else and need no query."""
    if not param:
        return False
    end = body.end_byte
    hits = [at for at in (src.find(b".find", body.start_byte, end), src.find(b".filter", body.start_byte, end))
            if at >= 0]
    if not hits:
        return False
    start = min(hits)
    return src.find(b"==", start, end) >= 0 and _has_word(src, param.encode(), start, end)


def _has_word(src: bytes, word: bytes, start: int, stop: int) -> bool:
    """``word`` in ``src[start:stop]`` as a name of its own (not a member ``.word``, not a longer name)."""
    at = src.find(word, start, stop)
    while at >= 0:
        after = at + len(word)
        if src[at - 1] not in _WORD_OR_DOT and (after >= len(src) or src[after] not in _WORD_OR_DOT[:-1]):
            return True
        at = src.find(word, after, stop)
    return False


_WORD_OR_DOT = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_$."


def _find_keys(found: list[tuple[int, dict[str, list[Node]]]], param: str | None) -> list[str]:
    """Fields a method's ``find`` predicate compares with its parameter: ``trigger`` in
    ``aggregations.find((agg) => agg.trigger === trigger)`` (the key of the entry it returns).

    ``found`` holds the matches of the ``finds`` query over the method's body (an arrow function as
    the first argument of a ``.name(...)`` call: the walk runs in tree-sitter, not in Python)."""
    if not param:
        return []
    keys: set[str] = set()
    for _pattern, match in found:
        if text(match["prop"][0]) in _FIND_METHODS:
            keys.update(_compared_field(match["arrow"][0], param))
    return sorted(keys)


def _compared_field(arrow: Node, param: str) -> list[str]:
    """``F`` of ``(x) => x.F === param`` (either side, ``==`` too); [] for any other predicate."""
    params = arrow.child_by_field_name("parameters")
    item = arrow.child_by_field_name("parameter")
    if item is None and params is not None and params.named_child_count == 1:
        pat = params.named_children[0]
        item = pat.child_by_field_name("pattern") or pat
    body = _bare(arrow.child_by_field_name("body"))
    if item is None or item.type != "identifier" or body is None or body.type != "binary_expression":
        return []
    if text(body.child_by_field_name("operator")) not in ("===", "=="):
        return []
    left, right = _bare(body.child_by_field_name("left")), _bare(body.child_by_field_name("right"))
    for a, b in ((left, right), (right, left)):
        if a is None or b is None or b.type != "identifier" or text(b) != param or a.type != "member_expression":
            continue
        obj = a.child_by_field_name("object")
        if obj is not None and obj.type == "identifier" and text(obj) == text(item):
            return [text(a.child_by_field_name("property"))]
    return []


def _merge(into: dict[str, Any], other: dict[str, Any]) -> None:
    """Add a helper method's filter facts to the filter's own."""
    for key, value in other.items():
        if key in ("line", "this_calls"):
            continue
        if key == "all":
            into.setdefault("all", value)
        elif isinstance(value, dict):
            for op, items in value.items():
                into.setdefault(key, {}).setdefault(op, []).extend(items)
        else:
            into.setdefault(key, []).extend(value)


def _type_name(node: Node) -> str:
    """``RankingJobWriter`` of a ``writer: RankingJobWriter`` annotation ("" for none or a complex type)."""
    ann = node.child_by_field_name("type")
    inner = ann.named_children[0] if ann is not None and ann.named_child_count else None
    if inner is None or inner.type not in ("type_identifier", "generic_type", "nested_type_identifier"):
        return ""
    return text(inner).split("<", 1)[0]


def _typed_params(ctor: Node) -> dict[str, str]:
    """Constructor parameters with a class type: ``private readonly writer: RankingJobWriter``."""
    params = ctor.child_by_field_name("parameters")
    out: dict[str, str] = {}
    for p in params.named_children if params is not None else ():
        pat = p.child_by_field_name("pattern")
        name = _type_name(p)
        if pat is not None and pat.type == "identifier" and name:
            out[text(pat)] = name
    return out


def _member_calls(calls: list[Node]) -> list[Any]:
    """``this.writer.write(a, b)`` calls: [field, method, [argument expressions]] (the first 100)."""
    out = []
    for call in calls[:100]:
        fn = call.child_by_field_name("function")
        obj = fn.child_by_field_name("object") if fn is not None else None
        args = call.child_by_field_name("arguments")
        if obj is None or args is None:
            continue
        out.append([text(obj.child_by_field_name("property")), text(fn.child_by_field_name("property")),
                    [to_expr(a) for a in args.named_children[:8]]])
    return out
