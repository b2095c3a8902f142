"""The ``detail="summary"`` shape of propose_remediation (:mod:`tools.detail`).

The plan's id, digest, expiry, summary, inputs, blast radius, approval command and each step's
number, action, description, target, where it runs and reversibility; the exact commands, bound parameters,
apply-time checks and operations are left out (``detail="full"``, or the plan file the human
approves, which is always complete).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel

from tools.detail import Cutter, SummaryBase
from tools.remediation.model import BlastRadius, Plan, Symptom


class StepBrief(BaseModel):
    number: int
    action: str
    description: str
    target: str
    runs_on: str = ""
    reversible: bool


class PlanSummary(SummaryBase):
    """propose_remediation, detail="summary"."""

    plan_id: str
    symptom: Symptom
    expires_at: str
    inputs: dict[str, Any]
    summary: str
    steps: list[StepBrief]
    blast_radius: BlastRadius
    candidates_found: int
    truncated: bool
    warnings: list[str]
    notes: list[str]
    approval_mode: Literal["local", "signature"]
    approve_command: str
    redis_instance: str
    plan_sha256: str


def summarise_plan(plan: Plan, items: int) -> PlanSummary:
    cut = Cutter(items)
    steps = cut.first("steps", plan.steps, max(items, 12))
    cut.drop("step_commands", len(steps))
    return PlanSummary(
        plan_id=plan.plan_id, symptom=plan.symptom, expires_at=plan.expires_at, inputs=plan.inputs,
        summary=plan.summary,
        steps=[StepBrief(number=s.number, action=s.action, description=cut.text("step_description_chars",
                                                                               s.description) or "",
                         target=s.target, runs_on=s.runs_on, reversible=s.reversible) for s in steps],
        blast_radius=plan.blast_radius, candidates_found=plan.candidates_found, truncated=plan.truncated,
        warnings=cut.first("warnings", plan.warnings), notes=cut.first("notes", plan.notes),
        approval_mode=plan.approval_mode, approve_command=plan.approve_command, redis_instance=plan.redis_instance,
        plan_sha256=plan.plan_sha256, related_skills=cut.related(getattr(plan, "related_skills", None)),
        omitted=cut.omitted(),
    )
