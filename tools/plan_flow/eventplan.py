"""The steps of a new event type: contracts, the publish stop, the emitter, the consumers' filters.

The sibling is the domain's event that passes the most ``verify_flow`` checks and has a
production producer: a ``createEvent`` (its method is copied, renamed) or a SQL trigger
in a migration (``add_migration_trigger``: a new migration copied from it). Consumers are
the post-processors that accept the sibling by type; the new type is added to their filter
next to it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tree_sitter import Node

from server import workspace_files
from server.errors import NotFound
from tools.mesh_index.linked import PostProcessorRec, SiteRec
from tools.plan_flow.copying import package_imports, producer_copy
from tools.plan_flow.domain import Domain, Member, cite, production
from tools.plan_flow.edits import STATEMENTS, Edit, Source, comparison_edits, read_source, sibling_edits
from tools.plan_flow.jobplan import JobPlanner, JobSibling, step
from tools.plan_flow.model import FlowPlan, PlanPhase, PlanStep
from tools.plan_flow.names import ValueConvention, camel
from tools.plan_flow.phases import in_repo, mark_fallback, publish_phase, repo_of, services_of, verify_phase
from tools.verify.model import EVENT_CHECKS

PRODUCER_KINDS = ("create_event", "sql_trigger")


@dataclass
class EventSibling:
    member: Member
    producers: list[SiteRec]
    consumers: list[PostProcessorRec]
    status: dict[str, str] = field(default_factory=dict)
    details: dict[str, str] = field(default_factory=dict)


def _siblings(index: Any, dom: Domain, emitter: str | None, consumer: str | None) -> list[EventSibling]:
    from tools.verify.service import _session_for

    linked, session = index.linked(), _session_for(index)
    out = []
    for m in dom.members:
        prods = [
            p
            for p in production(linked.producers.get(("event", m.info.value)))
            if p.kind in PRODUCER_KINDS and (p.confidence == "exact" or p.kind == "sql_trigger")
        ]
        if emitter is not None:
            prods = [p for p in prods if in_repo(p, emitter, index)]
        pps = [
            pp
            for pp in linked.post_processors.values()
            if pp.started
            and not pp.site.test_only
            and (consumer is None or consumer in (pp.key[1], pp.site.repo, index.package_dir_of(pp.key[0])))
            and (pp.accepts.get(m.info.value) or pp.accept_all or pp.accepts_value(m.info.value))
        ]
        sib = EventSibling(m, prods, pps)
        try:
            report = session.verify(m.info.value, kind="event", value=m.info.value)
            sib.status = {c.id: c.status for c in report.checks}
            sib.details = {c.id: c.detail for c in report.checks}
        except Exception:
            pass
        out.append(sib)
    return out


def _migration_copy(ws: Path, site: SiteRec, rename: Any) -> tuple[str, str] | None:
    """(new file, text) of a migration copied from the one holding ``site``, with the next timestamp."""
    path = ws / site.file
    try:
        text = workspace_files.read_text(ws, site.file, errors="strict")
    except (OSError, UnicodeDecodeError):
        return None
    stamp = re.match(r"(\d{10,})", path.name)
    if stamp is None:
        return None
    old = stamp.group(1)
    stamps = [int(m.group(1)) for p in path.parent.iterdir() if (m := re.match(r"(\d{10,})", p.name))]
    new = str(max(stamps) + 1).zfill(len(old))
    body = rename(text).replace(old, new)
    name = rename(path.name.replace(old, new))
    return f"{site.file.rsplit('/', 1)[0]}/{name}", body


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
    ws, linked, conv = Path(index.workspace), index.linked(), index.conventions
    package = conv.messaging_package.rstrip("/") + "/"
    planner = JobPlanner(ws, linked, conv, name, value)
    notes: list[str] = []
    not_covered: dict[str, str] = {}
    siblings: dict[str, str] = {}
    if fallback:
        notes.append(f"domain '{dom.name}' declares no event type: following the closest domain '{fallback}'")
    sibs = _siblings(index, dom_used, emitter, consumer)
    if emitter is not None and not any(s.producers for s in sibs):
        raise NotFound(f"no production createEvent or SQL trigger of domain '{dom_used.name}' in '{emitter}'")
    best = max(
        sibs,
        key=lambda s: (
            bool(s.producers),
            any(p.kind == "create_event" for p in s.producers),
            bool(s.consumers),
            sum(v == "pass" for v in s.status.values()),
            s.member.line,
        ),
    )
    member = best.member
    owners = [m.owner for m in dom_used.members if m.file == member.file]
    last = (
        max((m for m in dom_used.members if m.owner == member.owner and m.file == member.file), key=lambda m: m.line)
        if owners
        else member
    )
    contracts = [s for s in [planner.add_member(last)] if s is not None]
    siblings["member"] = f"{last.qualified} @ {cite(last)}"
    sib = JobSibling(member, best.producers, None, [])
    producer_steps: list[PlanStep] = []
    site = next((p for p in best.producers if p.kind == "create_event"), None) or next(iter(best.producers), None)
    if site is not None and site.kind == "create_event":
        src = read_source(ws / site.file)
        missing: list[str] = []
        copied = (
            producer_copy(
                src, site.line, camel(name), planner.renamer(sib, src.text, None, package_imports(src)), missing
            )
            if src is not None
            else None
        )
        if copied is not None:
            text, method, old = copied
            end = method.end_point[0] + 1
            producer_steps.append(
                step(
                    "emit",
                    site.file,
                    Edit("insert", end, end, src.lines[end - 1].strip(), "\n" + text),
                    f"copy of {site.symbol or old} ({cite(site)}): createEvent in the same "
                    f"transaction and target services as {member.qualified}; set its payload"
                    + (
                        f" (it reads {', '.join(missing)} from the sibling's own code: supply the new event's)"
                        if missing
                        else ""
                    ),
                )
            )
    elif site is not None:
        try:
            mig_text = workspace_files.read_text(ws, site.file, errors="strict")
        except (OSError, UnicodeDecodeError):
            mig_text = ""
        made = _migration_copy(ws, site, planner.renamer(sib, mig_text + "\n" + site.file, None))
        if made is not None:
            file, text = made
            for c in ("stream_has_consumer", "consumer_accepts_type"):
                not_covered[c] = (
                    "the new trigger's target streams are computed by the SQL function from the type: "
                    "run `mesh-mcp verify` once it is written to see which stream it reaches"
                )
            producer_steps.append(
                step(
                    "add_migration_trigger",
                    file,
                    None,
                    f"{member.qualified} is written by a SQL trigger ({cite(site)}): a new "
                    "migration copied from it, next timestamp; set the table and condition",
                    snippet=text,
                )
            )
    if producer_steps:
        siblings["producer"] = f"{member.qualified} @ {cite(site)}"
    else:
        for c in ("has_producer", "producer_in_transaction"):
            not_covered[c] = f"no production createEvent or SQL trigger of domain '{dom_used.name}' to copy"
    consumer_steps: list[PlanStep] = []
    for pp in best.consumers:
        if pp.accept_all:
            notes.append(f"{pp.key[1]} ({cite(pp.site)}) has no type filter: it receives {name} as it is")
            continue
        if pp.accepts_value(value):
            notes.append(f"{pp.key[1]} ({cite(pp.site)}) accepts '{value}' by pattern already")
            continue
        src = read_source(ws / pp.key[0])
        owners = {n.split(".")[0] for n in [member.qualified, *member.info.aliases]}

        def through_owner(ident: Node, src: Source | None = src, owners: set[str] = owners) -> bool:
            parent = ident.parent
            obj = (
                parent.child_by_field_name("object")
                if parent is not None and parent.type == "member_expression"
                else None
            )
            return obj is not None and src.node_text(obj).split(".")[-1] in owners

        rename = planner.renamer(sib, "", None)
        edits = []
        if src is not None:
            edits = sibling_edits(
                src, {member.member}, rename, accept=through_owner, skip=lambda elem: elem.type in STATEMENTS
            )
            edits += comparison_edits(src, {member.member}, rename, accept=through_owner)
        if not edits:
            not_covered["consumer_accepts_type"] = (
                f"{pp.key[1]} ({cite(pp.site)}) accepts {member.qualified} in a way the plan cannot extend "
                f"({pp.binding or 'its filter'}): add {name} to its filter by hand"
            )
        for e in edits:
            consumer_steps.append(
                step(
                    "consume",
                    pp.key[0],
                    e,
                    f"{pp.key[1]} ({cite(pp.site)}) accepts {member.qualified} here: let {name} through the same way",
                )
            )
        if edits:
            siblings.setdefault("consumer", f"{pp.key[1]} @ {cite(pp.site)}")
    if not best.consumers:
        for c in ("stream_has_consumer", "consumer_accepts_type"):
            not_covered[c] = f"no post-processor accepts {member.qualified}: no consumer shape to follow"
    for check in EVENT_CHECKS:
        if check not in not_covered and best.status.get(check, "pass") != "pass":
            not_covered[check] = (
                f"{best.status[check]} for the sibling {member.qualified} today: {best.details.get(check, '')}"
            )
    phases = [
        PlanPhase(name="contracts", repo=package.rstrip("/"), steps=contracts),
        publish_phase(index, package, services_of(index, [*producer_steps, *consumer_steps])),
    ]
    if producer_steps:
        phases.append(PlanPhase(name="producers", repo=repo_of(producer_steps), steps=producer_steps))
    if consumer_steps:
        phases.append(PlanPhase(name="consumers", repo=repo_of(consumer_steps), steps=consumer_steps))
    checks = [c for c in EVENT_CHECKS if c not in not_covered]
    qualified = f"{last.owner}.{name}"
    phases.append(verify_phase(name, qualified, checks))
    if fallback:
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
