"""A job-to-event lookup in a post-processor, read for the jobs whose outcomes reach it.

The common success post-processor writes ``getEventForJob(payload.after.job_type)``: the event the
job-to-event table maps the finished job to. The index first reads such a write as "every value of
the table"; this step narrows it to what the stream justifies: the post-processor receives the
outcome events written to the streams it reads (:meth:`ExtraProducers.inputs`), each outcome event
is written by the audit trigger for the jobs of one emitter (:class:`OutcomeRec`), so the jobs are
those whose producers' emitter has an outcome it receives, and the values are the table's entries
for those jobs. A value no such job maps to is not a producer: it becomes a *candidate* with the
reason (it is what the table says, not what reaches this code). Run once post-processors are
known and before websocket sends are linked (their inputs are the events these writes produce).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tools.mesh_index.linked import Key, PostProcessorRec, SiteRec

if TYPE_CHECKING:
    from tools.mesh_index.sites import Linker

MAX_LISTED = 8


def emitter_of(site: SiteRec, known: list[str]) -> str | None:
    """The emitter a producer writes; when not resolved, its repository's name if that is a known emitter."""
    if site.detail.get("emitter"):
        return site.detail["emitter"]
    repo = site.repo.rsplit("/", 1)[-1]
    return repo if repo in known else None


def _jobs_reaching(linker: Linker, pp: PostProcessorRec, guessed: bool = False) -> list[str]:
    """Jobs whose outcome events ``pp`` receives: by the outcomes the audit trigger's SQL writes, or with
    ``guessed``, by the outcome names only guessed (``OutcomeRec.names_guessed``: from [conventions], the audit
    trigger not being found)."""
    idx = linker.idx
    inputs = set(linker.extra.inputs(pp))
    emitters = {o.emitter for o in idx.outcomes if o.value in inputs and o.names_guessed == guessed}
    if not emitters:
        return []
    out = []
    for (kind, job), sites in idx.producers.items():
        if kind != "job":
            continue
        if None in emitters or any(emitter_of(s, idx.emitters) in emitters for s in sites if not s.test_only):
            out.append(job)
    return sorted(out)


def _guess_reason(linker: Linker, pp: PostProcessorRec) -> str:
    inputs = set(linker.extra.inputs(pp))
    why = next((o.site.detail.get("reason", "") for o in linker.idx.outcomes if o.names_guessed and o.value in inputs
                and o.site.detail.get("reason")), "")
    return why or "the audit trigger's outcome events for these jobs are only guessed"


def _allowed(linker: Linker, jobs: list[str], table: str) -> set[str]:
    return {t[1] for j in jobs for rec, t, _l, _h in linker.idx.mapping_from.get(("job", j), ()) if rec.name == table}


def narrow_job_tables(linker: Linker) -> None:
    idx = linker.idx
    job_tables = {rec.name for rec in idx.mappings if any(f[0] == "job" for f, _t, _l, _h in rec.entries)}
    if not job_tables:
        return
    reaching: dict[tuple[str, str], list[str]] = {}
    moved: list[tuple[Key, SiteRec]] = []
    for key, sites in idx.producers.items():
        keep: list[SiteRec] = []
        for s in sites:
            table = s.detail.get("via")
            pp = idx.post_processors.get((s.file, (s.symbol or "").split(".")[0]))
            if not table or table not in job_tables or pp is None or s.detail.get("inputs"):
                keep.append(s)
                continue
            if pp.key not in reaching:
                reaching[pp.key] = _jobs_reaching(linker, pp)
            jobs = reaching[pp.key]
            if s.value in _allowed(linker, jobs, table):
                mapped = sorted(j for j in jobs if any(rec.name == table and t[1] == s.value
                                                       for rec, t, _l, _h in idx.mapping_from.get(("job", j), ())))
                s.detail["inputs"] = (f"the jobs whose outcome events {pp.key[1]} receives: "
                                      + ", ".join(mapped[:MAX_LISTED]) + (" …" if len(mapped) > MAX_LISTED else ""))
                keep.append(s)
                continue
            guessed = _jobs_reaching(linker, pp, guessed=True)
            if s.value in _allowed(linker, guessed, table):  # reaches it only through outcome names guessed
                s.detail["reason"] = (f"{table} maps it from a job whose outcome events reach {pp.key[1]} only by a "
                                      f"guess ({_guess_reason(linker, pp)}): a candidate")
                moved.append((key, s))
                continue
            s.detail["reason"] = (
                f"{table} maps it from a job whose outcome events never reach {pp.key[1]} (it receives the outcomes "
                f"of {len(jobs)} job type(s))" if jobs else
                f"a lookup in {table} keyed by the finished job, but no job's outcome event is known to reach "
                f"{pp.key[1]} (a stream unknown on one side): any value of the table, a candidate")
            moved.append((key, s))
        sites[:] = keep
    for key, s in moved:
        idx.add_candidate(key, s)
        owner = (s.file, (s.symbol or "").split(".")[0])
        if owner in idx.class_producers:
            idx.class_producers[owner] = [(k, x) for k, x in idx.class_producers[owner] if x is not s]
    for key in {k for k, _s in moved}:  # a stream only a moved site wrote to is no longer a route of the type
        if not idx.producers.get(key):
            idx.producers.pop(key, None)
        streams = {st.strip() for x in idx.producers.get(key, ()) for st in x.detail.get("stream", "").split(",")}
        routes = idx.routes_out.get(key, {})
        for route in [r for r in routes if r[0] == "stream" and r[1] not in streams]:
            del routes[route]
