"""Linking: every file's facts -> the resolved :class:`~tools.mesh_index.linked.LinkedIndex`.

:func:`link` classifies declarations (job / event / websocket types, queues, streams, by
the names in ``[conventions.static]`` and the messaging package), then turns facts into
sites: producers (``createJob``, the fallback helper, ``createEvent``/``createFollowUp``,
direct queue pushes), consumers (handlers, the workers routing them, post-processors and
their stream, group and filter) and, through :mod:`~tools.mesh_index.sql_link`, SQL
triggers and mapping tables. Values are matched by resolved string, never by member name;
whatever cannot be resolved becomes an ``unresolved`` site carrying the raw expression.
"""

from __future__ import annotations

import posixpath
from typing import Any

from server.config import Conventions
from tools.mesh_index.class_link import ClassLinker
from tools.mesh_index.explain import explain, render
from tools.mesh_index.linked import LinkedIndex, SiteRec, TypeInfo
from tools.mesh_index.sql_link import link_mappings, link_sql
from tools.mesh_index.symbols import Decl, Resolver, Val
from tools.mesh_index.table_narrowing import narrow_job_tables
from tools.mesh_index.test_copies import test_only_migrations
from tools.mesh_index.type_eval import eval_for_jobs, paired_lookup
from tools.mesh_index.use_kinds import UseKinds
from tools.mesh_index.workspace import Layout, is_test_path
from tools.mesh_index.ws_link import ExtraProducers

KINDS = ("job", "event", "ws_event", "queue", "stream")
RELEVANT_KEYS = frozenset({"calls", "enums", "objects", "sql", "sql_strings", "bindings", "providers", "json", "news",
                           "json_bindings", "roles", "registry"})
"""Files with none of these facts only matter as import/export hops, reached through the resolver."""


