"""Where a post-processor reads: its stream and consumer group.

Found in its (or an ancestor's) fields, its ``super(...)`` options, ``new X(..., {...})`` or
``new X(..., OPTIONS)`` constructions, NestJS providers wiring an options token
(``provide``/``inject``, the provided class resolved through imports) and, for values read
from configuration (``config.postProcessor.groupName``), the service's JSON config files
(heuristic, said in the binding text). Stream names are returned as the key the runner writes
(``stream:`` + name when the prefix is missing).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from tools.mesh_index.symbols import Decl, Val

if TYPE_CHECKING:
    from tools.mesh_index.sites import Linker


class StreamBinding:
    def __init__(self, linker: Linker):
        self.l = linker
        self.r = linker.r
        self.idx = linker.idx
        self.sc = linker.sc
        self._bindings: dict[str, Any] | None = None

    def _index_bindings(self) -> dict[str, Any]:
        by_new: dict[str, list] = {}
        by_super: dict[tuple[str, str], list] = {}
        by_token: dict[Any, list] = {}
        json_by_pkg: dict[str, list] = {}
        providers_by_class: dict[tuple[str, str], list] = {}
        providers_by_new: dict[str, list] = {}
        by_const: dict[tuple[str, str], dict[str, Any]] = {}
        constructions: dict[str, list] = {}
        for path in self.l.relevant:
            f = self.l.facts[path]
            for b in f.get("bindings", ()):
                if "new" in b:
                    by_new.setdefault(b["new"], []).append((path, b))
                elif "super_of" in b:
                    by_super.setdefault((path, b["super_of"]), []).append((path, b))
                elif "provide" in b:
                    by_token.setdefault(self.token_key(b["provide"], path), []).append((path, b))
                elif "const" in b:
                    by_const[(path, b["const"])] = b
            for name, idents, _line in f.get("news", ()):
                constructions.setdefault(name, []).append((path, idents))
            if "json" in f:
                pkg = self.l.layout.package_dir_of(path)
                json_by_pkg.setdefault(pkg, []).extend((path, k, v) for k, v in f["json"])
            for provide, inject, news, _line in f.get("providers", ()):
                target = self.r.resolve_decl(provide, path)
                if isinstance(target, Decl) and target.kind == "class":
                    providers_by_class.setdefault((target.path, target.name), []).append((path, inject))
                    continue
                for name in news:  # a token provider building `new X(...)`: X as imported here
                    decl = self.r.symbol(path, name)
                    if isinstance(decl, Decl) and decl.kind == "class":
                        providers_by_class.setdefault((decl.path, decl.name), []).append((path, inject))
                    else:
                        providers_by_new.setdefault(name, []).append((path, inject))
        return {"new": by_new, "super": by_super, "token": by_token, "json": json_by_pkg,
                "providers_class": providers_by_class, "providers_new": providers_by_new, "const": by_const,
                "news": constructions}

    def token_key(self, expr: Any, path: str) -> Any:
        vals = self.r.eval(expr, path)
        if vals:
            return ("v", vals[0].value)
        decl = self.r.resolve_decl(expr, path)
        if isinstance(decl, Decl):
            return ("d", decl.path, decl.name)
        return ("raw", json.dumps(expr))

    def binding(self, path: str, name: str, ancestors: list) -> tuple[list[str], list[str], str, tuple[Any, Any]]:
        if self._bindings is None:
            self._bindings = self._index_bindings()
        idx = self._bindings
        keys = set(self.sc.post_processor_stream_fields) | set(self.sc.post_processor_group_fields)
        found: list[tuple[dict[str, Any], str, str]] = []
        for p, _n, info in ancestors:
            fields = (info or {}).get("fields", {})
            if p is not None and keys & set(fields):
                found.append(({k: v[0] for k, v in fields.items()}, p, "class field"))
            for arg in (info or {}).get("super_args", ()):
                if arg and arg[0] == "o" and p is not None:
                    entries = {e[1]: e[2] for e in arg[1] if e[0] == "k" and isinstance(e[1], str)}
                    if keys & set(entries):
                        found.append((entries, p, "super() options"))
        found += [(b["fields"], bp, "super() options") for bp, b in idx["super"].get((path, name), ())]
        for bp, b in idx["new"].get(name, ()):
            decl = self.r.symbol(bp, name)
            if decl is None or (isinstance(decl, Decl) and (decl.path, decl.name) == (path, name)):
                found.append((b["fields"], bp, f"new {name}(...) options"))
        for np, idents in idx["news"].get(name, ()):  # new X(redis, OPTIONS) with a const options object
            decl = self.r.symbol(np, name)
            if decl is not None and not (isinstance(decl, Decl) and (decl.path, decl.name) == (path, name)):
                continue
            for ident in idents:
                opts = self.r.symbol(np, ident)
                if isinstance(opts, Decl) and (opts.path, opts.name) in idx["const"]:
                    fields = idx["const"][(opts.path, opts.name)]["fields"]
                    found.append((fields, opts.path, f"new {name}(..., {ident})"))
        wired = idx["providers_class"].get((path, name), []) + idx["providers_new"].get(name, [])
        for pp_path, inject in wired:
            for tok in inject:
                for bp, b in idx["token"].get(self.token_key(tok, pp_path), ()):
                    found.append((b["fields"], bp, "DI provider options"))
        streams, groups, raw, raw_path = [], [], None, None
        how = found[0][2] if found else "none"
        for fields, bp, _how in found:
            for names, out in ((self.sc.post_processor_stream_fields, streams),
                               (self.sc.post_processor_group_fields, groups)):
                for fname in names:
                    if fname in fields:
                        vals = self.r.eval(fields[fname], bp) or self.from_config(fields[fname], bp)
                        out.extend(v.value for v in vals)
                        if any(v.via == "config" for v in vals):
                            what = "stream" if out is streams else "group"
                            if f"{what} from a config file" not in how:
                                how += f" ({what} from a config file)"
                        if not vals and out is streams:
                            raw, raw_path = fields[fname], bp
        # a stream named without the prefix (Streams.USER_CREATED) is the key the runner writes for that target
        return sorted({self.idx.stream_key(st) for st in streams}), sorted(set(groups)), how, (raw, raw_path)

    def from_config(self, expr: Any, path: str) -> list[Val]:
        """Values of ``config.a.b`` read from the service's JSON config files (heuristic)."""
        if not expr or expr[0] not in ("r", "p"):
            return []
        parts = expr[1] if expr[0] == "r" else expr[1].split(".")
        if len(parts) < 2:
            return []
        suffix = ".".join(parts[-2:])
        pkg = self.l.layout.package_dir_of(path)
        out = []
        for _p, key, value in (self._bindings or {}).get("json", {}).get(pkg, ()):
            if key == suffix or key.endswith("." + suffix):
                out.append(Val(value, heuristic=True, via="config"))
        return out
