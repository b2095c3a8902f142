"""The steps of a new event type: contracts, the publish stop, the emitter, the consumers' filters."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from server.errors import NotFound
from tools.plan_flow.copying import package_imports, producer_copy
from tools.plan_flow.domain import Domain, cite, production
from tools.plan_flow.edits import Edit, find_identifiers, read_source, sibling_edits
from tools.plan_flow.jobplan import JobPlanner, JobSibling, step
from tools.plan_flow.model import FlowPlan, PlanPhase, PlanStep
from tools.plan_flow.names import ValueConvention, camel
from tools.verify.model import EVENT_CHECKS


def plan_event(
    index: Any,
    dom: Domain,
    dom_used: Domain,
    fallback: str | None,
    name: str,
    value: str,
    conv_value: ValueConvention,
    emitter: str | None,
    consumer: str | None,
) -> FlowPlan:
    from tools.plan_flow.phases import in_repo as _in_repo
    from tools.plan_flow.phases import publish_phase as _publish
    from tools.plan_flow.phases import repo_of as _repo
    from tools.plan_flow.phases import services_of as _services
    from tools.plan_flow.phases import verify_phase as _verify_phase

    ws, linked, conv = Path(index.workspace), index.linked(), index.conventions
    package = conv.messaging_package.rstrip("/") + "/"
    planner = JobPlanner(ws, linked, conv, name, value)
    notes, not_covered, siblings = [], {}, {}
    if fallback:
        notes.append(f"domain '{dom.name}' declares no event type: following the closest domain '{fallback}'")
    sibs = []
    for m in dom_used.members:
        prods = [
            p
            for p in production(linked.producers.get(("event", m.info.value)))
            if p.kind == "create_event" and p.confidence == "exact"
        ]
        if emitter is not None:
            prods = [p for p in prods if _in_repo(p, emitter, index)]
        pps = [
            pp
            for pp in linked.post_processors.values()
            if pp.started
            and not pp.site.test_only
            and pp.accepts.get(m.info.value)
            and (consumer is None or consumer in (pp.key[1], pp.site.repo))
        ]
        sibs.append((m, prods, pps))
    if emitter is not None and not any(p for _m, p, _pp in sibs):
        raise NotFound(f"no production createEvent of domain '{dom_used.name}' in '{emitter}'")
    best = max(sibs, key=lambda t: (bool(t[1]), bool(t[2]), t[0].line))
    member, prods, pps = best
    last = max((m for m in dom_used.members if m.owner == member.owner), key=lambda m: m.line)
    contracts = [s for s in [planner.add_member(last)] if s is not None]
    siblings["member"] = f"{last.qualified} @ {cite(last)}"
    phases = [PlanPhase(name="contracts", repo=package.rstrip("/"), steps=contracts)]
    sib = JobSibling(member, prods, None, [])
    producer_steps: list[PlanStep] = []
    if prods:
        site = prods[0]
        src = read_source(ws / site.file)
        if src is not None:
            rename = planner.renamer(sib, src.text, None, package_imports(src))
            copied = producer_copy(src, site.line, camel(name), rename, set())
            if copied is not None:
                text, method, old = copied
                end = method.end_point[0] + 1
                producer_steps.append(
                    step(
                        "emit",
                        site.file,
                        Edit("insert", end, end, src.lines[end - 1].strip(), "\n" + text),
                        f"copy of {site.symbol or old} ({cite(site)}): createEvent in the "
                        f"transaction, same target services as {member.qualified}",
                    )
                )
                siblings["producer"] = f"{member.qualified} @ {cite(site)}"
    if not producer_steps:
        for c in ("has_producer", "producer_in_transaction"):
            not_covered[c] = f"no production createEvent of domain '{dom_used.name}' to copy"
    consumer_steps: list[PlanStep] = []
    for pp in pps:
        src = read_source(ws / pp.key[0])
        if src is None:
            continue
        rename = planner.renamer(sib, "", None)
        idents = find_identifiers(src, {member.member})
        if not idents:
            continue
        for e in sibling_edits(src, {member.member}, rename):
            consumer_steps.append(
                step(
                    "consume",
                    pp.key[0],
                    e,
                    f"{pp.key[1]} ({cite(pp.site)}) accepts {member.qualified} here: let {name} through the same way",
                )
            )
        siblings.setdefault("consumer", f"{pp.key[1]} @ {cite(pp.site)}")
    if not pps:
        for c in ("stream_has_consumer", "consumer_accepts_type"):
            not_covered[c] = f"no post-processor accepts an event of domain '{dom_used.name}' by type"
    publish = _publish(index, package, _services(index, [*producer_steps, *consumer_steps]))
    phases.append(publish)
    if producer_steps:
        phases.append(PlanPhase(name="producers", repo=_repo(producer_steps), steps=producer_steps))
    if consumer_steps:
        phases.append(PlanPhase(name="consumers", repo=_repo(consumer_steps), steps=consumer_steps))
    checks = [c for c in EVENT_CHECKS if c not in not_covered]
    qualified = f"{member.owner}.{name}"
    phases.append(_verify_phase(name, qualified, checks))
    if fallback:
        from tools.plan_flow.phases import mark_fallback

        mark_fallback(phases, dom.name, fallback)
    return FlowPlan(
        kind="event",
        name=name,
        qualified=qualified,
        value=value,
        domain=dom.name,
        convention=conv_value.describe(),
        siblings=siblings,
        fallback_domain=fallback,
        phases=phases,
        checks=checks,
        not_covered=not_covered,
        notes=notes,
    )
