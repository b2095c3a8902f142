"""Constructors of check results shared by the job and event checklists."""

from __future__ import annotations

from collections.abc import Callable

from tools.mesh_index.model import Site
from tools.verify.inputs import describe, evidence, is_seen_producer, producer_note, site_class
from tools.verify.model import Check, Evidence


def passed(check_id: str, detail: str, ev: list[Evidence]) -> Check:
    return Check(id=check_id, status="pass", detail=detail, evidence=ev)


def failed(check_id: str, detail: str, ev: list[Evidence], hint: str) -> Check:
    return Check(id=check_id, status="fail", detail=detail, evidence=ev, hint=hint)


def unknown(check_id: str, detail: str, ev: list[Evidence], hint: str | None = None) -> Check:
    return Check(id=check_id, status="unknown", detail=detail, evidence=ev, hint=hint)


Judge = Callable[[Site, str], tuple[str, list[Evidence]]]
"""Judges one class (site, class name): returns its status (fail|unknown|pass) and the evidence for it."""


def judge_classes(
    check_id: str,
    sites: list[Site],
    key: str,
    judge: Judge,
    *,
    fail_detail: Callable[[Evidence], str],
    hint: str,
    unknown_detail: str,
    pass_detail: str,
) -> Check:
    """Run ``judge`` on the class of each site (``detail[key]`` or the symbol), then settle the check.

    One failing class fails it (``fail_detail`` of the first failing evidence, every failing
    evidence listed); else one class that cannot be judged makes it unknown
    (``unknown_detail: <first note>``); else it passes with every class's evidence.
    """
    found: dict[str, list[Evidence]] = {"fail": [], "unknown": [], "pass": []}
    for site in sites:
        status, ev = judge(site, site_class(site, key))
        found[status].extend(ev)
    if found["fail"]:
        return failed(check_id, fail_detail(found["fail"][0]), found["fail"], hint)
    if found["unknown"]:
        return unknown(check_id, f"{unknown_detail}: {found['unknown'][0].note}", found["unknown"])
    return passed(check_id, pass_detail, found["pass"])


def judge_producers(sites: list[Site], maybe: list[Site], *, nothing: str, hint: str, dynamic_hint: str) -> Check:
    """``has_producer`` from the type's producer sites and the unresolved producer calls that may write it.

    Passes on a production producer accepted as evidence (:func:`~tools.verify.inputs.is_seen_producer`);
    unknown when the production producers are all guesses, or when there is none but ``maybe`` (calls
    whose type is computed at run time) is not empty; fails otherwise, naming test-only producers
    (``nothing`` is the detail when there is none at all).
    """
    prod = [s for s in sites if not s.test_only]
    seen = [p for p in prod if is_seen_producer(p)]
    if seen:
        ev = [evidence(p, producer_note(p)) for p in seen]
        return passed("has_producer", f"{len(seen)} production producer(s), first at {describe(seen[0])}", ev)
    if prod:
        ev = [evidence(p, producer_note(p)) for p in prod]
        return unknown("has_producer", "only heuristic producers were found (the type is built at run time)", ev)
    tests = [p for p in sites if p.test_only]
    found = f"only test code produces it ({describe(tests[0])})" if tests else nothing
    ev = [evidence(p, f"test-only {p.kind} producer") for p in tests]
    if maybe:
        ev += [evidence(u, f"{u.kind} with a run-time type: {u.detail.get('raw', '?')}") for u in maybe]
        return unknown(
            "has_producer",
            f"{found}, but {len(maybe)} producer call(s) compute their type at run time "
            f"(first at {describe(maybe[0])}); one may write it",
            ev,
            dynamic_hint,
        )
    return failed("has_producer", found, ev, hint)
