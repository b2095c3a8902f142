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
  stream and group come from :mod:`~tools.mesh_index.pp_binding`. A post-processor that no
  production file imports or constructs, in a package that wires its other post-processors
  explicitly, is never started (``started`` False).
- Collaborators: classes a handler or post-processor names (an injected writer) that produce
  jobs or events; what they write is a heuristic follow-up of the consumer's work.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from tools.mesh_index.linked import HandlerRec, PostProcessorRec, SiteRec, WorkerRec
from tools.mesh_index.pp_binding import StreamBinding
from tools.mesh_index.symbols import Decl

if TYPE_CHECKING:
    from tools.mesh_index.sites import Linker


class ClassLinker:
    def __init__(self, linker: Linker):
        self.l = linker
        self.r = linker.r
        self.idx = linker.idx
        self.sc = linker.sc
        self.bindings = StreamBinding(linker)
        self._providers: dict[Any, list[tuple[str, list[Any]]]] | None = None
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
            for call_name, _receiver, args, _targs, line, symbol, *_params in self.l.facts[path].get("calls", ()):
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
    def _token_handlers(self, token: Decl) -> list[tuple[str, str]]:
        """Handlers injected as a list through a DI token: ``@Inject(JOB_HANDLERS) handlers`` in the worker and
        ``{ provide: JOB_HANDLERS, useFactory: (...hs) => hs, inject: [AHandler, BHandler] }`` in a module."""
        if self._providers is None:
            self._providers = {}
            for path in self.l.relevant:
                for provide, inject, _news, _line in self.l.facts[path].get("providers", ()):
                    if inject:
                        key = self.bindings.token_key(provide, path)
                        self._providers.setdefault(key, []).append((path, inject))
        out = []
        for path, inject in self._providers.get(self.bindings.token_key(["r", [token.name]], token.path), ()):
            for item in inject:
                target = self.r.resolve_decl(item, path) if item and item[0] == "r" else None
                if isinstance(target, Decl) and (target.path, target.name) in self.idx.handlers:
                    out.append((target.path, target.name))
        return out

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
                    handlers.extend(self._token_handlers(decl))
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
        found = []
        for path, name, info in self.classes("derived"):
            if info.get("abstract"):
                continue
            ancestors = self.r.ancestors(path, name)
            if any(n in bases for _p, n, _i in ancestors[1:]):
                found.append((path, name, info, ancestors))
        started = self._started({name for _p, name, _i, _a in found})
        # a package none of whose post-processors is imported starts them some other way (a glob, a registry):
        # only a package that wires its post-processors explicitly tells that an unwired one never runs
        wired = {self.l.layout.package_dir_of(p) for p, n, _i, _a in found if (p, n) in started}
        started |= {(p, n) for p, n, _i, _a in found if self.l.layout.package_dir_of(p) not in wired}
        for path, name, info, ancestors in found:
            accepts, patterns, mode = self.accepted(ancestors)
            if mode == "unknown":  # a config list the subclass's super(...) argument chooses (gather filters)
                accepts = self.l.extra.config_filter(path, name, ancestors)
                mode = "types" if accepts else mode
            streams, groups, how, (raw, raw_path) = self.bindings.binding(path, name, ancestors)
            detail = {
                "post_processor_class": name, "stream": ", ".join(streams), "group": ", ".join(groups),
                "filter": mode, "accepts": ", ".join(sorted(accepts)[:200]),
                "patterns": ", ".join(f"{op}:{p}" for op, p in patterns), "binding": how,
            }
            runs = (path, name) in started or self.l.test_only(path)
            if not runs:
                detail["started"] = "no"
            site = self.l.site(path, info["line"], name, "post_processor", "exact" if runs else "heuristic", None,
                               **detail)
            if not streams:
                self.l.unresolved("stream", path, info["line"], name, "post_processor",
                                  raw or ["?", "no stream name found (class fields, super(), new, DI providers)"],
                                  expr_path=raw_path,
                                  post_processor_class=name)
            self.idx.post_processors[(path, name)] = PostProcessorRec(
                (path, name), site, streams, groups, accepts, patterns, mode == "all", mode == "unknown", how,
                "stream from a config file" in how, runs)

    def _started(self, names: set[str]) -> set[tuple[str, str]]:
        """Post-processor classes (of ``names``) that a production file imports or constructs: something can
        start them (a runner's main, a NestJS module)."""
        out: set[tuple[str, str]] = set()
        if not names:
            return out
        star_done: set[str] = set()
        for path, f in self.l.facts.items():
            idents = [n for n in f.get("constructs", ()) if n in names]
            stars = []
            for local, imported, spec in f.get("imports", ()):
                if imported in names or (imported == "default" and local in names):
                    idents.append(local)
                elif imported == "*":  # import * as pps from './post-processors'
                    stars.append(spec)
            if not (idents or stars) or self.l.test_only(path):
                continue
            for ident in idents:
                decl = self.r.symbol(path, ident)
                if isinstance(decl, Decl) and decl.kind == "class":
                    out.add((decl.path, decl.name))
            for spec in stars:
                target = self.l.layout.resolve(path, spec)
                if target is None or target in star_done:
                    continue
                star_done.add(target)
                for name in names & self.r.exported_names(target):
                    decl = self.r.export(target, name)
                    if isinstance(decl, Decl) and decl.kind == "class":
                        out.add((decl.path, decl.name))
        return out

    # -- collaborators ---------------------------------------------------------------------------------
    def collaborators(self) -> None:
        """Classes a handler, post-processor or worker names (injected writers, repositories; a worker's base
        classes too) that produce jobs or events: what they write may follow from the consumer's work
        (``RankingJobWriter.write``)."""
        producing = self.idx.class_producers
        consumers = [*self.idx.handlers, *self.idx.post_processors, *self.idx.workers]
        for key in consumers:
            info = self.l.facts.get(key[0], {}).get("classes", {}).get(key[1], {})
            found = []
            if key in self.idx.workers:  # what a worker's base class writes after each job (in the workspace)
                found += [(p, n) for p, n, _i in self.r.ancestors(*key)[1:] if p is not None and (p, n) in producing]
            for ident in info.get("refs", ()):
                decl = self.r.symbol(key[0], ident)
                other = (decl.path, decl.name) if isinstance(decl, Decl) and decl.kind == "class" else None
                if other in producing and other != key and other not in found \
                        and other not in self.idx.handlers and other not in self.idx.workers:  # followed on their own
                    found.append(other)
            found = [other for other in found if self._bound_calls(key, info, other)]
            if found:
                self.idx.collaborators[key] = found

    def _bound_calls(self, key: tuple[str, str], info: dict[str, Any], other: tuple[str, str]) -> bool:
        """Whether ``key`` may make ``other`` produce, narrowing what it produces when the calls say so.

        ``this.writer.write(RankingListKind.FEED, id)`` on a field typed ``RankingJobWriter``: the
        writer's ``createJob({ type: RANKING_JOB_BY_KIND[kind] })`` in ``write(kind, ...)`` is evaluated
        with ``kind`` bound to the argument, and ``collaborator_values`` keeps what it gives. A consumer
        whose typed fields name ``other`` but never call a method of it that writes, never makes it write."""
        fields = set()
        for fname, type_name in info.get("field_types", {}).items():
            decl = self.r.symbol(key[0], type_name)
            if isinstance(decl, Decl) and (decl.path, decl.name) == other:
                fields.add(fname)
        if not fields:
            return True  # injected some other way: what it writes may follow (heuristic)
        writers: dict[str, dict[tuple[str, int], Any]] = {}
        for _k, site in self.idx.class_producers[other]:
            if site.symbol and "." in site.symbol:
                writers.setdefault(site.symbol.split(".", 1)[1], {})[(site.file, site.line)] = site
        allowed: set[str] = set()
        called = False
        for field, method, args in info.get("member_calls", ()):
            for where in writers.get(method, {}) if field in fields else ():
                called = True
                facts = self.l.call_args.get(where)
                if facts is None:
                    return True
                call_args, _targs, params = facts
                obj = self.l.message_object(call_args)
                expr = self.l.field(obj, self.sc.type_fields) if obj is not None else None
                bind = {p: (a, key[0]) for p, a in zip(params, args, strict=False) if p}
                vals = self.r.eval(expr, where[0], bind) if expr is not None else []
                if not vals:
                    return True  # not narrowed: every value it writes may follow
                allowed.update(v.value for v in vals)
        if called and allowed:
            self.idx.collaborator_values[(key, other)] = sorted(allowed)
        return called

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
        for key in ("keys_of", "values_of"):  # type in MAP, MAP[type], Object.keys(MAP).includes(type)
            for expr in fi.get(key, ()):
                decl = self.r.resolve_decl(expr, fp) if fp is not None else None
                if not isinstance(decl, Decl) or decl.kind not in ("object", "enum", "const"):
                    continue
                if decl.kind == "object":  # a table: its keys (computed or not) or its values
                    vals = [v for keys, values, _l in self.r.mapping_entries(decl)
                            for v in (keys if key == "keys_of" else values)]
                else:  # Object.values(SomeEnum): the members' values
                    vals = list(self.r.members(decl).values()) if key == "values_of" else []
                for v in vals:
                    accepts.setdefault(v.value, "exact")
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
