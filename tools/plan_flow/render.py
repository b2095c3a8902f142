"""The text of a plan: every phase, file, anchor, action and the stop, for humans and models."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the model calls this renderer (summary_text): types only here
    from tools.plan_flow.model import FlowPlan


def plan_text(plan: FlowPlan, snippets: bool = False) -> str:
    lines = [
        f"plan for new {plan.kind} {plan.qualified} = '{plan.value}' (domain {plan.domain}; "
        f"{plan.convention})" + (f", queue {plan.queue}" if plan.queue else "")
    ]
    if plan.fallback_domain:
        lines.append(f"no sibling flow in domain '{plan.domain}': following domain '{plan.fallback_domain}'")
    for role, sib in plan.siblings.items():
        lines.append(f"sibling ({role}): {sib}")
    n = 0
    for phase in plan.phases:
        head = f"== {phase.name}" + (f" ({phase.repo})" if phase.repo else "")
        lines.append(head + (" -- STOP: do not continue before this is done" if phase.stop else ""))
        for step in phase.steps:
            n += 1
            where = step.file or "(workspace root)"
            if step.line is not None:
                where += f":{step.line}"
            anchor = f" after `{step.anchor}`" if step.mode == "insert" and step.anchor else ""
            if step.mode == "replace" and step.anchor:
                anchor = f" replacing `{step.anchor}`"
            lines.append(f"{n}. {step.action} [{step.mode}] {where}{anchor}")
            lines.append(f"   why: {step.why}")
            if snippets or step.mode == "run":
                lines.extend("   | " + s for s in step.snippet.splitlines())
    lines.append("checks that will pass: " + ", ".join(plan.checks))
    for check, why in plan.not_covered.items():
        lines.append(f"not covered: {check}: {why}")
    lines.extend(f"note: {n}" for n in plan.notes)
    lines.append("read-only: nothing was written; the snippets are in the structured content")
    return "\n".join(lines)
