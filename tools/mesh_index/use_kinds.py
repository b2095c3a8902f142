"""Kinds by use: whether an enum or object holds jobs, events, websocket types, queues or streams.

Before any site is linked, every place that *uses* a value in a typed role votes for the kind
of the declaration the value resolves to (the enum or ``as const`` object, and the object a
member was read through, so that a merged object and each enum it spreads are covered):

- the ``type`` of ``createJob`` (entity call, or an object with a queue ``target``), the first
  argument of the fallback helper, a handler's ``jobType``, a worker's ``switch`` case, a key of
  the job registry interface (``job_registry``): job;
- ``createJob``'s ``target`` and a worker's ``@Processor(...)`` argument: queue;
- the ``type`` of ``createEvent``/``createFollowUp`` and the members a ``shouldProcess`` filter
  compares with: event; their ``targetServices`` and a post-processor's stream field: stream;
- any argument of a websocket send call (``ws_send_calls`` on a receiver named in
  ``ws_send_receivers``), a mapping lookup included: websocket type.

A declaration's kind is the kind most of its uses give; the names of ``[conventions.static]``
(``job_type_suffixes``, ``ws_type_markers``, ...) only decide for a declaration nothing uses,
or between tied votes. So a renamed copy of a workspace gets the same kinds.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from tools.mesh_index.symbols import Decl

if TYPE_CHECKING:
    from tools.mesh_index.sites import Linker

MAX_SPREAD_DEPTH = 64  # objects spreading objects: a longer chain is not followed
KIND_ORDER = ("job", "event", "ws_event", "queue", "stream")


def receiver_words(receiver: str) -> set[str]:
    """Lower-case words of a call receiver: ``this.notificationService`` -> {this, notification, service}."""
    words: set[str] = set()
    cur = ""
    for ch in receiver:
        if ch.isalnum():
            if ch.isupper() and cur and not cur[-1].isupper():
                words.add(cur.lower())
                cur = ""
            cur += ch
        else:
            if cur:
                words.add(cur.lower())
            cur = ""
    if cur:
        words.add(cur.lower())
    return words


class UseKinds:
    """Votes of use for each declaration (``(path, name)``), collected once per link."""

    def __init__(self, linker: Linker):
        self.l = linker
        self.r = linker.r
        self.sc = linker.sc
        self.votes: dict[tuple[str, str], Counter[str]] = {}
        self._ws_receivers = {w.lower() for w in self.sc.ws_send_receivers}

    def is_ws_receiver(self, receiver: str) -> bool:
        return bool(receiver_words(receiver) & self._ws_receivers)

    def vote(self, expr: Any, path: str, kind: str, as_list: bool = False) -> None:
        if not expr or not isinstance(expr, list):
            return
        if expr[0] == "o":  # { type: X } passed whole
            inner = self.l.field(expr, self.sc.type_fields)
            if inner is not None:
                self.vote(inner, path, kind)
            return
        vals = self.r.eval_list(expr, path) if as_list else self.r.eval(expr, path)
        for v in vals:
            if v.decl is not None:
                self.votes.setdefault(v.decl, Counter())[kind] += 1
        self._vote_holder(expr, path, kind)

    def _vote_holder(self, expr: Any, path: str, kind: str) -> None:
        """The object a member is read through (``JobMessagingType.X``: the merged object) gets the vote too."""
        if expr[0] == "r" and len(expr[1]) >= 2:
            holder = self.r.resolve_decl(["r", expr[1][:-1]], path)
            if isinstance(holder, Decl) and holder.kind in ("enum", "object", "const"):
                self.votes.setdefault((holder.path, holder.name), Counter())[kind] += 1
        elif expr[0] == "a":
            for item in expr[1]:
                if item and item[0] in ("r", "..."):
                    self._vote_holder(item if item[0] == "r" else item[1], path, kind)

    def collect(self) -> None:
        sc = self.sc
        entities = set(sc.outbox_entities)
        for path in self.l.relevant:
            if self.l.test_only(path):
                continue
            f = self.l.facts[path]
            for name, receiver, args, targs, _line, symbol, *_params in f.get("calls", ()):
                if symbol and symbol.split(".")[0] in entities:
                    continue
                entity = receiver.split(".")[-1] in entities
                obj = self.l.message_object(args)
                type_expr = self.l.field(obj, sc.type_fields) if obj is not None else (args[0] if args else None)
                if name in sc.create_job_calls:
                    target = self.l.field(obj, sc.job_target_fields) if obj is not None else None
                    if entity or target is not None:
                        self.vote(type_expr, path, "job")
                        if not type_expr and targs:
                            self.vote(targs[0], path, "job")
                        self.vote(target, path, "queue")
                elif name in sc.fallback_calls:
                    if args and args[0] and args[0][0] in ("r", "x") and len(args) >= 2:
                        self.vote(args[0], path, "job")
                elif name in sc.create_event_calls:
                    targets = self.l.field(obj, sc.target_services_fields) if obj is not None else None
                    if entity or targets is not None:
                        self.vote(type_expr, path, "event")
                        self.vote(targets, path, "stream", as_list=True)
                if name in sc.ws_send_calls and self.is_ws_receiver(receiver):
                    for a in args:
                        if a and a[0] in ("r", "x", "c", "|", "o"):
                            self.vote(a, path, "ws_event")
            for key in f.get("registry", ()):  # keyed in the job registry interface
                self.vote(key, path, "job")
            for cname, info in f.get("classes", {}).items():
                self._class_votes(path, cname, info)
            for b in f.get("bindings", ()):
                for fname in sc.post_processor_stream_fields:
                    if fname in b.get("fields", {}):
                        self.vote(b["fields"][fname], path, "stream")

    def _class_votes(self, path: str, name: str, info: dict[str, Any]) -> None:
        sc = self.sc
        fields = info.get("fields", {})
        for fname in sc.handler_type_fields:
            if fname in fields:
                self.vote(fields[fname][0], path, "job")
        for fname in sc.post_processor_stream_fields:
            if fname in fields:
                self.vote(fields[fname][0], path, "stream")
        deco = next((d for d in info.get("decorators", ()) if d[0] in sc.processor_decorators), None)
        if deco is not None and deco[1]:
            q = deco[1][0]
            if q and q[0] == "o":
                q = self.l.field(q, ["name", "queueName", "queue"])
            self.vote(q, path, "queue")
            for expr, _line in info.get("cases", ()):
                self.vote(expr, path, "job")
        for method in sc.post_processor_filter_methods:
            for expr in info.get("filters", {}).get(method, {}).get("refs", ()):
                self.vote(expr, path, "event")
        for arg in info.get("super_args", ()):
            if arg and arg[0] == "o":
                for e in arg[1]:
                    if e[0] == "k" and e[1] in sc.post_processor_stream_fields:
                        self.vote(e[2], path, "stream")

    def kind(self, decl: tuple[str, str], hint: str | None,
             _seen: frozenset[tuple[str, str]] = frozenset()) -> str | None:
        """The kind uses give ``decl`` (the name's ``hint`` breaks a tie), else the hint; for an object that only
        spreads others, the one kind of its sources (an object spreading itself, directly or in a cycle, adds
        nothing: ``_seen`` guards the walk)."""
        votes = self.votes.get(decl)
        if votes:
            best = max(votes.values())
            top = [k for k in KIND_ORDER if votes.get(k) == best]
            return hint if hint in top else top[0]
        if hint is not None:
            return hint
        info = self.l.facts.get(decl[0], {}).get("objects", {}).get(decl[1])
        if info and info[1] and all(e[0] == "..." for e in info[1]):
            kinds = set()
            for e in info[1]:
                src = self.r.resolve_decl(e[1], decl[0])
                if isinstance(src, Decl) and (src.path, src.name) not in _seen and len(_seen) < MAX_SPREAD_DEPTH:
                    kinds.add(self.kind((src.path, src.name), None, _seen | {decl}))
            if len(kinds) == 1:
                return kinds.pop()
        return None
