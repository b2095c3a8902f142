"""The plan of a new job: which sibling each role follows, then the phases in dependency order.

Roles: the enum member and payload (the domain's contracts), the producer (a production
``createJob`` of the domain, on the job's queue), the handler, worker and module (a handler a
worker routes on that queue). A domain without a routed handler follows the closest domain
that has one (named in every step it shapes); a new or worker-less queue gets a worker of
its own, copied from the template worker with only the new handler.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from server import workspace_files
from server.errors import InvalidArgument, NotFound
from tools.mesh_index.linked import SiteRec
from tools.plan_flow.domain import Domain, Member, cite
from tools.plan_flow.jobplan import JobPlanner, JobSibling, job_siblings, step
from tools.plan_flow.model import FlowPlan, PlanPhase, PlanStep
from tools.plan_flow.names import MEMBER_RE, ValueConvention, value_convention
from tools.plan_flow.phases import in_repo, mark_fallback, publish_phase, repo_of, services_of, verify_phase
from tools.plan_flow.picks import main_queue, pick, refine, resolve_queue, score, template_on, worker_domain
from tools.plan_flow.queues import provide_steps, queue_value
from tools.verify.model import JOB_CHECKS


class JobFlow:
    def __init__(self, index: Any, dom: Domain, dom_used: Domain, fallback: str | None, name: str, value: str):
        self.index, self.dom, self.used, self.fallback = index, dom, dom_used, fallback
        self.ws, self.linked, self.conv = Path(index.workspace), index.linked(), index.conventions
        self.package = self.conv.messaging_package.rstrip("/") + "/"
        self.name, self.value = name, value
        self.sibs = job_siblings(self.linked, dom_used)
        score(index, self.sibs)
        self.planner = JobPlanner(self.ws, self.linked, self.conv, name, value)
        self.notes: list[str] = []
        self.not_covered: dict[str, str] = {}
        self.siblings: dict[str, str] = {}
        self.q_pairs: dict[str, str] = {}
        self.worker_fallback: str | None = None
        self.merged_name: str | None = None  # set when the plan spreads the domain's enum into the merged object

    # --- choices ------------------------------------------------------------------------
    def choose(self, queue: str | None) -> None:
        self.target_q: Member | None = None
        self.new_queue: tuple[str, str] | None = None
        if queue is not None:
            self.target_q = resolve_queue(self.linked, self.dom, queue)
            if self.target_q is None:
                if not MEMBER_RE.match(queue):
                    raise InvalidArgument(
                        f"queue '{queue}' is not a declared queue; to add one, pass its member name "
                        "in UPPER_SNAKE_CASE (e.g. CALENDAR)"
                    )
                self.new_queue = (queue, "")
        else:
            q = main_queue(self.sibs, self.used)
            self.target_q = resolve_queue(self.linked, self.used, q) if q else None
        wanted = self.target_q.info.value if self.target_q is not None else None
        self.template = template_on(self.sibs, wanted) if wanted else None
        self.own_worker = self.template is not None
        if self.template is None:
            self.template = template_on(self.sibs, main_queue(self.sibs, self.used)) or pick(
                [s for s in self.sibs if s.handler is not None and s.workers], lambda s: True
            )
        if self.template is None:
            other = worker_domain(self.index, self.linked, self.used, self.package)
            if other is None:
                raise NotFound(
                    f"no worker routes a job of domain '{self.used.name}' nor of any other domain: "
                    "there is no handler and worker shape to follow"
                )
            self.worker_fallback, o_sibs, o_dom = other
            self.template = template_on(o_sibs, main_queue(o_sibs, o_dom)) or pick(
                [s for s in o_sibs if s.handler is not None and s.workers], lambda s: True
            )
            self.notes.append(
                f"no worker routes a job of domain '{self.used.name}': the handler and worker follow "
                f"the closest domain with one, '{self.worker_fallback}'; a worker runner of the domain's "
                "own may be the better home"
            )
        t = self.template
        refine(self.index, t)
        self.worker = next((w for w in t.workers if wanted in w.queues), t.workers[0])
        # a new queue, or a queue no worker of the domain listens on, gets its own worker
        self.needs_worker = self.new_queue is not None or (wanted is not None and wanted not in self.worker.queues)
        owners = [m.owner for m in self.used.members]
        owner = t.member.owner if t.member.owner in owners else max(set(owners), key=owners.count)
        self.last = max((m for m in self.used.members if m.owner == owner), key=lambda m: (m.file, m.line))
        if t.member.owner != self.last.owner:  # a template from another domain: its enum names become ours
            self.planner.extra[t.member.owner] = self.last.owner

    # --- phases -------------------------------------------------------------------------
    def contracts(self) -> list[PlanStep]:
        out = [s for s in [self.planner.add_member(self.last)] if s is not None]
        self.siblings["member"] = f"{self.last.qualified} @ {cite(self.last)}"
        if self.fallback:
            self.notes.append(
                f"the new member is added to {self.last.owner} of domain '{self.fallback}' "
                f"({cite(self.last)}): declare a {self.dom.name} enum instead if the domain should "
                "have its own"
            )
        if self.planner.merged_or_owner(self.last) == self.last.owner and self.conv.merged_job_object:
            merged = self.planner.spread_into_merged(self.last, self.package)
            if merged:
                out.extend(merged)
                self.merged_name = self.conv.merged_job_object[0]
            else:
                self.not_covered["merged"] = (
                    f"{self.last.owner} is not spread into "
                    f"{'/'.join(self.conv.merged_job_object)} and no spread shows how to add it"
                )
        from tools.verify.service import _session_for

        registry = _session_for(self.index).registry()
        self.payload = "the payload interface"
        if registry is None:
            self.not_covered["in_registry"] = f"no {'/'.join(self.conv.job_registry)} interface in {self.package}"
        else:
            keyed = [s for s in self.sibs if registry.by_value.get(s.member.info.value)]
            r_sib = self.template if self.template in keyed else (keyed[-1] if keyed else None)
            if r_sib is None:
                out.extend(self._registry_from_other(registry))
            else:
                key = registry.by_value[r_sib.member.info.value][0]
                p_old = key.entry.payload_type
                self.payload = self.planner.payload_type(p_old, r_sib.member)
                payload = self.planner.add_payload(r_sib.member, p_old, self.payload, self.package)
                if payload is not None:
                    out.append(payload)
                out.extend(
                    self.planner.add_registry(
                        key.file, r_sib.member, key.entry.line, p_old, self.payload, payload.file if payload else None
                    )
                )
                self.siblings["registry"] = f"{r_sib.member.qualified} @ {key.file}:{key.entry.line}"
        if self.new_queue is not None:
            out.extend(self._add_queue())
        return out

    def _registry_from_other(self, registry: Any) -> list[PlanStep]:
        """No job of the domain is registered: follow the registry's last entry, payload in the domain's file."""
        from tools.plan_flow.edits import Edit, read_source, sibling_edits
        from tools.plan_flow.names import Renamer

        keys = [k for k in registry.keys if k.value and ("job", k.value) in self.linked.declared]
        info = self.linked.declared[("job", keys[-1].value)] if keys else None
        other = (
            Member(info, *info.name.split(".", 1), info.defined_at.file, info.defined_at.line)
            if info is not None and info.defined_at is not None
            else None
        )
        if other is None:
            self.not_covered["in_registry"] = (
                f"no registry entry of domain '{self.used.name}' nor a resolved one to follow"
            )
            return []
        key = keys[-1]
        p_old = key.entry.payload_type
        self.payload = self.planner.payload_type(p_old, other)
        lines = workspace_files.read_text(self.ws, self.last.file, errors="strict").splitlines()
        out = [
            step(
                "add_payload_interface",
                self.last.file,
                Edit(
                    "insert",
                    len(lines),
                    len(lines),
                    lines[-1].strip() if lines else "",
                    f"\nexport interface {self.payload} {{\n  // the fields of {self.name}\n}}",
                ),
                f"no job of domain '{self.used.name}' has a payload interface: named like {p_old} "
                f"({key.file}:{key.entry.line}), at the end of the domain's enum file",
            )
        ]
        src = read_source(self.ws / key.file)
        if src is not None and key.file != self.last.file:
            imports = [
                e
                for e in sibling_edits(src, {self.last.owner}, Renamer({self.last.owner: self.payload}))
                if "import" in e.snippet
            ]
            if imports:
                out.append(
                    step(
                        "add_import",
                        key.file,
                        imports[0],
                        f"{self.last.owner} is imported from the "
                        f"domain's file here ({key.file}:{imports[0].line}): the payload comes from there too",
                    )
                )
        out.extend(
            s
            for s in self.planner.add_registry(key.file, other, key.entry.line, p_old, self.payload, key.file)
            if s.action == "add_registry_key"
        )
        self.notes.append(
            f"no job of domain '{self.used.name}' is in the registry: the key follows its last entry "
            f"{other.qualified} ({key.file}:{key.entry.line})"
        )
        self.siblings["registry"] = f"{other.qualified} @ {key.file}:{key.entry.line} (another domain)"
        return out

    def _add_queue(self) -> list[PlanStep]:
        member = self.new_queue[0]
        q_members = self.dom.queues or self.used.queues
        if not q_members:
            raise NotFound(f"domain '{self.dom.name}' declares no queue enum to add '{member}' to")
        q_last = max(q_members, key=lambda m: m.line)
        same = [m for m in q_members if m.owner == q_last.owner]
        q_conv = value_convention([(m.member, m.info.value) for m in same])
        value = q_conv.value_for(member) if q_conv else queue_value(member, [m.info.value for m in same])
        self.new_queue = (member, value)
        s = self.planner.add_queue(q_last, member, value)
        return [s] if s is not None else []

    def queue_member(self) -> tuple[str, str] | None:
        """(owner, member) of the job's queue."""
        if self.new_queue is not None:
            owner = (self.dom.queues or self.used.queues)[0].owner
            return owner, self.new_queue[0]
        return (self.target_q.owner, self.target_q.member) if self.target_q is not None else None

    def producers(self, emitter: str | None) -> list[PlanStep]:
        wanted = self.target_q.info.value if self.target_q is not None and self.new_queue is None else None
        cands = [s for s in self.sibs if s.producers]

        def in_emitter(s: JobSibling) -> bool:
            return emitter is None or any(in_repo(p, emitter, self.index) for p in s.producers)

        p_sib = pick(
            cands,
            lambda s: in_emitter(s) and (wanted is None or any(p.detail.get("queue") == wanted for p in s.producers)),
        ) or pick(cands, in_emitter)
        if emitter is not None and p_sib is None:
            raise NotFound(
                f"no production createJob of domain '{self.used.name}' in '{emitter}': pass an emitter "
                "that writes jobs of this domain, or none"
            )
        out: list[PlanStep] = []
        if p_sib is not None:
            site = next(p for p in p_sib.producers if emitter is None or in_repo(p, emitter, self.index))
            s = self.planner.emit(p_sib, site, self._queue_pairs(site))
            if s is not None:
                out.append(s)
                self.siblings["producer"] = f"{p_sib.member.qualified} @ {cite(site)}"
        if not out:
            reason = f"no production createJob of domain '{self.used.name}' to copy"
            tests = [(s, p) for s in self.sibs for p in s.test_producers]
            if tests:
                t_sib, t_site = tests[0]
                s = self.planner.emit(t_sib, t_site, self._queue_pairs(t_site))
                if s is not None:
                    s.why = (
                        f"the domain's only createJob is test-only ({cite(t_site)}): its shape, to be written in "
                        "the production service that owns the change, not in the test code; " + s.why
                    )
                    out.append(s)
                    reason += f" (only the test-only {cite(t_site)})"
            for c in ("has_producer", "producer_uses_outbox", "queue_matches_target"):
                self.not_covered[c] = reason
        return out

    def _queue_pairs(self, site: SiteRec) -> dict[str, str]:
        q = self.queue_member()
        old = resolve_queue(self.linked, self.used, site.detail.get("queue", "")) if site.detail.get("queue") else None
        if q is None or old is None or (old.owner, old.member) == q:
            return {}
        return {old.member: q[1], **({old.owner: q[0]} if old.owner != q[0] else {})}

    def workers(self) -> list[PlanStep]:
        t, w = self.template, self.worker
        out = [s for s in [self.planner.create_handler(t, self.payload)] if s is not None]
        self.siblings["handler"] = f"{t.member.qualified} @ {cite(t.handler.site)}"
        self.siblings["worker"] = f"{w.key[1]} @ {cite(w.site)}"
        new_worker = None
        if self.needs_worker:
            q_old = resolve_queue(self.linked, self.used, w.queues[0]) if w.queues else None
            q = self.queue_member()
            made = self.planner.new_worker(t, w, q_old, q) if q is not None else None
            if made is not None:
                file, cls, text = made
                new_worker = (cls, file)
                out.append(
                    step(
                        "route_in_worker",
                        file,
                        None,
                        f"a worker for queue {q[0]}.{q[1]} (one worker per "
                        f"queue), shape of {w.key[1]} ({cite(w.site)}) with only the new handler",
                        snippet=text,
                    )
                )
        else:
            out.extend(self.planner.route(t, w))
        if "typed_errors" in t.fails:
            self.not_covered["typed_errors"] = (
                f"{w.key[1]} ({cite(w.site)}) throws a bare Error today"
                + (" and the new worker copies it" if new_worker else "")
                + ": fix it apart from this plan"
            )
        if "merged" in t.fails and t.member.owner == self.last.owner:
            self.not_covered["merged"] = f"{t.member.owner} is not spread into the merged object today"
        out.extend(provide_steps(self.index, self.planner, t, w, new_worker, self.not_covered, self.siblings))
        return out

    def plan(self, queue: str | None, emitter: str | None, conv_value: ValueConvention) -> FlowPlan:
        if self.fallback:
            self.notes.append(
                f"domain '{self.dom.name}' declares no job type: no convention to follow there, so the "
                f"plan follows the closest domain '{self.fallback}' (its files, shapes and value "
                "convention)"
            )
        self.choose(queue)
        contracts = self.contracts()
        producers = self.producers(emitter)
        workers = self.workers()
        phases = [
            PlanPhase(name="contracts", repo=self.package.rstrip("/"), steps=contracts),
            publish_phase(self.index, self.package, services_of(self.index, [*producers, *workers])),
        ]
        if producers:
            phases.append(PlanPhase(name="producers", repo=repo_of(producers), steps=producers))
        phases.append(PlanPhase(name="workers", repo=repo_of(workers), steps=workers))
        qualified = f"{self.merged_name or self.planner.merged_or_owner(self.last)}.{self.name}"
        checks = [c for c in JOB_CHECKS if c not in self.not_covered]
        phases.append(verify_phase(self.name, qualified, checks))
        if self.fallback:
            mark_fallback(phases, self.dom.name, self.fallback)
        elif self.worker_fallback:
            for s in workers:
                s.why = (
                    f"no worker routes a job of domain '{self.used.name}': follows closest domain "
                    f"'{self.worker_fallback}'; " + s.why
                )
        q = self.new_queue[1] if self.new_queue else (self.target_q.info.value if self.target_q else None)
        return FlowPlan(
            kind="job",
            name=self.name,
            qualified=qualified,
            value=self.value,
            domain=self.dom.name,
            convention=conv_value.describe(),
            queue=q,
            siblings=self.siblings,
            fallback_domain=self.fallback,
            phases=phases,
            checks=checks,
            not_covered=self.not_covered,
            notes=self.notes,
        )


def plan_job(
    index: Any,
    dom: Domain,
    dom_used: Domain,
    fallback: str | None,
    name: str,
    value: str,
    conv_value: ValueConvention,
    queue: str | None,
    emitter: str | None,
    consumer: str | None,
) -> FlowPlan:
    if consumer is not None:
        raise InvalidArgument(
            "consumer applies to events (a post-processor); for a job pass queue (its worker follows the queue)"
        )
    return JobFlow(index, dom, dom_used, fallback, name, value).plan(queue, emitter, conv_value)
