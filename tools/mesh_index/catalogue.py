"""list_catalogue: every job, event, websocket type, queue and stream with counts and orphan reasons.

Orphan reasons (each entry may have several):

- any undeclared job/event value equal to a declared member's name: ``not declared: 'X' is the
  member name of Enum.X (value 'x'), not a value``;
- job: ``no producer`` / ``only test producers (N)``, ``no handler``, ``handler <C> not routed
  by any worker``, ``producers target queue A but its worker listens on B``;
- event: ``no producer``, ``no consumer (no post-processor accepts it)`` or ``no consumer (post-processor
  X accepts it but nothing starts it)`` (no production file imports or constructs X);
- ws_event: ``no producer (no code sends it)``;
- queue: ``no worker listens``, ``no producer targets it``;
- stream: ``no consumer group (no post-processor reads it)``, ``nothing writes to it``.
"""

from __future__ import annotations

from tools.mesh_index.impact import ImpactEngine, _key_order, _split, member_name_hint
from tools.mesh_index.linked import Key
from tools.mesh_index.model import Catalogue, CatalogueEntry, IndexInfo


def _reasons(engine: ImpactEngine, key: Key, prod: int, test_prod: int, cons: int) -> list[str]:
    idx = engine.idx
    kind, value = key
    reasons: list[str] = []
    hint = member_name_hint(idx, key)
    if hint:
        reasons.append(f"not declared: '{value}' is {hint}")
    if kind in ("job", "event", "ws_event") and prod == 0:
        if test_prod:
            reasons.append(f"only test producers ({test_prod})")
        else:
            guessed = [c for c in engine.candidates(key) if c.kind != "post_processor" and not c.test_only]
            if guessed:
                reasons.append(f"no producer resolved ({len(guessed)} candidate(s) whose value is not resolved: "
                               f"{', '.join(sorted({c.symbol or c.file for c in guessed})[:3])})")
            else:
                reasons.append("no producer (no code sends it)" if kind == "ws_event" else "no producer")
    if kind == "job":
        handlers = idx.handlers_by_job.get(value, [])
        switch = engine.switch_workers.get(value, [])
        if not handlers and not switch:
            reasons.append("no handler")
        for h in handlers:
            if not h.routed_by:
                reasons.append(f"handler {h.key[1]} not routed by any worker")
        produced = {q for s in idx.producers.get(key, ()) if not s.test_only for q in _split(s.detail.get("queue"))}
        listening = {q for h in handlers for w in h.routed_by for q in idx.workers[w].queues}
        listening |= {q for w in switch for q in w.queues}
        if produced and listening and not produced & listening:
            reasons.append(f"producers target queue {', '.join(sorted(produced))} but its worker listens on "
                           f"{', '.join(sorted(listening))}")
    elif kind == "event" and cons == 0:
        idle = sorted({pp.key[1] for pp, _c in engine.event_consumers(key) if not pp.started})
        maybe = sorted({c.symbol or c.file for c in engine.candidates(key) if c.kind == "post_processor"})
        if idle:
            reasons.append(f"no consumer (post-processor {', '.join(idle)} accepts it but nothing starts it)")
        elif maybe:
            reasons.append(f"no consumer resolved (candidate(s) {', '.join(maybe[:3])}: the filter accepts it, "
                           "a stream is unknown)")
        else:
            reasons.append("no consumer (no post-processor accepts it)")
    elif kind == "queue":
        if cons == 0:
            reasons.append("no worker listens")
        if prod == 0:
            reasons.append(f"only test producers target it ({test_prod})" if test_prod else "no producer targets it")
    elif kind == "stream":
        if cons == 0:
            idle = sorted({pp.key[1] for pp in engine.stream_consumers.get(value, ()) if not pp.started})
            reasons.append(f"no consumer group (post-processor {', '.join(idle)} reads it but nothing starts it)"
                           if idle else "no consumer group (no post-processor reads it)")
        if prod == 0:
            reasons.append("nothing writes to it")
    return reasons


def build_catalogue(engine: ImpactEngine, info: IndexInfo, kind: str | None = None,
                    orphans_only: bool = False) -> Catalogue:
    entries: list[CatalogueEntry] = []
    idx = engine.idx
    for key in sorted(engine.known, key=_key_order):
        if kind is not None and key[0] != kind:
            continue
        declared = idx.declared.get(key)
        if declared is not None and declared.test_only:
            continue
        sites = engine.producers(key)
        prod = sum(1 for s in sites if not s.test_only)
        test_prod = len(sites) - prod
        cons = sum(1 for c in engine.consumers(key)
                   if not c.test_only and c.detail.get("started") != "no"
                   and (key[0] != "job" or c.kind != "worker" or c.detail.get("route") == "switch"))
        if declared is None and prod == 0 and cons == 0:
            continue  # a value only test code mentions (a spec's own job type): not part of the system
        reasons = _reasons(engine, key, prod, test_prod, cons)
        if orphans_only and not reasons:
            continue
        entries.append(CatalogueEntry(
            kind=key[0], name=declared.name if declared else key[1], value=key[1],  # type: ignore[arg-type]
            producers=prod, consumers=cons, orphan=bool(reasons), reasons=reasons, test_producers=test_prod,
            defined_at=declared.defined_at.model() if declared and declared.defined_at else None,
        ))
    counts: dict[str, int] = {}
    for e in entries:
        counts[e.kind] = counts.get(e.kind, 0) + 1
    return Catalogue(entries=entries, counts=counts, orphans=sum(1 for e in entries if e.orphan), index=info)
