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
"""Judges one class (site, class name): returns its status and the evidence for it."""


def per_class(sites: list[Site], key: str, judge: Judge) -> tuple[list[Evidence], list[Evidence], list[Evidence]]:
    """Run ``judge`` on the class of each site; collects (fail, unknown, pass) evidence."""
    fails: list[Evidence] = []
    unknowns: list[Evidence] = []
    passes: list[Evidence] = []
    for site in sites:
        status, ev = judge(site, site_class(site, key))
        {"fail": fails, "unknown": unknowns, "pass": passes}[status].extend(ev)
    return fails, unknowns, passes
