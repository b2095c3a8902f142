"""analyze_impact over a linked index: matches, producers, consumers, routes, follow-ups.

A target is a member name (``GEOCODE_EVENT``), a qualified name (``JobMessagingType.X``,
``EventsJobType.X`` or any alias), a string value, a queue or a stream (with or without the
``stream:`` prefix). Every declaration or observed value equal to it is a match, so an
ambiguous member name lists all its jobs, events and websocket types; an unknown target
gets the closest known names as suggestions.

Follow-ups (to ``depth``): what a job's handler emits (and the classes it names that write,
such as an injected writer: heuristic), what the worker routing the job emits (its own class
and base classes), the outcome events the audit trigger writes for the job's emitter, what
the started post-processors accepting an event emit, and the entries of mapping tables
(job -> event -> websocket message). A value a consumer computes through a mapping table is
followed only for the job that started the chain.
"""

from __future__ import annotations

import difflib

from tools.mesh_index.followups import FollowUpWalker
from tools.mesh_index.linked import Key, LinkedIndex, PostProcessorRec, SiteRec, WorkerRec, norm
from tools.mesh_index.model import ImpactResult, IndexInfo, Match, Route
from tools.mesh_index.node_targets import resolve_nodes, upstream
from tools.mesh_index.paging import page

KIND_ORDER = {"job": 0, "event": 1, "ws_event": 2, "queue": 3, "stream": 4}
MAX_UNRESOLVED = 50


