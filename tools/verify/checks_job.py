"""The checklist of a job type (stable ids in :data:`tools.verify.model.JOB_CHECKS`).

Each check reads :class:`FlowInputs` (facts the static index resolved): contracts
(declared, merged, registry), producers and queues, consumers. The checks that read the
handler's and worker's code live in :mod:`tools.verify.checks_code`. ``pass`` needs
positive evidence; a dynamic or unrecognised shape gives ``unknown``.
"""

from __future__ import annotations

from collections.abc import Callable

from tools.mesh_index.model import Site
from tools.verify.checks_code import (
    check_provided_in_module,
    check_reads_envelope,
    check_returns_original_payload,
    check_typed_errors,
)
from tools.verify.checks_common import failed as _fail
from tools.verify.checks_common import judge_producers
from tools.verify.checks_common import passed as _pass
from tools.verify.checks_common import unknown as _unknown
from tools.verify.inputs import (
    DIRECT_KINDS,
    JOB_PRODUCER_KINDS,
    OUTBOX_JOB_KINDS,
    FlowInputs,
    describe,
    evidence,
    matches_template,
    producer_note,
    site_class,
)
from tools.verify.model import Check, Evidence


def _member(inp: FlowInputs) -> str:
    """How code should spell the job: the merged object's member when it has one."""
    m = inp.match
    for name in [m.name, *m.aliases]:
        if name.split(".")[0] in inp.conv.merged_job_object:
            return name
    return m.name


# --- contracts --------------------------------------------------------------------------


def check_declared(inp: FlowInputs) -> Check:
    m = inp.match
    package = inp.conv.messaging_package.rstrip("/") + "/"
    where = "jobs" if m.kind == "job" else "events"
    hint = (
        f"Declare '{m.value}' as a member of a {m.kind}-type enum (or `as const` object) under "
        f"{package}src/{where}/<domain>/ and reference the member everywhere."
    )
    outcome = matches_template(m.value, inp.outcome_types) if m.kind == "event" else None
    if m.defined_at is None and outcome is not None:
        ev = [evidence(p, producer_note(p)) for p in inp.production(inp.event_producers())[:3]]
        return _pass("declared", f"a job-outcome type the audit trigger writes (convention '{outcome}')", ev)
    if m.defined_at is None:
        return _fail("declared", f"'{m.value}' is used in code but declared nowhere", [], hint)
    ev = [evidence(m.defined_at, f"{m.name} = '{m.value}'")]
    if not m.defined_at.file.startswith(package):
        return _fail("declared", f"{m.name} is declared outside the contracts package ({package})", ev, hint)
    return _pass("declared", f"declared as {m.name} = '{m.value}' in the contracts package", ev)


def check_merged(inp: FlowInputs) -> Check:
    m = inp.match
    objects = inp.conv.merged_job_object
    merged = [n for n in [m.name, *m.aliases] if n.split(".")[0] in objects]
    ev = [evidence(m.defined_at, f"{m.name} = '{m.value}'")] if m.defined_at else []
    if merged:
        return _pass("merged", f"reachable as {merged[0]}", ev)
    if m.defined_at is None:
        return _fail(
            "merged", f"'{m.value}' is declared nowhere, so no member of {' / '.join(objects)} carries it", [],
            "Declare it in a job-type enum that is spread into the merged object, then use that member.",
        )
    owner = m.name.split(".")[0]
    target = objects[0] if objects else "the merged job-type object"
    return _fail(
        "merged",
        f"'{m.value}' is not reachable through {target}: {owner} is not spread into it",
        ev,
        f"Spread {owner} into the merged object: `export const {target} = {{ ..., ...{owner} }} as const;`.",
    )


