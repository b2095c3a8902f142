"""Queue values for a new queue member, and the module steps that provide a new handler (and worker)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tools.plan_flow.model import PlanStep
from tools.plan_flow.names import kebab

SEPARATORS = "-_.:"


def queue_value(member: str, values: list[str]) -> str:
    """A queue value when no member spells its own: the common prefix and suffix of the enum's values."""
    if not values:
        return kebab(member)
    if len(values) == 1:
        v = values[0]
        cut = max(v.rfind(c) for c in SEPARATORS)
        return kebab(member) + (v[cut:] if cut > 0 else "")
    first, last = min(values), max(values)
    pre = ""
    for a, b in zip(first, last, strict=False):
        if a != b:
            break
        pre += a
    pre = pre[: max(pre.rfind(c) for c in SEPARATORS) + 1] if any(c in pre for c in SEPARATORS) else ""
    suf = ""
    for chars in zip(*[v[::-1] for v in values], strict=False):
        if len(set(chars)) != 1:
            break
        suf += chars[0]
    suf = suf[::-1]
    suf = suf[min((suf.find(c) for c in SEPARATORS if c in suf), default=len(suf)) :]
    return pre + kebab(member) + suf


def _stem(path: str) -> str:
    return path.rsplit("/", 1)[-1].rsplit(".", 1)[0]


def provide_steps(
    index: Any,
    planner: Any,
    template: Any,
    worker: Any,
    new_worker: tuple[str, str] | None,
    not_covered: dict[str, str],
    siblings: dict[str, str],
) -> list[PlanStep]:
    """Steps adding the new handler (and a new worker) to the ``@Module`` that provides the sibling's."""
    from tools.verify.modules import ModuleScanner

    pkg = index.package_dir_of(worker.key[0])
    old_cls, new_cls = planner.handler_names(template)
    out: list[PlanStep] = []
    for file, module in ModuleScanner(Path(index.workspace), index.conventions).modules_in(pkg):
        if old_cls not in module.providers:
            continue
        extra = {_stem(template.handler.key[0]): _stem(planner.new_handler_file(template))}
        out.extend(planner.provide(template, file, module.providers[old_cls], old_cls, new_cls, extra, old_cls))
        siblings["module"] = f"{module.name} @ {file}:{module.line}"
        if new_worker is not None and worker.key[1] in module.providers:
            cls, w_file = new_worker
            out.extend(
                planner.provide(
                    template,
                    file,
                    module.providers[worker.key[1]],
                    worker.key[1],
                    cls,
                    {_stem(worker.key[0]): _stem(w_file)},
                    worker.key[1],
                )
            )
        break
    if not out:
        out = _listed_elsewhere(index, planner, template, worker, pkg)
        if out:
            not_covered["provided_in_module"] = (
                f"no @Module of {pkg} names {old_cls} itself: it is listed in {out[0].file}, which verify_flow "
                "cannot follow into the module's providers"
            )
            return out
        not_covered["provided_in_module"] = (
            f"no @Module of {pkg or 'the worker package'} provides {old_cls}: the workspace shows no provider to follow"
        )
    elif new_worker is not None and not any(new_worker[0] in s.snippet for s in out):
        not_covered["provided_in_module"] = (
            f"the module does not provide {worker.key[1]}: add {new_worker[0]} where the workers are provided"
        )
    return out


def _listed_elsewhere(index: Any, planner: Any, template: Any, worker: Any, pkg: str) -> list[PlanStep]:
    """The sibling handler listed in a file of the worker package other than its own and its worker's
    (a ``HANDLERS`` array a module spreads from another file): the same edits there."""
    from tools.plan_flow.edits import read_source, sibling_edits
    from tools.verify.tsparse import marked_files

    old_cls, new_cls = planner.handler_names(template)
    skip = {template.handler.key[0], worker.key[0]}
    ws = Path(index.workspace)
    for pf in marked_files(ws / pkg, index.conventions.skip_dirs, [old_cls.encode()], 5000):
        rel = pf.path.relative_to(ws).as_posix()
        if rel in skip:
            continue
        src = read_source(pf.path)
        if src is None:
            continue
        extra = {_stem(template.handler.key[0]): _stem(planner.new_handler_file(template)), old_cls: new_cls}
        rename = planner.renamer(template, src.text, extra)
        edits = sibling_edits(src, {old_cls}, rename)
        if edits:
            why = f"{old_cls} is listed here ({rel}:{edits[-1].line}) for the module's providers"
            return [
                PlanStep(
                    action="provide_in_module",
                    file=rel,
                    mode=e.mode,
                    line=e.line,
                    end_line=e.end_line if e.mode == "replace" else None,
                    anchor=e.anchor,
                    snippet=e.snippet,
                    why=why,
                )
                for e in edits
            ]
    return []
