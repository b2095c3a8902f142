"""Constructors of check results shared by the job and event checklists."""

from __future__ import annotations

from collections.abc import Callable

from tools.mesh_index.model import Site
from tools.verify.inputs import site_class
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
