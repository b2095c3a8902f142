"""Producers the outbox entities do not name: websocket sends and event rows built by a repository.

- ``ws_send``: a call named in ``ws_send_calls`` on a receiver whose words are in
  ``ws_send_receivers`` (``this.notificationService.notifyUser(id, WsType.X, payload)``,
  ``this.gateway.server.to(room).emit(OrderWsType.SHIPPED, payload)``) produces the websocket
  type any argument resolves to, in the class and method that calls it. A type computed
  through a mapping lookup (``getWsEventForEvent(event.type)``) inside a post-processor is
  evaluated for the events that consumer can receive (those its filter accepts *and* that
  are written to a stream it reads), ``heuristic`` with ``via`` naming the table; in a class a
  post-processor names (an injected notifier), for the events of the post-processors naming it. A call
  forwarding its own parameter (the notification service's ``emit(type, payload)``) is
  plumbing: its callers are the producers.
- ``repository_create``: ``repo.create({ type, targetServices, emitter, ... })`` (a call of
  ``repository_create_calls`` whose object has a type field and a target-services or emitter
  field: an ``EventQueueEntity``-like row) produces the event its type resolves to; a type
  read from configuration (``aggregation.successEvent``, keys of ``config_event_type_keys``)
  gives one ``heuristic`` producer per value in the service's JSON config files, with the
  file and key in ``detail.config`` and the sibling ``targetServices`` as streams.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tools.mesh_index.config_lookup import ConfigLookup, dotted_refs
from tools.mesh_index.linked import PostProcessorRec
from tools.mesh_index.symbols import Decl
from tools.mesh_index.type_eval import eval_for_jobs, reads_params

if TYPE_CHECKING:
    from tools.mesh_index.sites import Linker

TYPED_TAGS = ("r", "x", "c", "|", "o", "s")


class ExtraProducers:
    def __init__(self, linker: Linker):
        self.l = linker
        self.r = linker.r
        self.sc = linker.sc
        self.idx = linker.idx
        self.ws_calls: list[tuple[str, str, str, list[Any], int, str | None]] = []
        self._json: dict[str | None, list[tuple[str, str, str]]] | None = None
        self._inputs: dict[tuple[str, str], list[str]] = {}
        self.lookup = ConfigLookup(linker)

    # -- websocket sends -----------------------------------------------------------------------------
    def ws_call(self, path: str, name: str, receiver: str, args: list[Any], line: int, symbol: str | None) -> bool:
        """Keep a websocket send for :meth:`link_ws` (run once post-processors are known); False if not one."""
        if not self.l.uses.is_ws_receiver(receiver):
            return False
        self.ws_calls.append((path, name, receiver, args, line, symbol))
        return True

    def link_ws(self) -> None:
        users = self._pp_users() if self.ws_calls else {}
        for path, name, receiver, args, line, symbol in self.ws_calls:
            cls = (symbol or "").split(".")[0]
            pp = self.idx.post_processors.get((path, cls))
            pps = [pp] if pp is not None else users.get((path, cls), [])
            sent: set[str] = set()  # one site per value and call (`emit(T.X, { type: T.X })`)
            for expr in args:
                if not expr or expr[0] not in TYPED_TAGS:
                    continue
                if expr[0] == "o":
                    expr = self.l.field(expr, self.sc.type_fields)
                    if expr is None:
                        continue
                vals = self.r.eval(expr, path)
                if expr[0] == "s":  # a bare string is a websocket type only when declared as one
                    vals = [v for v in vals if ("ws_event", v.value) in self.idx.declared]
                narrowed = False
                inputs = sorted({i for p in pps for i in self.inputs(p)}) if any(v.via for v in vals) else []
                if inputs and reads_params(self.r, expr, path):
                    # the key is the event being processed: only what the inputs map to (nothing if none maps)
                    vals = eval_for_jobs(self.r, expr, path, inputs)
                    narrowed = True
                elif inputs:  # a key from config or a field: still only what the table maps the inputs to
                    vals = [v for v in vals if not v.via or self._maps_from(v.via, inputs, v.value)]
                    narrowed = True
                elif any(v.via for v in vals) and self._ws_from_config(path, name, receiver, expr, vals, line, symbol,
                                                                     sent):
                    continue  # the key is a config value each subclass chooses (gather post-processors)
                for v in vals:
                    if v.value in sent or self.l.kind_of(v, "ws_event") != "ws_event":
                        continue
                    sent.add(v.value)
                    conf = "heuristic" if v.heuristic else "exact"
                    detail = {"call": name, "receiver": receiver[:80], "via": v.via or ""}
                    site = self.l.site(path, line, symbol, "ws_send", conf, v.value, **detail)
                    if v.via and not narrowed:
                        site.detail["inputs"] = "every value of the table (the inputs of this call are not known)"
                        site.detail["reason"] = (f"a lookup in {v.via} whose key is not known here: any of its "
                                                 "values, a candidate")
                        self.idx.add_candidate(("ws_event", v.value), site)
                        continue
                    if v.via:
                        site.detail["inputs"] = "events " + ", ".join(sorted(p.key[1] for p in pps)) + " receive(s)"
                    self.l.produce(("ws_event", v.value), site)

    def _ws_from_config(self, path: str, name: str, receiver: str, expr: Any, vals: list[Any], line: int,
                        symbol: str | None, sent: set[str]) -> bool:
        """``getWsEventForEvent(aggregation.successEvent)``: the table's values for the config entry each subclass of
        the sending class chooses (:mod:`tools.mesh_index.config_lookup`); False when the key is no such value."""
        if expr[0] != "c":
            return False
        found = [f for arg in expr[2] for f in self.config_values(arg, path)]
        bound = self.lookup.narrow(path, symbol, found, self._json_rows(path)) if found else None
        if bound is None:
            return False
        tables = {v.via for v in vals if v.via}
        method = (symbol or "").split(".", 1)[1] if "." in (symbol or "") else ""
        done: set[tuple[str, str]] = set()
        for b in bound:
            for rec, to_key, _l, _h in self.idx.mapping_from.get(("event", b.value), ()):
                if rec.name not in tables or to_key[0] != "ws_event" or (b.sub_name, to_key[1]) in done:
                    continue
                done.add((b.sub_name, to_key[1]))
                sent.add(to_key[1])
                sym = f"{b.sub_name}.{method}" if method else b.sub_name
                site = self.l.site(path, line, sym, "ws_send", "heuristic", to_key[1], call=name,
                                   receiver=receiver[:80], via=rec.name, inputs=f"event '{b.value}' ({b.why})",
                                   config=f"{b.cfg_path}: {b.key}")
                if b.candidate:
                    site.detail["reason"] = b.candidate
                    self.idx.add_candidate(to_key, site)
                    continue
                self.idx.add_producer(to_key, site)
                self.idx.class_producers.setdefault((b.sub_path, b.sub_name), []).append((to_key, site))
        return True

    def _pp_users(self) -> dict[tuple[str, str], list[PostProcessorRec]]:
        """Class -> the post-processors naming it (an injected notifier sends for the events they receive)."""
        out: dict[tuple[str, str], list[PostProcessorRec]] = {}
        for (path, name), pp in self.idx.post_processors.items():
            if not pp.started:
                continue
            info = self.l.facts.get(path, {}).get("classes", {}).get(name, {})
            for ident in info.get("refs", ()):
                decl = self.r.symbol(path, ident)
                if isinstance(decl, Decl) and decl.kind == "class":
                    out.setdefault((decl.path, decl.name), []).append(pp)
        return out

    def _maps_from(self, table: str, inputs: list[str], value: str) -> bool:
        return any(rec.name == table and to_key[1] == value
                   for i in inputs for rec, to_key, _l, _h in self.idx.mapping_from.get(("event", i), ()))

    def inputs(self, pp: PostProcessorRec) -> list[str]:
        """Events ``pp`` can receive: accepted by its filter and written to a stream it reads (any stream when its
        own is unknown)."""
        if pp.key in self._inputs:
            return self._inputs[pp.key]
        streams = set(pp.streams)
        out = []
        for key, sites in self.idx.producers.items():
            if key[0] != "event" or not any(not s.test_only for s in sites):
                continue
            if pp.accepts_value(key[1]) is None and not pp.accept_all:
                continue
            routes = {r[1] for r in self.idx.routes_out.get(key, {}) if r[0] == "stream"}
            if not streams or routes & streams:
                out.append(key[1])
        self._inputs[pp.key] = sorted(out)
        return self._inputs[pp.key]

    # -- repository create() of an event row --------------------------------------------------------
    def repository_create(self, path: str, receiver: str, args: list[Any], line: int, symbol: str | None) -> None:
        sc = self.sc
        obj = self.l.message_object(args)
        if obj is None or receiver.split(".")[-1] in sc.outbox_entities:
            return
        targets_expr = self.l.field(obj, sc.target_services_fields)
        if targets_expr is None and self.l.field(obj, sc.emitter_fields) is None:
            return  # not an event row (a user's { type, name })
        type_expr = self.l.field(obj, sc.type_fields)
        emitter = self.l.emitter(obj, path) or ""
        vals = [v for v in self.r.eval(type_expr, path) if self.l.kind_of(v, "event") in ("event", None)]
        targets = self.r.eval_list(targets_expr, path) if targets_expr is not None else []
        streams = sorted({self.idx.stream_key(t.value) for t in targets})
        for v in vals:
            self._emit(path, line, symbol, v.value, "heuristic" if v.heuristic else "exact", streams, emitter,
                       via=v.via or "")
        if vals:
            return
        found = self.config_values(type_expr, path)
        if not found:
            if type_expr is not None:
                self.l.unresolved("event", path, line, symbol, "repository_create", type_expr,
                                  stream=", ".join(streams))
            return
        bound = self.lookup.narrow(path, symbol, found, self._json_rows(path))
        if bound is not None:  # each subclass writes the entry its own super(...) argument chooses
            method = (symbol or "").split(".", 1)[1] if "." in (symbol or "") else ""
            for b in bound:
                own = streams or self.sibling_list(b.cfg_path, b.key, targets_expr)
                self._emit(path, line, f"{b.sub_name}.{method}" if method else b.sub_name, b.value, "heuristic", own,
                           emitter, owner=(b.sub_path, b.sub_name), candidate=b.candidate,
                           config=f"{b.cfg_path}: {b.key}", binding=b.why)
            return
        per_leaf: dict[str, set[str]] = {}
        for v, _p, k in found:
            per_leaf.setdefault(k.rsplit(".", 1)[-1], set()).add(v)
        for value, cfg_path, key in found:
            own = streams or self.sibling_list(cfg_path, key, targets_expr)
            leaf = key.rsplit(".", 1)[-1]
            # one entry holds the key: the value read is that one; several: which one is not known
            reason = (f"any value of the config key '{leaf}' ({len(per_leaf[leaf])} values): which entry is read "
                      "is not known, a candidate") if len(per_leaf[leaf]) > 1 else ""
            self._emit(path, line, symbol, value, "heuristic", own, emitter, candidate=reason,
                       config=f"{cfg_path}: {key}")

    def _emit(self, path: str, line: int, symbol: str | None, value: str, conf: str, streams: list[str],
              emitter: str, owner: tuple[str, str] | None = None, candidate: str = "", **detail: str) -> None:
        site = self.l.site(path, line, symbol, "repository_create", conf, value, stream=", ".join(streams),
                           emitter=emitter, **detail)
        if candidate:
            site.detail["reason"] = candidate
            self.idx.add_candidate(("event", value), site)
            return
        if owner is None:
            self.l.produce(("event", value), site)
        else:  # a subclass's own write, at its base class's line
            self.idx.add_producer(("event", value), site)
            self.idx.class_producers.setdefault(owner, []).append((("event", value), site))
        for s in streams:
            self.idx.add_route(("event", value), ("stream", s), "targetServices")

    def config_filter(self, path: str, name: str, ancestors: list[Any]) -> dict[str, str]:
        """Types a post-processor accepts through a config list (``aggregation.expects.includes(type)`` in its base
        class's filter): the list of the config entry its own ``super(...)`` argument chooses; {} when none."""
        for p, n, info in ancestors:
            filters = (info or {}).get("filters", {})
            fi = next((filters[m] for m in self.sc.post_processor_filter_methods if m in filters), None)
            if fi is None:
                continue
            if p is None:
                return {}
            rows = self._json_rows(p)
            out: dict[str, str] = {}
            for target in fi.get("sets", ()):
                if len(target) < 2 or target[0] == "this":
                    continue
                leaf = target[-1]
                found = [(v, cfg, k.rsplit(".", 1)[0]) for cfg, k, v in rows
                         if _entry_field(k.rsplit(".", 1)[0], leaf) and k.rsplit(".", 1)[-1].isdigit()]
                for b in self.lookup.narrow(p, n, found, rows) or ():
                    if (b.sub_path, b.sub_name) == (path, name) and not b.candidate:
                        out[b.value] = "heuristic"
            return out
        return {}

    def _json_rows(self, path: str) -> list[tuple[str, str, str]]:
        return list(self._json_by_pkg().get(self.l.layout.package_dir_of(path), ()))

    def _json_by_pkg(self) -> dict[str | None, list[tuple[str, str, str]]]:
        if self._json is None:
            self._json = {}
            for p, f in self.l.facts.items():
                if "json" in f:
                    pkg = self.l.layout.package_dir_of(p)
                    self._json.setdefault(pkg, []).extend((p, k, v) for k, v in f["json"])
        return self._json

    def config_values(self, expr: Any, path: str) -> list[tuple[str, str, str]]:
        """(value, config file, key) of each config entry an expression reads (``aggregation.successEvent``,
        ``ok ? a.successEvent : a.failureEvent``) when its last name is one of ``config_event_type_keys``."""
        pkg = self.l.layout.package_dir_of(path)
        rows = self._json_by_pkg().get(pkg, ())
        names = set()
        for ref in dotted_refs(expr):
            parts = ref.split(".")
            last = parts[-1]
            if last in self.sc.config_event_type_keys:
                names.add(last)
            elif len(parts) >= 2 and any(_entry_field(k, last) and ("event", v) in self.idx.declared
                                         for _p, k, v in rows):
                names.add(last)  # by data: a field of the config's array entries holding declared event types
        if not names:
            return []
        return [(v, p, k) for p, k, v in rows if k.split(".")[-1] in names]

    def sibling_list(self, cfg_path: str, key: str, targets_expr: Any) -> list[str]:
        """Streams of the config entry holding ``key``: its ``targetServices`` list (the field the code reads)."""
        fields = {ref.split(".")[-1] for ref in dotted_refs(targets_expr)} & set(self.sc.target_services_fields)
        prefix = key.rsplit(".", 1)[0] + "." if "." in key else ""
        out = set()
        for p, k, v in self._json_by_pkg().get(self.l.layout.package_dir_of(cfg_path), ()):
            if p != cfg_path or not k.startswith(prefix):
                continue
            rest = k[len(prefix):].split(".")
            if rest[0] in fields and (len(rest) == 1 or rest[1].isdigit()):
                out.add(self.idx.stream_key(v))
        return sorted(out)


def _entry_field(key: str, leaf: str) -> bool:
    """Whether a flattened config key is ``<array>.<n>.<leaf>`` (a field of an array entry)."""
    parts = key.split(".")
    return len(parts) >= 3 and parts[-1] == leaf and parts[-2].isdigit()