def check_in_registry(inp: FlowInputs) -> Check:
    m = inp.match
    registries = "/".join(inp.conv.job_registry)
    if inp.registry is None:
        return _unknown("in_registry", f"no interface named {registries} found in the contracts package", [])
    hits = inp.registry.by_value.get(m.value, [])
    if hits:
        k = hits[0]
        ev = [Evidence(file=k.file, line=k.entry.line, symbol=k.entry.registry, note=f"[{k.entry.key}]: "
                       f"{k.entry.payload_type}")]
        return _pass("in_registry", f"registered in {k.entry.registry} with payload {k.entry.payload_type}", ev)
    unresolved = inp.registry.unresolved
    if unresolved:
        ev = [Evidence(file=k.file, line=k.entry.line, symbol=k.entry.registry, note=f"key [{k.entry.key}] unresolved")
              for k in unresolved]
        return _unknown(
            "in_registry", f"{len(unresolved)} {registries} key(s) could not be resolved; one may be this job", ev,
            f"Key {registries} entries by job-type members (`[{_member(inp)}]: IPayload;`).",
        )
    first = inp.registry.keys[0] if inp.registry.keys else None
    ev = []
    if first is not None:
        ev = [Evidence(file=first.file, line=first.entry.line, symbol=first.entry.registry, note="registry")]
    merged_object = (inp.conv.merged_job_object or ["JobMessagingType"])[0]
    member = _member(inp) if m.defined_at is not None else f"{merged_object}.X"
    return _fail(
        "in_registry",
        f"no {registries} entry maps '{m.value}' to its payload interface",
        ev,
        f"Add `[{member}]: I<Name>Payload;` to the {registries} interface" + (f" in {first.file}." if first else "."),
    )


# --- producers --------------------------------------------------------------------------


def _confirmed(site: Site) -> bool:
    """False for a ``.add(TYPE)`` call the service could not confirm is made on a BullMQ queue.

    The index records any ``x.add(JobType.X, ...)`` as a possible direct push; only a receiver bound to
    ``@InjectQueue(...)`` or ``new Queue(...)`` makes it one (``confidence`` exact). An unconfirmed call
    may be a push through a receiver the reader cannot follow, or a ``Set.add``: it proves nothing either way.
    """
    return site.kind not in DIRECT_KINDS or site.confidence == "exact"


def _producers(inp: FlowInputs) -> tuple[list[Site], bool]:
    """Production producers, or the test ones when there is none (flag says which); unconfirmed pushes left out."""
    all_sites = [s for s in inp.job_producers() if _confirmed(s)]
    prod = inp.production(all_sites)
    return (prod, True) if prod else ([s for s in all_sites if s.test_only], False)


def _queues(site: Site) -> list[str]:
    """The queue(s) a producer targets or a worker listens on (the index joins alternatives with commas)."""
    return [q.strip() for q in (site.detail.get("queue") or "").split(",") if q.strip()]


def _raw(site: Site) -> str:
    return site.detail.get("raw") or site.detail.get("target_raw") or "a run-time expression"


def _shown(site: Site) -> str:
    return ", ".join(f"'{q}'" for q in _queues(site)) or _raw(site)


def check_queue_declared(inp: FlowInputs) -> Check:
    producers, _ = _producers(inp)
    uses = [(p, _queues(p), "producer target") for p in producers if p.kind in OUTBOX_JOB_KINDS | DIRECT_KINDS]
    uses += [(w, _queues(w), "worker queue") for w in inp.workers()]
    if not uses:
        return _unknown("queue_declared", "no producer target or worker queue to check", [])
    undeclared = [(s, q, role) for s, qs, role in uses for q in qs if q not in inp.declared_queues]
    if undeclared:
        ev = [evidence(s, f"{role} '{q}'") for s, q, role in undeclared]
        names = ", ".join(sorted({f"'{q}'" for _, q, _ in undeclared}))
        return _fail(
            "queue_declared", f"queue {names} is not declared in the contracts package", ev,
            f"Declare the queue as a member of a queue enum in {inp.conv.messaging_package}/src/jobs/<domain>/ "
            "and use the member instead of a string.",
        )
    dynamic = [(s, role) for s, qs, role in uses if not qs]
    if dynamic:
        site, role = dynamic[0]
        return _unknown(
            "queue_declared",
            f"the {role} at {describe(site)} is computed at run time ({_raw(site)})",
            [evidence(s, f"{r}: {_raw(s)}") for s, r in dynamic],
            "Use a queue enum member as the target so the flow can be checked statically.",
        )
    queues = sorted({q for _, qs, _ in uses for q in qs})
    ev = [evidence(inp.declared_queues[q], f"queue '{q}' declared") for q in queues]
    return _pass("queue_declared", "queue " + ", ".join(f"'{q}'" for q in queues) + " declared", ev)