class Linker:
    def __init__(self, facts: dict[str, dict[str, Any]], layout: Layout, conventions: Conventions,
                 known_emitters: list[str] | None = None):
        self.facts = facts
        self.layout = layout
        self.conv = conventions
        self.sc = conventions.static
        self.r = Resolver(facts, layout)
        self.idx = LinkedIndex(stream_prefix=conventions.stream_prefix)
        self.known_emitters = list(dict.fromkeys([*self.sc.known_emitters, *(known_emitters or [])]))
        self._test: dict[str, bool] = {}
        self._kinds: dict[tuple[str, str], str | None] = {}
        self.secondary: dict[tuple[str, str], str] = {}
        self.query_calls: list[tuple[str, Any, int, str | None]] = []
        self.worker_jobs: dict[tuple[str, str], list[str]] = {}
        self.call_args: dict[tuple[str, int], tuple[Any, Any, list[str]]] = {}  # (path, line) -> args, targs, params
        self.sql_seen: dict[tuple[str, int, str, str | None], tuple[Any, bool, str | None]] = {}
        msg = self.sc.messaging_package.strip("/")
        self._msg_probe = "/" + msg + "/"
        self._msg_tail = "/" + posixpath.basename(msg) if msg else None
        self._in_msg: dict[str, bool] = {}
        self.relevant = [p for p, f in facts.items() if not RELEVANT_KEYS.isdisjoint(f)]
        self.has_messaging = any(self.in_messaging(p) for p in self.relevant
                                 if "enums" in facts[p] or "objects" in facts[p])
        self.copy_reasons: dict[str, str] = {}  # migration file only test set-up runs -> why
        self.uses = UseKinds(self)
        self.extra = ExtraProducers(self)

    # -- helpers ----------------------------------------------------------------------------
    def test_only(self, path: str) -> bool:
        v = self._test.get(path)
        if v is None:
            v = self._test[path] = is_test_path(path, self.sc.test_path_markers)
        return v

    def site(self, path: str, line: int, symbol: str | None, kind: str, confidence: str = "exact",
             value: str | None = None, **detail: str) -> SiteRec:
        if path in self.copy_reasons and "reason" not in detail:
            detail["reason"] = self.copy_reasons[path]
        return SiteRec(self.layout.repo_of(path), path, line, symbol, kind, confidence, self.test_only(path), value,
                       {k: v for k, v in detail.items() if v})

    def unresolved(self, kind: str, path: str, line: int, symbol: str | None, site_kind: str, expr: Any,
                   expr_path: str | None = None, **detail: str) -> None:
        """Record a site whose value could not be resolved (``expr`` is read in ``expr_path``, default ``path``)."""
        raw, reason = explain(self.r, expr, expr_path or path)
        if expr_path and expr_path != path:
            detail["expr_file"] = expr_path
        self.idx.unresolved.setdefault(kind, []).append(
            self.site(path, line, symbol, site_kind, "heuristic", None, raw=raw, reason=reason, **detail))

    def in_messaging(self, path: str) -> bool:
        found = self._in_msg.get(path)
        if found is None:
            pkg_dir = self.layout.package_dir_of(path)
            found = self._msg_probe in "/" + path or bool(
                self._msg_tail and pkg_dir and ("/" + pkg_dir).endswith(self._msg_tail))
            self._in_msg[path] = found
        return found

    def classify(self, name: str) -> str | None:
        sc = self.sc
        if name in sc.merged_job_object:
            return "job"
        if any(name.endswith(s) for s in sc.queue_suffixes):
            return "queue"
        if name in sc.stream_enum_names or any(name.endswith(s) for s in sc.stream_enum_names):
            return "stream"
        if any(m in name for m in sc.ws_type_markers):
            return "ws_event"
        if any(name.endswith(s) for s in sc.job_type_suffixes):
            return "job"
        if any(name.endswith(s) for s in sc.event_type_suffixes):
            return "event"
        return None

    def decl_kind(self, decl: tuple[str, str] | None) -> str | None:
        if decl is None:
            return None
        if decl not in self._kinds:
            self._kinds[decl] = None if self.test_only(decl[0]) else self.uses.kind(decl, self.classify(decl[1]))
        return self._kinds[decl]

    def kind_of(self, val: Val, default: str | None) -> str | None:
        """The kind of a resolved value: its declaration's, else the only declared kind, else ``default``."""
        kind = self.decl_kind(val.decl)
        if kind is not None:
            self.use_decl(val.decl)
            return kind
        found = [k for k in KINDS if (k, val.value) in self.idx.declared]
        return found[0] if len(found) == 1 else default

    def use_decl(self, decl: tuple[str, str] | None) -> None:
        """Declare every member of a type enum found outside the messaging package once code uses it."""
        if decl is None or decl in self.secondary:
            return
        kind = self.decl_kind(decl)
        if kind is not None:
            self.secondary[decl] = kind

    # -- declarations -------------------------------------------------------------------------
    def declare(self, path: str, name: str, kind: str, table: str) -> None:
        decl = Decl(path, name, "enum" if table == "enums" else "object")
        for member, val in self.r.members(decl).items():
            if not isinstance(val, Val):
                continue
            key = (kind, self.idx.stream_key(val.value) if kind == "stream" else val.value)
            alias = f"{name}.{member}"
            info = self.idx.declared.get(key)
            if info is None:
                where = self.site(val.path or path, val.line, val.qual.split(".")[0] if val.qual else name,
                                  "declaration", value=val.value)
                info = self.idx.declared[key] = TypeInfo(kind, key[1], val.qual or alias, where)
            if alias != info.name and alias not in info.aliases:
                info.aliases.append(alias)
            self.idx.by_qual.setdefault(alias, key)
            self.idx.by_qual.setdefault(info.name, key)
            self.idx.by_member.setdefault(member, set()).add(key)

    def declarations(self, only: set[tuple[str, str]] | None = None) -> None:
        for table in ("enums", "objects"):
            for path in self.relevant:
                decls = self.facts[path].get(table)
                if not decls or self.test_only(path):
                    continue
                primary = not self.has_messaging or self.in_messaging(path)
                for name, info in decls.items():
                    if only is not None and (path, name) not in only and not (
                            table == "objects" and self._spreads_used(path, name, only)):
                        continue
                    if only is None and not primary:
                        continue
                    if table == "objects" and any(e[0] == "k" and not isinstance(e[1], str) for e in info[1]):
                        continue  # computed keys: a mapping table, not a type declaration
                    kind = self.decl_kind((path, name))  # by use; the name is only a hint
                    if kind is not None:
                        self.declare(path, name, kind, table)

    def _spreads_used(self, path: str, name: str, used: set[tuple[str, str]]) -> bool:
        """True when an object merges (by spread) a declaration code uses: ``Streams = {...EventStream}``."""
        if self.decl_kind((path, name)) is None:
            return False
        return any(v.decl in used for v in self.r.members(Decl(path, name, "object")).values())

    # -- calls ----------------------------------------------------------------------------------
    def field(self, obj: Any, names: list[str]) -> Any:
        if obj and obj[0] == "o":
            for entry in obj[1]:
                if entry[0] == "k" and entry[1] in names:
                    return entry[2]
        return None

    def message_object(self, args: list[Any]) -> Any:
        for a in args:
            if a and a[0] == "o" and self.field(a, self.sc.type_fields) is not None:
                return a
        return None

    def emitter(self, obj: Any, path: str) -> str | None:
        expr = self.field(obj, self.sc.emitter_fields)
        vals = self.r.eval(expr, path) if expr is not None else []
        return vals[0].value if vals else None

    def calls(self, classes: ClassLinker) -> None:
        sc = self.sc
        entities = set(sc.outbox_entities)
        for path in self.relevant:
            for name, receiver, args, targs, line, symbol, *params in self.facts[path].get("calls", ()):
                if params and params[0]:
                    self.call_args[(path, line)] = (args, targs, params[0])
                if symbol and symbol.split(".")[0] in entities and name not in sc.migration_query_calls:
                    continue  # the entity's own plumbing (createFollowUp forwarding its caller's params to createEvent)
                if name in sc.create_job_calls:
                    self.create_job(path, receiver, args, targs, line, symbol, classes)
                elif name in sc.fallback_calls:
                    self.fallback(path, args, line, symbol, classes)
                elif name in sc.create_event_calls:
                    self.create_event(path, receiver, args, targs, line, symbol)
                elif name in sc.direct_queue_calls:
                    self.direct_queue(path, receiver, args, line, symbol)
                elif name in sc.ws_send_calls and self.extra.ws_call(path, name, receiver, args, line, symbol):
                    pass  # linked once post-processors are known (their inputs narrow mapping lookups)
                elif name in sc.repository_create_calls:
                    self.extra.repository_create(path, receiver, args, line, symbol)
                elif (name in sc.migration_query_calls and args and args[0][0] in ("c", "r", "+", "x")
                      and not (symbol or "").endswith(".down")):
                    self.query_calls.append((path, args[0], line, symbol))

    def type_values(self, type_expr: Any, targs: list[Any], path: str, symbol: str | None) -> list[Val]:
        """Values of a producer's type (else of its ``<typeof X.Y>`` type argument). Inside a worker, a lookup
        keyed by the job (``getEventForJob(job.name)``) is read for the jobs that worker routes only."""
        vals = self.r.eval(type_expr, path) if type_expr is not None else []
        if not vals and targs:
            vals = self.r.eval(targs[0], path)
        jobs = self.worker_jobs.get((path, (symbol or "").split(".")[0])) if any(v.via for v in vals) else None
        if jobs:
            vals = eval_for_jobs(self.r, type_expr, path, jobs) or vals
        return vals

    def _is_entity_call(self, receiver: str) -> bool:
        last = receiver.split(".")[-1]
        return last in self.sc.outbox_entities

    def produce(self, key: tuple[str, str], site: SiteRec) -> None:
        self.idx.add_producer(key, site)
        if site.symbol:
            cls = site.symbol.split(".")[0]
            self.idx.class_producers.setdefault((site.file, cls), []).append((key, site))

    def create_job(self, path: str, receiver: str, args: list[Any], targs: list[Any], line: int,
                   symbol: str | None, classes: ClassLinker) -> None:
        obj = self.message_object(args)
        if obj is None and not self._is_entity_call(receiver):
            return
        type_expr = self.field(obj, self.sc.type_fields) if obj is not None else (args[0] if args else None)
        method = (symbol or "").split(".")[-1]
        if type_expr is not None and type_expr[0] == "p" and method in self.sc.fallback_calls:
            return  # the fallback helper itself: its callers are the producers
        vals = self.type_values(type_expr, targs, path, symbol)
        entity = self._is_entity_call(receiver)
        if not entity:  # another API named createJob: only a declared job type makes it a producer
            vals = [v for v in vals if self.kind_of(v, None) == "job"]
            if not vals:
                return
        target_expr = self.field(obj, self.sc.job_target_fields)
        queues = self.r.eval(target_expr, path) if target_expr is not None else []
        queue = ", ".join(sorted({q.value for q in queues}))
        target_raw = render(target_expr, compact=True) if target_expr is not None and not queues else ""
        emitter = self.emitter(obj, path)
        if not vals:
            self.unresolved("job", path, line, symbol, "create_job", type_expr, queue=queue)
            return
        paired = paired_lookup(self.r, type_expr, target_expr, path) if len(vals) > 1 else {}
        for v in vals:
            conf = "heuristic" if v.heuristic else "exact"
            own = paired.get(v.value) or queues
            site = self.site(path, line, symbol, "create_job", conf, v.value,
                             queue=", ".join(sorted({q.value for q in own})), target_raw=target_raw,
                             emitter=emitter or "", via=v.via or "")
            self.kind_of(v, "job")
            self.produce(("job", v.value), site)
            for q in own:
                self.idx.add_route(("job", v.value), ("queue", q.value), "createJob target")

    def fallback(self, path: str, args: list[Any], line: int, symbol: str | None, classes: ClassLinker) -> None:
        if not args:
            return
        if args[0][0] not in ("r", "s", "p", "x", "c"):
            return  # withFallback(() => ..., ...) of some other library
        vals = [v for v in self.r.eval(args[0], path) if self.kind_of(v, None) == "job"]
        cls = (symbol or "").split(".")[0]
        wrapper, how = classes.fallback_wrapper(path, cls)
        queue = wrapper.detail.get("queue", "") if wrapper is not None else ""
        detail = {"queue": queue, "emitter": wrapper.detail.get("emitter", "") if wrapper else "",
                  "wrapper": f"{wrapper.file}:{wrapper.line}" if wrapper else "", "wrapper_found": how}
        if not vals:
            if args[0][0] == "p" or (args[0][0] == "r" and len(args[0][1]) < 2):
                return  # forwarding wrapper of the helper (its callers are seen), or not a job type
            self.unresolved("job", path, line, symbol, "fallback", args[0], **detail)
            return
        for v in vals:
            conf = "heuristic" if v.heuristic or how == "same-repo" else "exact"
            site = self.site(path, line, symbol, "fallback", conf, v.value, via=v.via or "", **detail)
            self.kind_of(v, "job")
            self.produce(("job", v.value), site)
            for q in (queue.split(", ") if queue else []):
                self.idx.add_route(("job", v.value), ("queue", q), "fallback helper target")

    def create_event(self, path: str, receiver: str, args: list[Any], targs: list[Any], line: int,
                     symbol: str | None) -> None:
        obj = self.message_object(args)
        if obj is None and not self._is_entity_call(receiver):
            return
        type_expr = self.field(obj, self.sc.type_fields) if obj is not None else (args[0] if args else None)
        vals = self.type_values(type_expr, targs, path, symbol)
        if not self._is_entity_call(receiver):  # e.g. a gRPC client's createEvent(...) of a domain "event"
            vals = [v for v in vals if self.kind_of(v, None) in ("event", "ws_event")]
            if not vals:
                return
        targets_expr = self.field(obj, self.sc.target_services_fields)
        targets = self.r.eval_list(targets_expr, path) if targets_expr is not None else []
        for t in targets:
            self.use_decl(t.decl)
        streams = sorted({self.idx.stream_key(t.value) for t in targets})
        stream_raw = render(targets_expr, compact=True) if targets_expr is not None and not targets else ""
        emitter = self.emitter(obj, path)
        if not vals:
            self.unresolved("event", path, line, symbol, "create_event", type_expr, stream=", ".join(streams))
            return
        for v in vals:
            conf = "heuristic" if v.heuristic else "exact"
            kind = "ws_event" if self.kind_of(v, "event") == "ws_event" else "event"
            site = self.site(path, line, symbol, "create_event", conf, v.value, stream=", ".join(streams),
                             stream_raw=stream_raw, emitter=emitter or "", via=v.via or "")
            self.produce((kind, v.value), site)
            for s in streams:
                self.idx.add_route((kind, v.value), ("stream", s), "targetServices")

    def direct_queue(self, path: str, receiver: str, args: list[Any], line: int, symbol: str | None) -> None:
        if not args or args[0][0] not in ("r", "s"):
            return
        for v in self.r.eval(args[0], path):
            if self.kind_of(v, None) != "job" and ("job", v.value) not in self.idx.declared:
                continue
            site = self.site(path, line, symbol, "direct_queue", "heuristic", v.value, receiver=receiver)
            self.produce(("job", v.value), site)

    # -- the whole link -------------------------------------------------------------------------
    def run(self) -> LinkedIndex:
        self.copy_reasons = test_only_migrations(self)
        for path in self.copy_reasons:
            self._test[path] = True
        self.uses.collect()
        self.declarations()
        classes = ClassLinker(self)
        classes.handlers_and_wrappers()
        classes.workers()
        for w in self.idx.workers.values():  # the jobs each worker class runs
            jobs = set(w.switch_jobs) | {j for h in w.handlers for j in self.idx.handlers[h].jobs}
            self.worker_jobs[w.key] = sorted(jobs)
        self.calls(classes)
        link_sql(self)
        link_mappings(self)
        classes.post_processors()
        narrow_job_tables(self)  # before websocket sends: their inputs are what these writes produce
        self.extra.link_ws()
        classes.collaborators()
        if self.secondary:
            self.declarations(only=set(self.secondary))
        self.finish()
        return self.idx

    def finish(self) -> None:
        idx = self.idx
        for rec in idx.handlers.values():
            for job in rec.jobs:
                idx.handlers_by_job.setdefault(job, []).append(rec)
        for w in idx.workers.values():
            for q in w.queues:
                idx.workers_by_queue.setdefault(q, []).append(w)
            for h in w.handlers:
                if h in idx.handlers:
                    idx.handlers[h].routed_by.append(w.key)
        emitters = set(self.known_emitters)
        for sites in idx.producers.values():
            for s in sites:
                if s.detail.get("emitter"):
                    emitters.add(s.detail["emitter"])
        idx.emitters = sorted(emitters)


def link(facts: dict[str, dict[str, Any]], layout: Layout, conventions: Conventions,
         known_emitters: list[str] | None = None) -> LinkedIndex:
    """Resolve every file's facts into a :class:`LinkedIndex`.

    The linker's working state (resolver, use kinds, extra producers) points back at the linker: its
    attributes are dropped once the index is built, so reference counting frees that state at once. The
    index service pauses the cyclic collector while it links and freezes what it built: cycles left
    here would never be collected (a long-running server grew by the linker's state on every change)."""
    linker = Linker(facts, layout, conventions, known_emitters)
    try:
        return linker.run()
    finally:
        linker.__dict__.clear()
