"""Which sibling flow each role follows: scored by verify_flow, on the domain's main queue."""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import Any

from tools.plan_flow.domain import Domain, Member, _member, _norm, _singular, domain_names
from tools.plan_flow.jobplan import JobSibling, job_siblings


def pick(sibs: list[JobSibling], ok: Callable[[JobSibling], bool]) -> JobSibling | None:
    """The sibling that passes ``ok`` and the most verify_flow checks (the latest declared on a tie)."""
    good = [s for s in sibs if ok(s)]
    return max(good, key=lambda s: (len(s.passes), -len(s.fails), s.member.line)) if good else None


def score(index: Any, sibs: list[JobSibling]) -> None:
    """Rank material: each sibling's failing check ids from the index's per-build table (``failing_checks``,
    computed once per index build and cached); :func:`refine` reads the exact statuses of the chosen one."""
    from tools.verify.model import JOB_CHECKS

    table = index.failing_checks() if hasattr(index, "failing_checks") else None
    if table is None:
        for s in sibs:
            refine(index, s)
        return
    for s in sibs:
        s.fails = set(table.get(("job", s.member.info.value), []))
        s.passes = set(JOB_CHECKS) - s.fails


def refine(index: Any, sib: JobSibling) -> None:
    """The sibling's exact statuses (``unknown`` counts as not passing), from verify_flow."""
    from tools.verify.service import _session_for

    try:
        report = _session_for(index).verify(sib.member.info.value, kind="job", value=sib.member.info.value)
    except Exception:  # a sibling that cannot be verified is only not preferred
        return
    sib.passes = {c.id for c in report.checks if c.status == "pass"}
    sib.fails = {c.id for c in report.checks if c.status != "pass"}


def resolve_queue(linked: Any, dom: Domain, queue: str) -> Member | None:
    """A declared queue named by member (of the domain), qualified name or value."""
    for m in dom.queues:
        if queue in (m.member, m.qualified, m.info.value, *m.info.aliases):
            return m
    for (k, _v), info in linked.declared.items():
        if k == "queue" and queue in (info.value, info.name, *info.aliases):
            return _member(info)
    return None


def on_queue(s: JobSibling, q: str | None) -> bool:
    return q is not None and any(q in w.queues for w in s.workers)


def main_queue(sibs: list[JobSibling], dom: Domain) -> str | None:
    """The queue most of the domain's routed jobs run on, leaving out queues only fallback jobs are sent to
    (``withFallback`` producers); without routed jobs, the queue its producers target; else the first declared."""
    kinds: dict[str, set[str]] = {}
    for sib in sibs:
        for k, q in sib.queues_by_kind:
            kinds.setdefault(q, set()).add(k)
    fallback_only = {q for q, ks in kinds.items() if ks == {"fallback"}}
    counts: dict[str, int] = {}
    for s in sibs:
        for q in s.workers[0].queues if s.workers else []:
            counts[q] = counts.get(q, 0) + 1
    if not counts:
        for q, ks in kinds.items():
            if q and ks != {"fallback"}:
                counts[q] = counts.get(q, 0) + 1
    if any(q not in fallback_only for q in counts):
        counts = {q: n for q, n in counts.items() if q not in fallback_only}
    order = {m.info.value: (m.file, m.line) for m in dom.queues}
    if not counts:
        return min(order, key=lambda q: order[q]) if order else None
    return min(counts, key=lambda q: (-counts[q], order.get(q, ("~", 0))))


def fallback_values(sibs: list[JobSibling]) -> set[str]:
    """Values of the domain's fallback jobs, by use: written by the fallback helper (``withFallback``), or
    routed only on queues that only fallback jobs are sent to."""
    kinds: dict[str, set[str]] = {}
    for sib in sibs:
        for k, q in sib.queues_by_kind:
            kinds.setdefault(q, set()).add(k)
    fallback_only = {q for q, ks in kinds.items() if q and ks == {"fallback"}}
    out = set()
    for s in sibs:
        routed = {q for w in s.workers for q in w.queues}
        if any(k == "fallback" for k, _q in s.queues_by_kind) or (routed and routed <= fallback_only):
            out.add(s.member.info.value)
    return out


def fallback_prefix(fallbacks: list[str], others: list[str]) -> str | None:
    """The shortest leading words (``FALLBACK_``) every fallback member name has and no other member has;
    None when there is none (a new job's kind is then known only from its queue)."""
    if not fallbacks:
        return None
    words = fallbacks[0].split("_")
    for k in range(1, len(words)):
        prefix = "_".join(words[:k]) + "_"
        if all(m.startswith(prefix) for m in fallbacks) and not any(m.startswith(prefix) for m in others):
            return prefix
    return None


def same_kind(sibs: list[JobSibling], fallback: bool) -> list[JobSibling]:
    """The siblings of the new job's kind (fallback beside fallbacks, any other beside the ordinary jobs); all of
    them when the domain has none of that kind."""
    fb = fallback_values(sibs)
    mine = [s for s in sibs if (s.member.info.value in fb) == fallback]
    return mine or sibs


def template_on(sibs: list[JobSibling], queue: str | None) -> JobSibling | None:
    routed = [s for s in sibs if s.handler is not None and s.workers]
    return pick(routed, lambda s: bool(s.producers) and on_queue(s, queue)) or pick(
        routed, lambda s: on_queue(s, queue)
    )


def norm_key(name: str) -> str:
    return _singular(_norm(name))


def worker_domain(index: Any, linked: Any, dom: Domain, package: str) -> tuple[str, list[JobSibling], Domain] | None:
    """The closest domain (by name likeness, then size) whose jobs a worker routes."""
    own = norm_key(dom.name)
    names = domain_names(linked, "job", package)
    ranked = sorted(
        (k for k in names if k != own),
        key=lambda k: (-difflib.SequenceMatcher(None, own, k).ratio(), -len(names[k]), k),
    )
    for key in ranked:
        other = Domain(key, "job", names[key])
        from tools.plan_flow.domain import declared, keys_of

        other.queues = [m for m in declared(linked, "queue", package) if key in keys_of(m.info)]
        sibs = job_siblings(linked, other)
        if any(s.handler is not None and s.workers for s in sibs):
            score(index, sibs)
            return key, sibs, other
    return None