def check_has_producer(inp: FlowInputs) -> Check:
    return judge_producers(
        inp.job_producers(),
        _unresolved_job_producers(inp),
        nothing="no code writes this job",
        hint="Write the job from production code: `JobsOutboxEntity.createJob({ type, target, emitter, emitterId, "
        "payload, scheduledAt })` then the outbox repository's `create(job)`, inside the service's transaction.",
        dynamic_hint="Use job-type members (JobMessagingType.X) as createJob types so producers can be checked "
        "statically.",
    )


def _unresolved_job_producers(inp: FlowInputs) -> list[Site]:
    """Production producer calls whose type the index could not resolve and that could write this job.

    A call whose target queue is known and is not a queue of the job's routing workers is left out.
    """
    worker_queues = {q for w in inp.workers() for q in _queues(w)}
    out = []
    for site in inp.unresolved:
        if site.kind not in JOB_PRODUCER_KINDS or site.test_only:
            continue
        queues = set(_queues(site))
        if queues and worker_queues and not queues & worker_queues:
            continue
        out.append(site)
    return out


def check_producer_uses_outbox(inp: FlowInputs) -> Check:
    prod = inp.production(inp.job_producers())
    if not prod:
        return _unknown("producer_uses_outbox", "no production producer to inspect", [])
    direct = [p for p in prod if p.kind in DIRECT_KINDS and _confirmed(p)]
    if direct:
        ev = [evidence(p, "pushed straight to BullMQ") for p in direct]
        return _fail(
            "producer_uses_outbox",
            f"pushed straight to BullMQ at {describe(direct[0])}: no outbox row, no audit, lost if Redis is down",
            ev,
            "Replace the queue call with `JobsOutboxEntity.createJob({...})` written by the outbox repository in "
            "the service's transaction; the outbox runner pushes it to the queue.",
        )
    outbox = [p for p in prod if p.kind in OUTBOX_JOB_KINDS]
    if len(outbox) == len(prod):
        ev = [evidence(p, f"{p.kind} (outbox)") for p in outbox]
        return _pass("producer_uses_outbox", f"every production producer writes the outbox ({len(outbox)})", ev)
    maybe_direct = [p for p in prod if p.kind in DIRECT_KINDS]
    if maybe_direct:
        p = maybe_direct[0]
        receiver = p.detail.get("receiver") or "an object"
        return _unknown(
            "producer_uses_outbox",
            f"{describe(p)} hands the job type to {receiver}.add(...), which is not provably a BullMQ queue: "
            "a direct push cannot be ruled out",
            [evidence(s, f"{s.detail.get('receiver') or '?'}.add(...): receiver not resolved") for s in maybe_direct],
            "If it is a BullMQ queue, write the job with `JobsOutboxEntity.createJob({...})` in the service's "
            "transaction instead; inject queues with @InjectQueue(<Queue member>) so pushes can be checked.",
        )
    other = [p for p in prod if p.kind not in OUTBOX_JOB_KINDS]
    return _unknown(
        "producer_uses_outbox",
        f"the producer at {describe(other[0])} is indirect ({other[0].kind}): how it is written is not visible",
        [evidence(p, p.kind) for p in other],
    )


# --- consumers --------------------------------------------------------------------------


def check_has_handler(inp: FlowInputs) -> Check:
    handlers = inp.handlers()
    if handlers:
        ev = [evidence(h, f"handler {site_class(h, 'handler_class')}") for h in handlers]
        return _pass("has_handler", f"handled by {site_class(handlers[0], 'handler_class')}", ev)
    return _fail(
        "has_handler",
        f"no handler class declares {inp.conv.handler_type_fields[0]} = {_member(inp)}",
        [],
        f"Create a handler class in the domain's worker runner implementing {inp.conv.handler_interfaces[0]} with "
        f"`readonly {inp.conv.handler_type_fields[0]} = {_member(inp)}` and a `handle(job)` method.",
    )


