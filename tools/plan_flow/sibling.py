"""A sibling job flow as the index resolves it, and the plan step built from an edit."""

from __future__ import annotations

from dataclasses import dataclass, field

from tools.mesh_index.linked import HandlerRec, LinkedIndex, SiteRec, WorkerRec
from tools.plan_flow.domain import Domain, Member, production
from tools.plan_flow.edits import Edit
from tools.plan_flow.model import PlanStep


@dataclass
class JobSibling:
    member: Member
    producers: list[SiteRec]
    handler: HandlerRec | None
    workers: list[WorkerRec]
    passes: set[str] = field(default_factory=set)
    fails: set[str] = field(default_factory=set)
    test_producers: list[SiteRec] = field(default_factory=list)
    queues_by_kind: list[tuple[str, str]] = field(default_factory=list)  # (producer kind, queue) of every producer


def step(
    action: str, file: str | None, edit: Edit | None, why: str, snippet: str | None = None, mode: str | None = None
) -> PlanStep:
    if edit is None:
        return PlanStep(action=action, file=file, mode=mode or "create", snippet=snippet or "", why=why)
    return PlanStep(
        action=action,
        file=file,
        mode=edit.mode,
        line=edit.line,
        end_line=edit.end_line if edit.mode == "replace" else None,
        anchor=edit.anchor,
        snippet=edit.snippet,
        why=why,
    )


def job_siblings(linked: LinkedIndex, domain: Domain) -> list[JobSibling]:
    out = []
    for m in domain.members:
        value = m.info.value
        handlers = [h for h in linked.handlers.values() if value in h.jobs and not h.site.test_only]
        handler = next((h for h in handlers if h.routed_by), handlers[0] if handlers else None)
        workers = [linked.workers[k] for k in (handler.routed_by if handler else []) if k in linked.workers]
        every = linked.producers.get(("job", value)) or []
        producers = [p for p in production(every) if p.kind == "create_job" and p.confidence == "exact"]
        sib = JobSibling(m, producers, handler, workers)
        sib.test_producers = [p for p in every if p.test_only and p.kind == "create_job" and p.confidence == "exact"]
        sib.queues_by_kind = [(p.kind, p.detail.get("queue", "")) for p in production(every)]
        out.append(sib)
    return out
