"""The job checks that read the handler's and the worker's code, and the worker's Nest modules.

``returns_original_payload`` and ``reads_envelope`` re-read each handler's ``handle``;
``typed_errors`` the routing worker class; ``provided_in_module`` the ``@Module``
providers of the package holding the handler and the worker (see :mod:`tools.verify.facts`
and :mod:`tools.verify.modules`).
"""

from __future__ import annotations

from tools.mesh_index.model import Site
from tools.verify.checks_common import failed as _fail
from tools.verify.checks_common import judge_classes
from tools.verify.checks_common import passed as _pass
from tools.verify.checks_common import unknown as _unknown
from tools.verify.facts import bare_throws, handler_facts
from tools.verify.inputs import FlowInputs, at, evidence, site_class
from tools.verify.model import Check, Evidence


def check_returns_original_payload(inp: FlowInputs) -> Check:
    handlers = inp.handlers()
    key = inp.conv.original_payload_key
    payload = f"job.{inp.conv.job_data_field}.{inp.conv.job_payload_field}"
    if not handlers:
        return _unknown("returns_original_payload", "no handler to inspect", [])

    def judge(site: Site, cls: str) -> tuple[str, list[Evidence]]:
        pf = inp.parse(site.file)
        facts = handler_facts(pf, cls, inp.conv) if pf else None
        if facts is None or not facts.found:
            return "unknown", [evidence(site, f"{cls}: no handle method in this file")]
        if not facts.returns:
            line = facts.method_line or site.line
            return "unknown", [at(site, line, f"{cls}.handle never returns (it always throws)")]
        bad = [r for r in facts.returns if r.kind in ("nothing", "missing_key", "wrong_value")]
        if bad:
            words = {"nothing": "returns nothing", "missing_key": f"returns no {key}", "wrong_value": "wrong value"}
            return "fail", [at(site, r.line, f"{cls}.handle {words[r.kind]}: {r.text}") for r in bad]
        opaque = [r for r in facts.returns if r.kind == "opaque"]
        if opaque:
            return "unknown", [at(site, r.line, f"{cls}.handle returns {r.text}") for r in opaque]
        return "pass", [at(site, r.line, r.text) for r in facts.returns]

    return judge_classes(
        "returns_original_payload", handlers, "handler_class", judge,
        fail_detail=lambda first: f"{first.note} ({first.file}:{first.line})",
        hint=f"End handle() with `return {{ {key}: {payload} }};` so BaseWorker can write the audit row.",
        unknown_detail="cannot tell what is returned",
        pass_detail=f"every return of handle() gives {{ {key}: {payload} }}",
    )


def check_reads_envelope(inp: FlowInputs) -> Check:
    handlers = inp.handlers()
    payload = f"job.{inp.conv.job_data_field}.{inp.conv.job_payload_field}"
    if not handlers:
        return _unknown("reads_envelope", "no handler to inspect", [])

    def judge(site: Site, cls: str) -> tuple[str, list[Evidence]]:
        pf = inp.parse(site.file)
        facts = handler_facts(pf, cls, inp.conv) if pf else None
        if facts is None or not facts.found:
            return "unknown", [evidence(site, f"{cls}: no handle method in this file")]
        if facts.envelope_reads:
            return "fail", [at(site, r.line, f"{cls} reads {r.text}") for r in facts.envelope_reads]
        if facts.envelope_passed:
            passed = facts.envelope_passed
            return "unknown", [at(site, r.line, f"{cls} hands the job on: {r.text}") for r in passed]
        return "pass", [at(site, facts.method_line or site.line, f"{cls}.handle reads only the envelope's payload")]

    return judge_classes(
        "reads_envelope", handlers, "handler_class", judge,
        fail_detail=lambda first: (
            f"{first.note} ({first.file}:{first.line}): the job data is an envelope, the field is undefined"
        ),
        hint=f"Read the job's fields from {payload} (e.g. `const {{ x }} = {payload};`).",
        unknown_detail="cannot inspect",
        pass_detail=f"handler reads its data from {payload}",
    )


def check_typed_errors(inp: FlowInputs) -> Check:
    workers = inp.workers()
    if not workers:
        return _unknown("typed_errors", "no routing worker to inspect", [])
    bare = "/".join(inp.conv.bare_error_classes)

    def judge(site: Site, cls: str) -> tuple[str, list[Evidence]]:
        pf = inp.parse(site.file)
        throws = bare_throws(pf, cls, inp.conv) if pf else None
        if throws is None:
            return "unknown", [evidence(site, f"class {cls} not found in this file")]
        if throws:
            return "fail", [at(site, t.line, f"{cls}: {t.text}") for t in throws]
        return "pass", [evidence(site, f"{cls} throws no bare {bare}")]

    return judge_classes(
        "typed_errors", workers, "worker_class", judge,
        fail_detail=lambda first: f"bare `throw new {bare}` in the routing worker ({first.file}:{first.line})",
        hint="Throw a typed error with a code (e.g. InternalServerError from the errors package) instead of "
        f"`new {bare}(...)`.",
        unknown_detail="cannot inspect",
        pass_detail=f"the routing worker throws no bare {bare}",
    )


def check_provided_in_module(inp: FlowInputs) -> Check:
    classes = [(h, site_class(h, "handler_class")) for h in inp.handlers()]
    classes += [(w, site_class(w, "worker_class")) for w in inp.workers()]
    if not classes or inp.modules is None:
        return _unknown("provided_in_module", "no handler or worker to look for", [])
    fails: list[Evidence] = []
    unknowns: list[Evidence] = []
    passes: list[Evidence] = []
    missing: list[tuple[str, str]] = []
    unique = {(site.file, cls): (site, cls) for site, cls in classes}
    for site, cls in unique.values():
        package = inp.package_dir(site.file)
        modules = inp.modules.modules_in(package)
        hit = next(((rel, m) for rel, m in modules if cls in m.providers), None)
        if hit:
            rel, module = hit
            passes.append(Evidence(file=rel, line=module.providers[cls], symbol=module.name, note=f"provides {cls}"))
        elif not modules:
            unknowns.append(evidence(site, f"no @Module found in {package or 'the workspace'}"))
        elif any(m.unresolved for _, m in modules):
            rel, module = next((r, m) for r, m in modules if m.unresolved)
            text, line = module.unresolved[0]
            unknowns.append(Evidence(file=rel, line=line, symbol=module.name, note=f"providers entry {text}"))
        else:
            rel, module = modules[0]
            fails.append(evidence(site, f"{cls} is not a provider"))
            fails.append(Evidence(file=rel, line=module.line, symbol=module.name, note=f"{module.name} providers"))
            missing.append((cls, f"{module.name} ({rel})"))
    if fails:
        cls, where = missing[0]
        return _fail(
            "provided_in_module",
            f"{cls} is not a provider of any module of its package: Nest cannot instantiate it",
            fails,
            f"Add {cls} to the providers of {where}.",
        )
    if unknowns:
        return _unknown("provided_in_module", f"cannot tell: {unknowns[0].note}", unknowns)
    return _pass("provided_in_module", "handler and worker are providers of their app module", passes)
