"""The follow-ups of analyze_impact: what a job, an event or a mapping entry leads to, to ``depth``.

A job leads to what its handler emits (and the classes it names that write, such as an
injected writer: heuristic), what the worker routing it emits (its own class and base
classes) and the outcome events the audit trigger writes for the job's emitter; an event to
what the started post-processors accepting it emit; any key to the entries of the mapping
tables from it (job -> event -> websocket message). A value a consumer computes through a
mapping table is followed only for the job that started the chain.

:class:`FollowUpWalker` is a mixin of :class:`tools.mesh_index.impact.ImpactEngine`: it reads the
engine's ``idx``, ``switch_workers``, ``tables_read`` and ``event_consumers``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from tools.mesh_index.linked import Key, SiteRec, WorkerRec
from tools.mesh_index.model import FollowUp

if TYPE_CHECKING:
    from tools.mesh_index.linked import LinkedIndex, PostProcessorRec


class FollowUpWalker:
    """Breadth-first walk of what a key leads to (mixed into the impact engine)."""

    idx: LinkedIndex
    switch_workers: dict[str, list[WorkerRec]]
    tables_read: set[str]

    def event_consumers(self, key: Key) -> list[tuple[PostProcessorRec, str]]:  # defined by ImpactEngine
        raise NotImplementedError

    def _step(self, key: Key, origin_job: str | None, include_tests: bool) -> Iterable[tuple[Key, str, str, SiteRec]]:
        idx = self.idx
        kind, value = key
        if kind == "job":
            for w in self._workers_of(value):  # what the routing worker writes (getEventForJob(job.name), ...)
                for owner in (w.key, *idx.collaborators.get(w.key, ())):
                    for k, site in idx.class_producers.get(owner, ()):
                        if k == key or (site.detail.get("via") and not self._maps(site.detail["via"], value, k[1])):
                            continue
                        via = f"worker {w.key[1]}" + (f" via {owner[1]}" if owner != w.key else "")
                        yield k, via, "heuristic", site
            for h in idx.handlers_by_job.get(value, ()):
                for k, site in idx.class_producers.get(h.key, ()):
                    if k != key:
                        yield k, f"handler {h.key[1]}", site.confidence, site
                for other in idx.collaborators.get(h.key, ()):  # this.writer.write(...): what the writer produces
                    allowed = idx.collaborator_values.get((h.key, other))
                    for k, site in idx.class_producers.get(other, ()):
                        if k != key and (allowed is None or k[1] in allowed):
                            yield k, f"handler {h.key[1]} via {other[1]}", "heuristic", site
            emitters = {_emitter_of(s, idx.emitters) for s in idx.producers.get(key, ())
                        if include_tests or not s.test_only}
            for o in idx.outcomes:
                if o.emitter is None or o.emitter in emitters:
                    status = f" on status {o.status}" if o.status else ""
                    conf = "heuristic" if o.heuristic else "exact"
                    yield ("event", o.value), f"audit trigger {o.site.symbol}{status}", conf, o.site
        if kind == "event":
            for pp, _conf in self.event_consumers(key):
                if not pp.started:
                    continue  # nothing runs it
                for owner in (pp.key, *idx.collaborators.get(pp.key, ())):
                    allowed = idx.collaborator_values.get((pp.key, owner))
                    for k, site in idx.class_producers.get(owner, ()):
                        if allowed is not None and k[1] not in allowed:
                            continue
                        via_table = site.detail.get("via")
                        if via_table and not self._follows(via_table, key, origin_job, k[1]):
                            continue
                        via = f"post-processor {pp.key[1]}" + (f" via {owner[1]}" if owner != pp.key else "")
                        yield k, via, "heuristic", site
        for rec, to_key, line, heuristic in idx.mapping_from.get(key, ()):
            if rec.name in self.tables_read:
                continue  # followed through the code that reads the table and writes (above)
            conf = "heuristic" if heuristic else "exact"
            site = SiteRec(rec.site.repo, rec.site.file, line, rec.name, "mapping", conf, rec.site.test_only,
                           to_key[1], {"via": rec.name})
            yield to_key, f"mapping {rec.name}", site.confidence, site

    def _workers_of(self, job: str) -> list[WorkerRec]:
        """Workers routing ``job`` (through a handler or a ``switch`` case)."""
        keys = {w for h in self.idx.handlers_by_job.get(job, ()) for w in h.routed_by}
        keys |= {w.key for w in self.switch_workers.get(job, ())}
        return [self.idx.workers[k] for k in sorted(keys)]

    def _maps(self, table: str, job: str, value: str) -> bool:
        return self._maps_key(table, ("job", job), value)

    def _maps_key(self, table: str, key: Key, value: str) -> bool:
        return any(rec.name == table and to_key[1] == value
                   for rec, to_key, _l, _h in self.idx.mapping_from.get(key, ()))

    def _follows(self, table: str, key: Key, origin_job: str | None, value: str) -> bool:
        """Whether a value a consumer of ``key`` reads from ``table`` follows in this chain: the table's entry for
        ``key`` itself (an event -> websocket table), else for the job that started the chain (job -> event)."""
        if any(rec.name == table for rec, _t, _l, _h in self.idx.mapping_from.get(key, ())):
            return self._maps_key(table, key, value)
        if origin_job is not None:
            return self._maps(table, origin_job, value)
        return True

    def followups(self, starts: list[Key], depth: int, include_tests: bool) -> list[FollowUp]:
        out: list[FollowUp] = []
        seen = set(starts)
        frontier = [(k, 1, k[1] if k[0] == "job" else None) for k in starts]
        emitted: set[tuple] = set()
        while frontier:
            key, d, origin = frontier.pop(0)
            if d > depth:
                continue
            for to_key, via, conf, site in self._step(key, origin, include_tests):
                if site.test_only and not include_tests:
                    continue
                ident = (key, to_key, via, site.file, site.line)
                if ident in emitted:
                    continue
                emitted.add(ident)
                info = self.idx.declared.get(to_key)
                out.append(FollowUp(depth=d, from_kind=key[0], from_value=key[1], kind=to_key[0], value=to_key[1],
                                    name=info.name if info else None, via=via, confidence=conf,  # type: ignore[arg-type]
                                    site=site.with_value(to_key[1]).model()))
                if to_key not in seen:
                    seen.add(to_key)
                    frontier.append((to_key, d + 1, origin if to_key[0] != "job" else to_key[1]))
        return out


def _emitter_of(site: SiteRec, known: list[str]) -> str | None:
    """The emitter a producer writes; when not resolved, its repository's name if that is a known emitter."""
    if site.detail.get("emitter"):
        return site.detail["emitter"]
    repo = site.repo.rsplit("/", 1)[-1]
    return repo if repo in known else None