class ImpactEngine(FollowUpWalker):
    """Queries over one :class:`LinkedIndex` (cheap lookup tables are built once); follow-ups from
    :class:`~tools.mesh_index.followups.FollowUpWalker`."""

    def __init__(self, idx: LinkedIndex):
        self.idx = idx
        self.known: set[Key] = idx.known_values()
        self.queue_producers: dict[str, list[SiteRec]] = {}
        self.stream_producers: dict[str, list[SiteRec]] = {}
        for key, sites in idx.producers.items():
            for s in sites:
                for q in _split(s.detail.get("queue")) if key[0] == "job" else ():
                    self.queue_producers.setdefault(q, []).append(s)
                for st in _split(s.detail.get("stream")) if key[0] != "job" else ():
                    self.stream_producers.setdefault(st, []).append(s)
        self.stream_consumers: dict[str, list] = {}
        self.pp_by_value: dict[str, list[PostProcessorRec]] = {}
        self.pp_open: list[PostProcessorRec] = []  # filters by pattern, accepting everything, or unreadable
        for pp in idx.post_processors.values():
            for st in pp.streams:
                self.stream_consumers.setdefault(st, []).append(pp)
            for value in pp.accepts:
                self.pp_by_value.setdefault(value, []).append(pp)
            if pp.patterns or pp.accept_all or pp.filter_unknown:
                self.pp_open.append(pp)
        self.switch_workers: dict[str, list[WorkerRec]] = {}  # job -> workers routing it by a switch case
        for w in idx.workers.values():
            for job in w.switch_jobs:
                self.switch_workers.setdefault(job, []).append(w)
        # tables some producer reads (its site's `via`): their entries are followed through that reader only
        self.tables_read = {s.detail["via"] for sites in idx.producers.values() for s in sites if s.detail.get("via")}
        self.by_value: dict[str, list[Key]] = {}
        for key in self.known:
            self.by_value.setdefault(key[1], []).append(key)
        self._by_norm: dict[str, set[Key]] | None = None
        self._table_keys: list[set[str]] | None = None
        self._pp_inputs: dict[tuple[str, str], list[Key]] | None = None

    @property
    def by_norm(self) -> dict[str, set[Key]]:
        """Names and values with case and separators removed (built on the first loose lookup)."""
        if self._by_norm is None:
            table: dict[str, set[Key]] = {}
            for name, key in self.idx.by_qual.items():
                table.setdefault(norm(name), set()).add(key)
            for member, keys in self.idx.by_member.items():
                table.setdefault(norm(member), set()).update(keys)
            for key in self.known:
                table.setdefault(norm(key[1]), set()).add(key)
            self._by_norm = table
        return self._by_norm

    # -- matching --------------------------------------------------------------------------------------
    def resolve_target(self, target: str) -> tuple[list[Key], bool]:
        """Keys the target names, and whether they were found only case/separator-insensitively."""
        t = target.strip()
        keys: list[Key] = []
        if t in self.idx.by_qual:
            keys.append(self.idx.by_qual[t])
        keys.extend(sorted(self.idx.by_member.get(t, ()), key=_key_order))
        keys.extend(sorted(self.by_value.get(t, ()), key=_key_order))
        prefix = self.idx.stream_prefix
        if not keys and not t.startswith(prefix):
            keys.extend(k for k in self.by_value.get(prefix + t, ()) if k[0] == "stream")
        if keys:
            return list(dict.fromkeys(keys)), False
        loose = self.by_norm.get(norm(t), set())
        return sorted(loose, key=_key_order), bool(loose)

    def suggestions(self, target: str, limit: int = 8) -> list[str]:
        names = set(self.idx.by_qual) | set(self.idx.by_member) | {k[1] for k in self.known}
        close = difflib.get_close_matches(target, list(names), n=limit, cutoff=0.55)
        if len(close) < limit:
            t = norm(target)
            extra = sorted(n for n in names if t and (t in norm(n) or norm(n) in t) and n not in close)
            close.extend(extra[: limit - len(close)])
        return close

    def match_model(self, key: Key) -> Match:
        info = self.idx.declared.get(key)
        if info is None:
            return Match(kind=key[0], name=key[1], value=key[1], defined_at=None, aliases=[])  # type: ignore[arg-type]
        return Match(kind=key[0], name=info.name, value=key[1],  # type: ignore[arg-type]
                     defined_at=info.defined_at.model() if info.defined_at else None, aliases=list(info.aliases))

    # -- producers / consumers -------------------------------------------------------------------------
    def producers(self, key: Key) -> list[SiteRec]:
        kind, value = key
        if kind == "queue":
            return list(self.queue_producers.get(value, ()))
        if kind == "stream":
            return list(self.stream_producers.get(value, ()))
        return list(self.idx.producers.get(key, ()))

    def consumers(self, key: Key) -> list[SiteRec]:
        kind, value = key
        idx = self.idx
        out: list[SiteRec] = []
        if kind == "job":
            workers_seen = set()
            for h in idx.handlers_by_job.get(value, ()):
                names = ", ".join(sorted(w[1] for w in h.routed_by))
                out.append(h.site.with_value(value, h.confidence, worker_class=names))
                for wkey in h.routed_by:
                    if wkey not in workers_seen:
                        workers_seen.add(wkey)
                        out.append(idx.workers[wkey].site.with_value(value, handler_class=h.key[1]))
            for w in self.switch_workers.get(value, ()):
                if w.key not in workers_seen:
                    out.append(w.site.with_value(value, route="switch"))
        elif kind == "event":
            out = [pp.site.with_value(value, conf) for pp, conf, why in self.event_consumers_why(key) if not why]
        elif kind == "queue":
            out = [w.site.with_value(value) for w in idx.workers_by_queue.get(value, ())]
        elif kind == "stream":
            out = [pp.site.with_value(value) for pp in self.stream_consumers.get(value, ())]
        return out

    def event_consumers(self, key: Key) -> list[tuple[PostProcessorRec, str]]:
        """Post-processors that read a stream the event is written to *and* whose filter accepts it (a consumer
        known only by its filter, a stream being unknown, is a candidate: :meth:`candidates`)."""
        return [(pp, conf) for pp, conf, reason in self.event_consumers_why(key) if not reason]

    def candidates(self, key: Key) -> list[SiteRec]:
        """Sites that might concern ``key`` but whose value set is not resolved: producers matched only as "every
        value of a table / config key", consumers whose filter accepts the type while a stream is unknown."""
        out = list(self.idx.candidates.get(key, ()))
        if key[0] == "event":
            out += [pp.site.with_value(key[1], "heuristic", reason=why)
                    for pp, _conf, why in self.event_consumers_why(key) if why]
        return out

    def event_consumers_why(self, key: Key) -> list[tuple[PostProcessorRec, str, str]]:
        """(post-processor, confidence, reason) for each consumer of an event: its filter accepts the type and it
        reads a stream the event is written to; when the stream of either side is unknown it is listed as
        ``heuristic`` with the reason, never matched on the type alone as if sure."""
        value = key[1]
        routes = {r[1] for r in self.idx.routes_out.get(key, {}) if r[0] == "stream"}
        blind = [s for s in self.idx.producers.get(key, ()) if not s.test_only and not s.detail.get("stream")]
        out = []
        seen: set[int] = set()
        for pp in [*self.pp_by_value.get(value, ()), *self.pp_open]:
            if id(pp) in seen:
                continue
            seen.add(id(pp))
            conf = pp.accepts_value(value)
            if conf is None and (pp.accept_all or pp.filter_unknown) and routes & set(pp.streams):
                conf = "heuristic"  # no filter, or one the index cannot read: what reaches its stream, maybe
            if conf is None:
                continue
            reason = ""
            if not pp.streams:
                reason = "its filter accepts the type, but the stream it reads is unknown (see unresolved)"
            elif not routes:
                reason = (f"its filter accepts the type; no stream is known for this event (it reads "
                          f"{', '.join(pp.streams)})")
            elif not routes & set(pp.streams):
                if not blind:
                    continue  # reads streams the event never travels on
                where = f"{blind[0].file}:{blind[0].line}"
                reason = (f"its filter accepts the type; it reads {', '.join(pp.streams)}, the event is written to "
                          f"{', '.join(sorted(routes))} and by a producer whose stream is unknown ({where})")
            if reason and pp.streams and conf == "exact" and not self.idx.producers.get(key) \
                    and not self.table_filter(pp):
                # nothing writes the event: its filter names it and its stream is known, a consumer if it ever comes
                reason = ""
                conf = "heuristic"
            sure = not reason and not pp.stream_heuristic and pp.started
            out.append((pp, conf if sure else "heuristic", reason))
        return out

    def table_filter(self, pp: PostProcessorRec) -> bool:
        """Whether ``pp``'s filter is "any key of a mapping table" (it accepts every key of a table of two or more
        entries): such a filter says nothing of which events reach it, only its stream does."""
        if self._table_keys is None:
            tables: dict[str, set[str]] = {}
            for rec in self.idx.mappings:
                tables.setdefault(rec.name, set()).update(f[1] for f, _t, _l, _h in rec.entries)
            self._table_keys = [keys for keys in tables.values() if len(keys) >= 2]
        accepted = set(pp.accepts)
        return any(keys <= accepted for keys in self._table_keys)

    def pp_inputs(self) -> dict[tuple[str, str], list[Key]]:
        """Post-processor -> the events that reach it (built on first use)."""
        if self._pp_inputs is None:
            table: dict[tuple[str, str], list[Key]] = {}
            for key in sorted(self.known):
                if key[0] == "event":
                    for pp, _conf in self.event_consumers(key):
                        table.setdefault(pp.key, []).append(key)
            self._pp_inputs = table
        return self._pp_inputs

    def class_inputs(self, owner: tuple[str, str], collaborators: bool = True) -> list[Key]:
        """What a class consumes: a handler its jobs, a worker the jobs it routes, a post-processor the events that
        reach it; a class a consumer names (an injected writer) works for that consumer's inputs."""
        idx = self.idx
        keys: list[Key] = []
        if owner in idx.handlers:
            keys += [("job", j) for j in idx.handlers[owner].jobs]
        if owner in idx.workers:
            w = idx.workers[owner]
            keys += [("job", j) for h in w.handlers if h in idx.handlers for j in idx.handlers[h].jobs]
            keys += [("job", j) for j in w.switch_jobs]
        if owner in idx.post_processors:
            keys += self.pp_inputs().get(owner, [])
        if collaborators and not keys:
            for consumer, others in idx.collaborators.items():
                if owner in others and consumer != owner:
                    keys += self.class_inputs(consumer, collaborators=False)
        return list(dict.fromkeys(keys))

    def routes(self, key: Key) -> list[Route]:
        kind = key[0]
        found: dict[Key, list[str]] = {}
        if kind in ("queue", "stream"):
            found[key] = ["is the target"]
        for route, via in self.idx.routes_out.get(key, {}).items():
            found.setdefault(route, []).extend(via)
        if kind == "event":
            for pp, _conf in self.event_consumers(key):
                for st in pp.streams:
                    found.setdefault(("stream", st), []).append(f"read by {pp.key[1]}")
        out = []
        for (rkind, name), via in sorted(found.items()):
            consumers = len(self.idx.workers_by_queue.get(name, ())) if rkind == "queue" else sum(
                1 for pp in self.stream_consumers.get(name, ()) if pp.started)
            sites = self.queue_producers.get(name, ()) if rkind == "queue" else self.stream_producers.get(name, ())
            producers = sum(1 for s in sites if not s.test_only)
            out.append(Route(kind=rkind, name=name, producers=producers, consumers=consumers,  # type: ignore[arg-type]
                             via=list(dict.fromkeys(via))))
        return out

    # -- the whole answer --------------------------------------------------------------------------------
    def analyze(self, target: str, depth: int, include_tests: bool, info: IndexInfo, direction: str = "downstream",
                limit: int | None = None, offset: int = 0) -> ImpactResult:
        keys, loose = self.resolve_target(target)
        notes: list[str] = []
        if loose:
            notes.append("matched ignoring case and separators")
        producers: list[SiteRec] = []
        consumers: list[SiteRec] = []
        candidates: list[SiteRec] = []
        routes: list[Route] = []
        test_producers = 0
        nodes = resolve_nodes(self, target) if not keys else []
        ups = list(keys)  # where the upstream walk starts: the values, or what the node consumes
        downs = list(keys)  # where the follow-ups start: the values, or what the node emits
        for hit in nodes:
            producers += [s for s in hit.emits if include_tests or not s.test_only]
            consumers += [c for c in hit.consumes if include_tests or not c.test_only]
            ups += self.class_inputs((hit.match.file or "", hit.match.name)) if hit.match.kind == "class" else []
            downs += [k for k in (_key_of(self, s) for s in hit.emits) if k is not None]
        for key in dict.fromkeys([*ups, *downs]) if nodes else ():
            routes.extend(self.routes(key))
        for key in keys:
            for s in self.producers(key):
                if s.test_only:
                    test_producers += 1
                if include_tests or not s.test_only:
                    producers.append(s)
            consumers.extend(c for c in self.consumers(key) if include_tests or not c.test_only)
            candidates.extend(c for c in self.candidates(key) if include_tests or not c.test_only)
            routes.extend(self.routes(key))
        for key in keys:
            hint = member_name_hint(self.idx, key)
            if hint:
                notes.append(f"'{key[1]}' is written as a string in code but is {hint}: those sites probably "
                             "meant the value")
        if len(keys) > 1:
            notes.append(f"'{target}' names {len(keys)} different things: producers and consumers of all are listed "
                         "(each site's value tells which)")
        if test_producers and not include_tests:
            notes.append(f"{test_producers} producer site(s) exist only in tests (test controllers, specs): "
                         "not counted; pass include_tests=true to list them")
        kinds = {k[0] for k in keys}
        related = {"job": ("job", "queue"), "event": ("event", "stream"), "ws_event": ("event",),
                   "queue": ("queue",), "stream": ("stream",)}
        unresolved = [s for kind in sorted({r for k in kinds for r in related[k]})
                      for s in self.idx.unresolved.get(kind, ()) if include_tests or not s.test_only]
        if unresolved:
            notes.append(f"{len(unresolved)} reference(s) of this kind could not be resolved statically; "
                         "one of them may concern the target (see unresolved)")
            if not producers:
                notes.append("no producer resolved is not proof of absence: check the unresolved sites")
        if info.parse_errors:
            notes.append(f"{info.parse_errors} file(s) have syntax errors; sites in them may be missing")
        if info.skipped_files:
            notes.append(f"{len(info.skipped_files)} file(s) over the size cap were not indexed (generated code?): "
                         f"{', '.join(info.skipped_files[:3])}")
        if info.stale_files:
            notes.append(f"{len(info.stale_files)} file(s) changed since indexing; refresh the index")
        if candidates:
            notes.append(f"{len(candidates)} candidate site(s) might concern the target but their value is not "
                         "resolved (every value of a table, a stream unknown): not counted as producers or "
                         "consumers (see candidates, each with its reason)")
        downs = list(dict.fromkeys(downs))
        followups = self.followups(downs, depth, include_tests) if depth > 0 and direction != "upstream" else []
        ups = list(dict.fromkeys(ups))
        up = upstream(self, ups, max(depth, 1), include_tests) if direction in ("upstream", "both") else []
        result = ImpactResult(
            target=target,
            matches=[self.match_model(k) for k in keys],
            producers=[s.model() for s in _dedupe(producers)],
            consumers=[s.model() for s in _dedupe(consumers)],
            candidates=[s.model() for s in _dedupe(candidates)],
            routes=_merge_routes(routes),
            followups=followups,
            unresolved=[s.model() for s in unresolved[:MAX_UNRESOLVED]],
            index=info,
            suggestions=[] if keys or nodes else self.suggestions(target),
            notes=notes,
            nodes=[h.match for h in nodes],
            upstream=up,
            direction=direction,
        )
        return page(result, limit, offset)


