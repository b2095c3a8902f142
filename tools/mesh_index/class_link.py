"""Consumers found in classes: job handlers, the workers routing them, post-processors.

- A handler is a class with a field named in ``handler_type_fields`` (``readonly jobType =
  JobMessagingType.X``); its job is the field's resolved value.
- A worker is a class decorated with one of ``processor_decorators`` (``@Processor(Queue.X)``);
  it routes every handler class it names (injected constructor parameters, a ``handlers``
  list, ``new X()``) and every job of its ``switch (job.name) { case ... }``.
- A post-processor is a concrete class with one of ``post_processor_base_classes`` among
  its ancestors. Its accepted types come from its (or an ancestor's) ``shouldProcess``
  (compared members and strings, ``endsWith``/``startsWith`` patterns, mapping lookups such
  as ``getWsEventForEvent``) or its type-list fields; no filter means it accepts all. Its
  stream and group come from its fields, its ``super(...)`` options, ``new X(..., {...})``,
  NestJS providers wiring an options token (``provide``/``inject``) and, for values read
  from configuration (``config.postProcessor.groupName``), the service's JSON config files.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from tools.mesh_index.linked import HandlerRec, PostProcessorRec, SiteRec, WorkerRec
from tools.mesh_index.symbols import Decl, Val

if TYPE_CHECKING:
    from tools.mesh_index.sites import Linker


class ClassLinker:
    def __init__(self, linker: Linker):
        self.l = linker
        self.r = linker.r
        self.idx = linker.idx
        self.sc = linker.sc
        self._bindings: dict[str, Any] | None = None
        self._known: set[str] | None = None
        self._candidates: dict[str, list] | None = None

    def classes(self, want: str) -> Iterator[tuple[str, str, Any]]:
        """Classes of every file; ``want`` narrows to handler / worker / derived (has a base) candidates."""
        if self._candidates is None:
            cands: dict[str, list] = {"handler": [], "worker": [], "derived": []}
            for path in self.l.relevant:
                f = self.l.facts[path]
                for role, names in f.get("roles", {}).items():
                    classes = f["classes"]
                    cands[role].extend((path, name, classes[name]) for name in names)
            self._candidates = cands
        yield from self._candidates[want]

    # -- handlers and the fallback helper ---------------------------------------------------------
    def handlers_and_wrappers(self) -> None:
        for path, name, info in self.classes("handler"):
            if info.get("abstract"):
                continue
            fields = info.get("fields", {})
            expr, line = None, info["line"]
            for fname in self.sc.handler_type_fields:
                if fname in fields:
                    expr, line = fields[fname]
                    break
                getter = info.get("filters", {}).get(fname)
                if getter and getter.get("refs"):
                    expr, line = getter["refs"][0], getter["line"]
                    break
            if expr is None:
                continue
            vals = self.r.eval(expr, path)
            if not vals:
                self.l.unresolved("job", path, line, name, "handler", expr, handler_class=name)
                continue
            conf = "heuristic" if any(v.heuristic for v in vals) else "exact"
            for v in vals:
                self.l.kind_of(v, "job")
            site = self.l.site(path, info["line"], name, "handler", conf, vals[0].value, handler_class=name)
            self.idx.handlers[(path, name)] = HandlerRec((path, name), site, [v.value for v in vals], conf)
        for path in self.l.relevant:
            for call_name, _receiver, args, _targs, line, symbol in self.l.facts[path].get("calls", ()):
                if call_name not in self.sc.create_job_calls or not symbol:
                    continue
                owner, _, method = symbol.rpartition(".")
                if method not in self.sc.fallback_calls:
                    continue
                obj = self.l.message_object(args)
                target = self.l.field(obj, self.sc.job_target_fields)
                queues = self.r.eval(target, path) if target is not None else []
                site = self.l.site(path, line, symbol, "create_job", "exact", None,
                                   queue=", ".join(sorted({q.value for q in queues})),
                                   emitter=self.l.emitter(obj, path) or "")
                self.idx.wrappers[(path, owner or method)] = site

    def fallback_wrapper(self, path: str, cls: str) -> tuple[SiteRec | None, str]:
        """The fallback helper a ``withFallback`` call in ``cls`` runs: (its createJob site, how found)."""
        wrappers = self.idx.wrappers
        if cls:
            for p, n, _info in self.r.ancestors(path, cls):
                if p is not None and (p, n) in wrappers:
                    return wrappers[(p, n)], "class"
        for name in self.sc.fallback_calls:
            decl = self.r.symbol(path, name)
            if isinstance(decl, Decl) and (decl.path, decl.name) in wrappers:
                return wrappers[(decl.path, decl.name)], "function"
        repo = self.l.layout.repo_of(path)
        same = [w for (p, _n), w in wrappers.items() if self.l.layout.repo_of(p) == repo]
        if same and len({w.detail.get("queue") for w in same}) == 1:
            return same[0], "same-repo"
        return None, "none"

    # -- workers ----------------------------------------------------------------------------------
    def workers(self) -> None:
        for path, name, info in self.classes("worker"):
            deco = next((d for d in info.get("decorators", ()) if d[0] in self.sc.processor_decorators), None)
            if deco is None or info.get("abstract"):
                continue
            q_expr = deco[1][0] if deco[1] else None
            if q_expr is not None and q_expr[0] == "o":
                q_expr = self.l.field(q_expr, ["name", "queueName", "queue"])
            queues = sorted({v.value for v in self.r.eval(q_expr, path)}) if q_expr is not None else []
            handlers = []
            for ident in info.get("refs", ()):
                decl = self.r.symbol(path, ident)
                if isinstance(decl, Decl) and (decl.path, decl.name) in self.idx.handlers:
                    handlers.append((decl.path, decl.name))
                elif isinstance(decl, Decl) and decl.kind == "const":  # const HANDLERS = [AHandler, BHandler]
                    expr = self.r.decl_info(decl)[1]
                    for item in expr[1] if expr[0] == "a" else ():
                        target = self.r.resolve_decl(item, decl.path) if item and item[0] == "r" else None
                        if isinstance(target, Decl) and (target.path, target.name) in self.idx.handlers:
                            handlers.append((target.path, target.name))
            switch_jobs = []
            for expr, _line in info.get("cases", ()):
                for v in self.r.eval(expr, path):
                    if self.l.kind_of(v, "job") == "job":
                        switch_jobs.append(v.value)
            handler_names = ", ".join(sorted(h[1] for h in handlers))
            site = self.l.site(path, info["line"], name, "worker", "exact", None, queue=", ".join(queues),
                               worker_class=name, handler_class=handler_names)
            if not queues:
                self.l.unresolved("queue", path, info["line"], name, "worker",
                                  q_expr if q_expr is not None else ["?", "no queue argument"], worker_class=name)
            rec = WorkerRec((path, name), site, queues, handlers, sorted(set(switch_jobs)),
                            None if queues else str(q_expr))
            self.idx.workers[(path, name)] = rec
            jobs = set(switch_jobs)
            for h in handlers:
                jobs.update(self.idx.handlers[h].jobs)
            for job in jobs:
                for q in queues:
                    self.idx.add_route(("job", job), ("queue", q), f"worker {name}")

    # -- post-processors ------------------------------------------------------------------------------
    def post_processors(self) -> None:
        bases = set(self.sc.post_processor_base_classes)
        for path, name, info in self.classes("derived"):
            if info.get("abstract"):
                continue
            ancestors = self.r.ancestors(path, name)
            if not any(n in bases for _p, n, _i in ancestors[1:]):
                continue
            accepts, patterns, mode = self.accepted(ancestors)
            streams, groups, how, (raw, raw_path) = self.binding(path, name, ancestors)
            detail = {
                "post_processor_class": name, "stream": ", ".join(streams), "group": ", ".join(groups),
                "filter": mode, "accepts": ", ".join(sorted(accepts)[:200]),
                "patterns": ", ".join(f"{op}:{p}" for op, p in patterns), "binding": how,
            }
            site = self.l.site(path, info["line"], name, "post_processor", "exact", None, **detail)
            if not streams:
                self.l.unresolved("stream", path, info["line"], name, "post_processor",
                                  raw or ["?", "no stream name found (class fields, super(), new, DI providers)"],
                                  expr_path=raw_path,
                                  post_processor_class=name)
            self.idx.post_processors[(path, name)] = PostProcessorRec(
                (path, name), site, streams, groups, accepts, patterns, mode == "all", mode == "unknown", how,
                "stream from a config file" in how)

    def accepted(self, ancestors: list) -> tuple[dict[str, str], list[tuple[str, str]], str]:
        accepts: dict[str, str] = {}
        patterns: list[tuple[str, str]] = []
        filt = None
        for p, _n, info in ancestors:
            filters = (info or {}).get("filters", {})
            for method in self.sc.post_processor_filter_methods:
                if method in filters:
                    filt = (p, filters[method])
                    break
            if filt:
                break
        for p, _n, info in ancestors:
            for fname in self.sc.post_processor_type_fields:
                field = (info or {}).get("fields", {}).get(fname)
                if field is not None and p is not None:
                    for v in self.r.eval_list(field[0], p):
                        accepts[v.value] = "heuristic" if v.heuristic else "exact"
        if filt is None:
            return accepts, patterns, "types" if accepts else "all"
        fp, fi = filt
        if fi.get("all"):
            return accepts, patterns, "all"
        for expr in fi.get("refs", ()):
            for v in self.r.eval(expr, fp):
                accepts[v.value] = "heuristic" if v.heuristic else "exact"
        known_values = self._known_values()
        for s in fi.get("strings", ()):
            if s in known_values:
                accepts.setdefault(s, "exact")
        for op, texts in fi.get("patterns", {}).items():
            patterns.extend((op, t) for t in texts)
        for op, exprs in fi.get("pattern_refs", {}).items():  # type.endsWith(JOB_OUTBOX_SUCCESS_SUFFIX)
            for expr in exprs:
                patterns.extend((op, v.value) for v in self.r.eval(expr, fp) if v.value)
        for target in fi.get("sets", ()):
            if target[0] == "this" and len(target) == 2:
                for p, _n, info in ancestors:
                    field = (info or {}).get("fields", {}).get(target[1])
                    if field is not None and p is not None:
                        for v in self.r.eval_list(field[0], p):
                            accepts[v.value] = "heuristic" if v.heuristic else "exact"
                        break
            elif target[0] != "this" and fp is not None:
                for v in self.r.eval_list(["r", target], fp):
                    accepts[v.value] = "heuristic" if v.heuristic else "exact"
        for fn in fi.get("calls", ()):
            decl = self.r.symbol(fp, fn)
            if isinstance(decl, Decl) and decl.kind == "function":
                for table in self.r.decl_info(decl)[3]:
                    tdecl = self.r.symbol(decl.path, table)
                    if isinstance(tdecl, Decl) and tdecl.kind == "object":
                        for keys, _values, _line in self.r.mapping_entries(tdecl):
                            for k in keys:
                                accepts.setdefault(k.value, "heuristic")
        if not accepts and not patterns:
            return accepts, patterns, "unknown"
        return accepts, patterns, "patterns" if patterns and not accepts else "types"

    def _known_values(self) -> set[str]:
        if self._known is None:
            self._known = {k[1] for k in self.idx.known_values()}
        return self._known

    # -- stream / group binding ---------------------------------------------------------------------
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