def check_handler_routed(inp: FlowInputs) -> Check:
    workers = inp.workers()
    if workers:
        ev = [evidence(w, f"worker {site_class(w, 'worker_class')} on {_shown(w)}") for w in workers]
        return _pass("handler_routed", f"routed by {site_class(workers[0], 'worker_class')}", ev)
    handlers = inp.handlers()
    if not handlers:
        return _fail(
            "handler_routed", "no worker routes it (and no handler exists)", [],
            "Create the handler, then register it in the worker of the job's queue.",
        )
    cls = site_class(handlers[0], "handler_class")
    return _fail(
        "handler_routed",
        f"handler {cls} ({describe(handlers[0])}) is not routed by any worker: it never runs",
        [evidence(h, "handler not routed") for h in handlers],
        f"Inject {cls} into the worker of the job's queue and add it to its handlerMap "
        f"(or a `case {_member(inp)}:` of its switch on job.name).",
    )


def check_queue_matches_target(inp: FlowInputs) -> Check:
    producers, production = _producers(inp)
    producers = [p for p in producers if p.kind in OUTBOX_JOB_KINDS | DIRECT_KINDS]
    workers = inp.workers()
    if not producers:
        return _unknown("queue_matches_target", "no producer to compare with the worker's queue", [])
    if not workers:
        ev = [evidence(p, "producer") for p in producers]
        return _unknown("queue_matches_target", "no worker routes the job", ev)
    worker_queues = {q for w in workers for q in _queues(w)}
    open_workers = [w for w in workers if not _queues(w)]
    suffix = "" if production else " (test producers only)"
    dynamic = [p for p in producers if not _queues(p)]
    disjoint = [p for p in producers if _queues(p) and not set(_queues(p)) & worker_queues]
    partial = [p for p in producers if set(_queues(p)) & worker_queues and not set(_queues(p)) <= worker_queues]
    worker_ev = [evidence(w, f"worker on {_shown(w)}") for w in workers]
    wq = ", ".join(f"'{q}'" for q in sorted(worker_queues)) or "a run-time queue"
    if disjoint and not open_workers:
        p = disjoint[0]
        return _fail(
            "queue_matches_target",
            f"pushed to {_shown(p)} ({describe(p)}) but routed only on {wq}: the job is never consumed{suffix}",
            [evidence(s, f"target {_shown(s)}") for s in disjoint] + worker_ev,
            f"Set the producer's target to the worker's queue ({wq}), or route the job in a worker on {_shown(p)}.",
        )
    if dynamic or disjoint or partial:
        site = (dynamic or disjoint or partial)[0]
        why = (
            f"the target at {describe(site)} is computed at run time ({_raw(site)})"
            if site in dynamic
            else f"the worker queue at {describe(open_workers[0])} is computed at run time ({_raw(open_workers[0])})"
            if site in disjoint
            else f"the target at {describe(site)} is one of {_shown(site)}; only {wq} has a worker routing the job"
        )
        return _unknown(
            "queue_matches_target", f"{why}: the match cannot be checked statically",
            [evidence(s, f"target {_shown(s)}") for s in dynamic + disjoint + partial] + worker_ev,
            "Use queue enum members for the producer target and the worker's @Processor queue.",
        )
    queues = ", ".join(sorted({f"'{q}'" for p in producers for q in _queues(p)}))
    return _pass(
        "queue_matches_target", f"producer target {queues} is a queue its worker listens on{suffix}",
        [evidence(p, f"target {_shown(p)}") for p in producers] + worker_ev,
    )


JOB_CHECK_FUNCTIONS: tuple[Callable[[FlowInputs], Check], ...] = (
    check_declared,
    check_merged,
    check_in_registry,
    check_queue_declared,
    check_has_producer,
    check_producer_uses_outbox,
    check_has_handler,
    check_handler_routed,
    check_queue_matches_target,
    check_returns_original_payload,
    check_reads_envelope,
    check_typed_errors,
    check_provided_in_module,
)


def run_job_checks(inp: FlowInputs) -> list[Check]:
    return [fn(inp) for fn in JOB_CHECK_FUNCTIONS]
