"""Name resolution and evaluation across files: imports, re-exports, enums, spreads, functions.

:class:`Resolver` answers "which declaration does this name mean here?" by following local
declarations, imports (aliases, namespaces, default), ``export { a as b } from``, ``export *``
barrels and npm package names (through :class:`~tools.mesh_index.workspace.Layout`), and
"which string does this expression evaluate to?" for string enums, ``as const`` objects
built from spreads, constants, templates, concatenations, small functions returning a
template of their parameters (``getEventStreamName(s) => `stream:${s}```) and mapping
lookups (``getEventForJob(t) => JOB_TO_EVENT_MAPPING[t]``, marked ``heuristic``).
Everything is memoized; the resolver is rebuilt whenever any file's facts change.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from tools.mesh_index.workspace import Layout

Expr = list[Any]
MAX_VALUES = 64


class Decl(NamedTuple):
    path: str
    name: str
    kind: str  # enum | object | const | class | function


class Namespace(NamedTuple):
    path: str


class Val(NamedTuple):
    """A resolved string value and where it comes from."""

    value: str
    path: str | None = None  # file of the literal (None: written at the use site)
    line: int = 0
    qual: str | None = None  # Decl.MEMBER that declares it
    decl: tuple[str, str] | None = None  # (path, name) of the declaring enum/object
    heuristic: bool = False
    via: str | None = None  # mapping table or function the value went through


Binding = dict[str, tuple[Expr, str]]


class Resolver:
    def __init__(self, facts: dict[str, dict[str, Any]], layout: Layout):
        self.facts = facts
        self.layout = layout
        self._imports: dict[str, dict[str, tuple[str, str]]] = {}
        self._symbols: dict[tuple[str, str], Decl | Namespace | None] = {}
        self._exports: dict[tuple[str, str], Decl | Namespace | None] = {}
        self._members: dict[tuple[str, str], dict[str, Val]] = {}
        self._mapping: dict[tuple[str, str], list[tuple[list[Val], list[Val], int]]] = {}
        self._refs: dict[tuple[str, tuple[str, ...]], list[Val]] = {}
        self._tables: dict[str, dict[str, tuple[str, Any]]] = {}
        self._ancestors: dict[tuple[str, str], list] = {}

    # -- declarations ---------------------------------------------------------------------
    def local_decl(self, path: str, name: str) -> Decl | None:
        f = self.facts.get(path)
        if f is None:
            return None
        for key, kind in (("classes", "class"), ("enums", "enum"), ("objects", "object"),
                          ("consts", "const"), ("functions", "function")):
            table = f.get(key)
            if table and name in table:
                return Decl(path, name, kind)
        return None

    def _import_table(self, path: str) -> dict[str, tuple[str, str]]:
        table = self._imports.get(path)
        if table is None:
            table = {}
            for local, imported, spec in self.facts.get(path, {}).get("imports", ()):
                table[local] = (imported, spec)
            self._imports[path] = table
        return table

    def symbol(self, path: str, name: str) -> Decl | Namespace | None:
        """The declaration ``name`` means inside ``path`` (local or imported)."""
        key = (path, name)
        if key in self._symbols:
            return self._symbols[key]
        self._symbols[key] = None
        found: Decl | Namespace | None = self.local_decl(path, name)
        if found is None:
            imp = self._import_table(path).get(name)
            if imp is not None:
                target = self.layout.resolve(path, imp[1])
                if target is not None:
                    found = Namespace(target) if imp[0] == "*" else self.export(target, imp[0])
        self._symbols[key] = found
        return found

    def _export_table(self, path: str) -> dict[str, tuple[str, Any]]:
        """Every name ``path`` exports -> how: ("local", name) | ("re", (imported, spec)) | ("star", target).

        ``export *`` sources are merged (first one wins, like TypeScript's ambiguity rule keeps
        none; we keep the first and the answer stays deterministic). Memoized; cycles are cut.
        """
        table = self._tables.get(path)
        if table is not None:
            return table
        self._tables[path] = {}
        table = {}
        f = self.facts.get(path, {})
        for spec in f.get("stars", ()):
            target = self.layout.resolve(path, spec)
            if target is not None and target != path:
                for name in self._export_table(target):
                    if name != "default" and name not in table:
                        table[name] = ("star", target)
        for exported, imported, spec in f.get("reexports", ()):
            table[exported] = ("re", (imported, spec))
        for exported, local in f.get("exports", ()):
            table[exported] = ("local", local)
        self._tables[path] = table
        return table

    def exported_names(self, path: str) -> set[str]:
        """Every name module ``path`` exports (its own, re-exported and through ``export *``)."""
        return set(self._export_table(path))

    def export(self, path: str, name: str) -> Decl | Namespace | None:
        """What module ``path`` exports as ``name`` (following re-exports and ``export *``)."""
        key = (path, name)
        if key in self._exports:
            return self._exports[key]
        self._exports[key] = None
        entry = self._export_table(path).get(name)
        found: Decl | Namespace | None = None
        if entry is not None:
            how, what = entry
            if how == "local":
                found = self.symbol(path, what)
            elif how == "re":
                target = self.layout.resolve(path, what[1])
                if target is not None:
                    found = Namespace(target) if what[0] == "*" else self.export(target, what[0])
            else:
                found = self.export(what, name)
        self._exports[key] = found
        return found

    def decl_info(self, decl: Decl) -> Any:
        table = {"class": "classes", "enum": "enums", "object": "objects", "const": "consts",
                 "function": "functions"}[decl.kind]
        return self.facts[decl.path][table][decl.name]

    # -- members of enums and objects -------------------------------------------------------
    def members(self, decl: Decl) -> dict[str, Val]:
        """Member name -> value of an enum or object (spreads merged, computed keys skipped)."""
        key = (decl.path, decl.name)
        if key in self._members:
            return self._members[key]
        self._members[key] = {}
        out: dict[str, Val] = {}
        info = self.decl_info(decl)
        if decl.kind == "enum":
            for member, expr, line in info[1]:
                for v in self.eval(expr, decl.path)[:1]:
                    out[member] = Val(v.value, v.path or decl.path, v.line or line,
                                      v.qual or f"{decl.name}.{member}", v.decl or key, v.heuristic, v.via)
        elif decl.kind == "object":
            for entry in info[1]:
                if entry[0] == "...":
                    target = self.resolve_decl(entry[1], decl.path)
                    if isinstance(target, Decl) and target.kind in ("enum", "object"):
                        out.update(self.members(target))
                elif isinstance(entry[1], str):
                    for v in self.eval(entry[2], decl.path)[:1]:
                        out[entry[1]] = Val(v.value, v.path or decl.path, v.line or entry[3],
                                            v.qual or f"{decl.name}.{entry[1]}", v.decl or key, v.heuristic, v.via)
        elif decl.kind == "const":
            target = self.resolve_decl(info[1], decl.path)
            if isinstance(target, Decl) and target.kind in ("enum", "object"):
                out = self.members(target)
        self._members[key] = out
        return out

    def mapping_entries(self, decl: Decl) -> list[tuple[list[Val], list[Val], int]]:
        """(key values, values, line) of each entry of an object literal (computed keys included)."""
        key = (decl.path, decl.name)
        if key in self._mapping:
            return self._mapping[key]
        self._mapping[key] = []
        out = []
        if decl.kind == "object":
            for entry in self.decl_info(decl)[1]:
                if entry[0] == "...":
                    target = self.resolve_decl(entry[1], decl.path)
                    if isinstance(target, Decl) and target.kind == "object":
                        out.extend(self.mapping_entries(target))
                    continue
                if entry[0] != "k":
                    continue
                keys = [Val(entry[1])] if isinstance(entry[1], str) else self.eval(entry[1], decl.path)
                out.append((keys, self.eval(entry[2], decl.path), entry[3]))
        self._mapping[key] = out
        return out

    # -- references -------------------------------------------------------------------------
    def resolve_decl(self, expr: Expr, path: str) -> Decl | Namespace | None:
        """The declaration a reference expression names (``X``, ``ns.X``), without evaluating."""
        if expr[0] != "r":
            return None
        cur = self.symbol(path, expr[1][0])
        for prop in expr[1][1:]:
            if isinstance(cur, Namespace):
                cur = self.export(cur.path, prop)
            else:
                return None
        return cur

    def eval_ref(self, parts: list[str], path: str) -> list[Val]:
        key = (path, tuple(parts))
        cached = self._refs.get(key)
        if cached is not None:
            return cached
        self._refs[key] = []
        out: list[Val] = []
        cur: Decl | Namespace | None = self.symbol(path, parts[0])
        rest = parts[1:]
        while rest and isinstance(cur, Namespace):
            cur = self.export(cur.path, rest[0])
            rest = rest[1:]
        if isinstance(cur, Decl):
            if not rest:
                if cur.kind == "const":
                    out = self.eval(self.decl_info(cur)[1], cur.path)
            elif cur.kind in ("enum", "object", "const") and len(rest) == 1:
                member = self.members(cur).get(rest[0])
                if member is not None:
                    out = [member]
            elif cur.kind == "object":  # nested literal: Jobs.user.CREATED
                out = self._nested(self.decl_info(cur)[1], rest, cur.path)
        self._refs[key] = out
        return out

    def _nested(self, entries: list[Any], rest: list[str], path: str) -> list[Val]:
        for entry in reversed(entries):
            if entry[0] == "k" and entry[1] == rest[0]:
                value = entry[2]
                if len(rest) == 1:
                    return self.eval(value, path)
                return self._nested(value[1], rest[1:], path) if value[0] == "o" else []
        return []

    def eval(self, expr: Expr, path: str, bind: Binding | None = None, depth: int = 0) -> list[Val]:
        """Possible string values of ``expr`` evaluated in file ``path`` (empty when unknown)."""
        if depth > 16 or not expr:
            return []
        tag = expr[0]
        if tag == "s":
            return [Val(expr[1])]
        if tag == "num":
            return [Val(expr[1])]
        if tag == "vals":
            return expr[1]
        if tag in ("r", "p"):
            name = expr[1][0] if tag == "r" else expr[1].split(".")[0]
            if bind and name in bind and (tag == "p" or len(expr[1]) == 1):
                bound, bound_path = bind[name]
                return self.eval(bound, bound_path, None, depth + 1)
            return self.eval_ref(expr[1], path) if tag == "r" else []
        if tag in ("t", "+"):
            return self._concat(expr[1], path, bind, depth)
        if tag == "|":
            vals = [v for e in expr[1] for v in self.eval(e, path, bind, depth + 1)]
            return [v._replace(heuristic=True) for v in vals[:MAX_VALUES]] if len(vals) > 1 else vals
        if tag == "ty":
            return self.eval(expr[1], path, bind, depth + 1)
        if tag == "c":
            return self._call(expr, path, bind, depth)
        if tag == "x":
            target = self.resolve_decl(expr[1], path)
            if isinstance(target, Decl) and target.kind == "object":
                return self._lookup(target, self.eval(expr[2], path, bind, depth + 1))
        return []

    def _concat(self, parts: list[Any], path: str, bind: Binding | None, depth: int) -> list[Val]:
        acc = [Val("")]
        for part in parts:
            vals = [Val(part)] if isinstance(part, str) else self.eval(part, path, bind, depth + 1)
            if not vals:
                return []
            acc = [Val(a.value + v.value, heuristic=a.heuristic or v.heuristic, via=a.via or v.via)
                   for a in acc for v in vals][:MAX_VALUES]
        return acc

    def _call(self, expr: Expr, path: str, bind: Binding | None, depth: int) -> list[Val]:
        callee = expr[1]
        target = self.resolve_decl(callee, path) if callee[0] == "r" else None
        if not isinstance(target, Decl) or target.kind != "function":
            return []
        _line, params, ret, lookups = self.decl_info(target)
        args = expr[2]
        if lookups:
            tables = [self.symbol(target.path, name) for name in lookups]
            keys: list[Val] = []
            if args:
                keys = self.eval(args[0], path, bind, depth + 1)
            vals: list[Val] = []
            for table in tables:
                if isinstance(table, Decl) and table.kind == "object":
                    vals.extend(self._lookup(table, keys))
            return vals
        if ret is None:
            return []
        inner: Binding = {
            p: (["vals", self.eval(a, path, bind, depth + 1)], path) for p, a in zip(params, args, strict=False) if p
        }
        return self.eval(ret, target.path, inner, depth + 1)

    def _lookup(self, table: Decl, keys: list[Val]) -> list[Val]:
        """Values of ``table[key]`` (all values when the key is unknown), marked heuristic via the table."""
        wanted = {k.value for k in keys}
        out = []
        for entry_keys, values, _line in self.mapping_entries(table):
            if wanted and not wanted & {k.value for k in entry_keys}:
                continue
            out.extend(v._replace(heuristic=True, via=table.name) for v in values)
        return out[:MAX_VALUES]

    def eval_list(self, expr: Expr, path: str, bind: Binding | None = None) -> list[Val]:
        """Values of an array expression (or of a single value)."""
        if expr and expr[0] == "a":
            out = []
            for item in expr[1]:
                if item and item[0] == "...":
                    out.extend(self.eval_list(item[1], path, bind))
                else:
                    out.extend(self.eval(item, path, bind))
            return out
        if expr and expr[0] == "r":
            target = self.resolve_decl(expr, path)
            if isinstance(target, Decl) and target.kind == "const":
                return self.eval_list(self.decl_info(target)[1], target.path)
            if isinstance(target, Decl) and target.kind in ("enum", "object"):
                return list(self.members(target).values())
        if expr and expr[0] == "n" and expr[2]:  # new Set([...])
            return self.eval_list(expr[2][0], path, bind)
        return self.eval(expr, path, bind)

    # -- classes ----------------------------------------------------------------------------
    def ancestors(self, path: str, name: str) -> list[tuple[str | None, str, dict[str, Any] | None]]:
        """The class then its bases: (file or None when outside the workspace, name, facts)."""
        cached = self._ancestors.get((path, name))
        if cached is None:
            cached = self._ancestors[(path, name)] = self._walk_bases(path, name)
        return cached

    def _walk_bases(self, path: str, name: str) -> list[tuple[str | None, str, dict[str, Any] | None]]:
        out: list[tuple[str | None, str, dict[str, Any] | None]] = []
        cur_path: str | None = path
        cur_name = name
        seen = set()
        while cur_path is not None and (cur_path, cur_name) not in seen and len(out) < 12:
            seen.add((cur_path, cur_name))
            info = self.facts.get(cur_path, {}).get("classes", {}).get(cur_name)
            out.append((cur_path, cur_name, info))
            if info is None or "extends" not in info:
                break
            base = info["extends"]
            decl = self.resolve_decl(["r", base.split(".")], cur_path)
            if isinstance(decl, Decl) and decl.kind == "class":
                cur_path, cur_name = decl.path, decl.name
            else:  # outside the workspace: its exported name (`import { Batch as B }` extends B -> Batch)
                imported = self._import_table(cur_path).get(base.split(".")[0])
                external = imported[0] if imported and imported[0] not in ("*", "default") and "." not in base \
                    else base.split(".")[-1]
                out.append((None, external, None))
                break
        return out
