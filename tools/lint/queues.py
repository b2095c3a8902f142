"""worker-queue-not-registered and registered-queue-unread: BullMQ queues a module registers vs. its workers.

A module's queues are the ``name`` of every object passed to ``BullModule.registerQueue(...)``
(``[conventions.lint] register_queue_calls``) inside its ``@Module`` decorator, resolved to
string values through the index's declarations (``Queue.MEMBER``, import aliases) or read as
literals; a module with any registration it cannot resolve is not judged. A worker's module
is the module (in the worker's package) whose ``providers`` list the worker class.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tree_sitter import Node

from tools.lint.context import LintContext, ev
from tools.lint.model import Evidence, Finding
from tools.verify.modules import module_providers
from tools.verify.tsparse import (
    FUNCTION_NODES,
    ParsedFile,
    call_arguments,
    callee_name,
    line_of,
    local_imports,
    object_pairs,
    unwrap,
    walk,
)


@dataclass
class Registration:
    file: str
    module: str
    line: int
    queues: dict[str, int] = field(default_factory=dict)  # value -> line
    unresolved: list[str] = field(default_factory=list)
    providers: set[str] = field(default_factory=set)


def _value(ctx: LintContext, pf: ParsedFile, node: Node | None, imports: dict[str, str]) -> str | None:
    node = unwrap(node)
    if node is None:
        return None
    if node.type == "string":
        return pf.text(node)[1:-1]
    if node.type == "member_expression":
        obj = pf.text(node.child_by_field_name("object"))
        prop = pf.text(node.child_by_field_name("property"))
        key = ctx.resolve_qual(f"{imports.get(obj, obj)}.{prop}")
        return key[1] if key and key[0] == "queue" else None
    return None


def _collect(ctx: LintContext, pf: ParsedFile, node: Node | None, reg: Registration, imports: dict[str, str]) -> None:
    node = unwrap(node)
    if node is None:
        return
    if node.type == "array":
        for child in node.named_children:
            _collect(ctx, pf, child, reg, imports)
    elif node.type == "object":
        pairs = object_pairs(pf, node)
        name = next((pairs[f] for f in ctx.lint.queue_name_fields if f in pairs), None)
        value = _value(ctx, pf, name, imports)
        if value is None:
            reg.unresolved.append(pf.text(node)[:80])
        else:
            reg.queues.setdefault(value, line_of(node))
    elif node.type != "comment":
        reg.unresolved.append(pf.text(node)[:80])


def registrations(ctx: LintContext) -> list[Registration]:
    calls = ctx.lint.register_queue_calls
    out: list[Registration] = []
    for rel in ctx.files_containing(*(f"{c}(" for c in calls)):
        pf = ctx.parse(rel)
        if pf is None:
            continue
        imports = local_imports(pf)
        providers = {m.line: set(m.providers) for m in module_providers(pf, ctx.static)}
        for deco in walk(pf.root, skip=FUNCTION_NODES):
            if deco.type != "decorator":
                continue
            call = unwrap(next(iter(deco.named_children), None))
            if call is None or call.type != "call_expression" \
                    or callee_name(pf, call) not in ctx.static.module_decorators:
                continue
            reg = Registration(file=rel, module="", line=line_of(deco), providers=providers.get(line_of(deco), set()))
            holder = deco.parent
            for node in [holder, *(holder.named_children if holder else [])]:
                if node is not None and node.type in ("class_declaration", "abstract_class_declaration"):
                    reg.module = pf.text(node.child_by_field_name("name"))
                    break
            found = False
            for inner in walk(call):
                if inner.type == "call_expression" and callee_name(pf, inner) in calls:
                    found = True
                    for arg in call_arguments(inner):
                        _collect(ctx, pf, arg, reg, imports)
            if found:
                out.append(reg)
    return out


def check(ctx: LintContext) -> list[Finding]:
    regs = registrations(ctx)
    findings: list[Finding] = []
    by_package: dict[str, list[Registration]] = {}
    for reg in regs:
        by_package.setdefault(ctx.package_of(reg.file), []).append(reg)
    worker_packages: set[str] = set()
    for worker in sorted(ctx.idx.workers.values(), key=lambda w: w.key):
        if worker.site.test_only:
            continue
        package = ctx.package_of(worker.site.file)
        worker_packages.add(package)
        cls = worker.key[1]
        mine = [r for r in by_package.get(package, []) if cls in r.providers]
        if not mine or not worker.queues:
            continue
        registered_in_package = {q for r in by_package.get(package, []) for q in r.queues}
        for reg in mine:
            if reg.unresolved or not reg.queues:
                continue
            missing = [q for q in worker.queues if q not in reg.queues and q not in registered_in_package]
            if not missing:
                continue
            listed = ", ".join(f"'{q}'" for q in sorted(reg.queues))
            evidence = [ev(worker.site, f"@{ctx.static.processor_decorators[0]}: worker {cls} listens on "
                                        f"{', '.join(missing)}"),
                        Evidence(file=reg.file, line=reg.line, note=f"module {reg.module} provides {cls}"),
                        *(Evidence(file=reg.file, line=line, note=f"registers '{q}'")
                          for q, line in sorted(reg.queues.items()))]
            findings.append(Finding(
                code="worker-queue-not-registered", severity="error", file=worker.site.file, line=worker.site.line,
                message=f"worker {cls} listens on queue {', '.join(missing)}, which its module {reg.module} never "
                        f"registers (it registers {listed})",
                fix=f"register {', '.join(missing)} in {reg.module} (or point {cls} at one of {listed})",
                evidence=evidence, subject=f"worker:{cls}",
            ))
    for package in sorted(worker_packages):
        for reg in by_package.get(package, []):
            for queue, line in sorted(reg.queues.items()):
                if ctx.idx.workers_by_queue.get(queue):
                    continue
                findings.append(Finding(
                    code="registered-queue-unread", severity="warning", file=reg.file, line=line,
                    message=f"module {reg.module} registers queue '{queue}' but no worker of the workspace "
                            "listens on it: jobs pushed there wait forever",
                    fix=f"add a worker for '{queue}' or remove the registration",
                    evidence=[Evidence(file=reg.file, line=line, note=f"registerQueue '{queue}'"),
                              Evidence(file=reg.file, line=reg.line,
                                       note=f"module {reg.module}, in a package with workers")],
                    subject=f"queue:{queue}",
                ))
    return findings