def member_name_hint(idx: LinkedIndex, key: Key) -> str | None:
    """For an undeclared job/event value equal to a declared member's *name* (``'EVENT_UPDATED'``):
    "the member name of Enum.MEMBER (value '...'), not a value"; else None."""
    if key in idx.declared or key[0] not in ("job", "event", "ws_event"):
        return None
    members = sorted(idx.by_member.get(key[1], ()), key=lambda k: (k[0] != key[0], _key_order(k)))
    named = [f"{idx.declared[k].name} (value '{k[1]}')" for k in members if k in idx.declared and k[0] == key[0]]
    named = named or [f"{idx.declared[k].name} (value '{k[1]}')" for k in members if k in idx.declared]
    return f"the member name of {' / '.join(named)}, not a value" if named else None


def _key_of(engine: ImpactEngine, site: SiteRec) -> Key | None:
    """The key a producer site writes (its value, of the kind the index knows it as)."""
    kinds = ("job", "event", "ws_event")
    return next(((k, site.value) for k in kinds if site.value is not None and (k, site.value) in engine.known), None)


def _split(text: str | None) -> list[str]:
    return [p.strip() for p in text.split(",") if p.strip()] if text else []


def _key_order(key: Key) -> tuple[int, str]:
    return KIND_ORDER.get(key[0], 9), key[1]


def _dedupe(sites: list[SiteRec]) -> list[SiteRec]:
    seen = set()
    out = []
    for s in sites:
        ident = (s.file, s.line, s.kind, s.value, s.symbol)
        if ident not in seen:
            seen.add(ident)
            out.append(s)
    return out


def _merge_routes(routes: list[Route]) -> list[Route]:
    merged: dict[tuple[str, str], Route] = {}
    for r in routes:
        if (r.kind, r.name) in merged:
            merged[(r.kind, r.name)].via = list(dict.fromkeys(merged[(r.kind, r.name)].via + r.via))
        else:
            merged[(r.kind, r.name)] = r
    return list(merged.values())
