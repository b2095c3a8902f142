"""Result models of verify_flow: one check per rule of the implementation checklist.

A check is ``pass`` only on positive evidence, ``fail`` when the code shows the rule
broken, and ``unknown`` when the code cannot tell (a dynamic expression, a shape the
reader does not recognise): a verification never guesses a pass.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from tools.skills.model import RelatedSkill

CheckStatus = Literal["pass", "fail", "unknown"]

JOB_CHECKS: tuple[str, ...] = (
    "declared",
    "merged",
    "in_registry",
    "queue_declared",
    "has_producer",
    "producer_uses_outbox",
    "has_handler",
    "handler_routed",
    "queue_matches_target",
    "returns_original_payload",
    "reads_envelope",
    "typed_errors",
    "provided_in_module",
)
"""Stable ids of the checks of a job type, in report order."""

EVENT_CHECKS: tuple[str, ...] = (
    "declared",
    "has_producer",
    "producer_in_transaction",
    "stream_has_consumer",
    "consumer_accepts_type",
)
"""Stable ids of the checks of an event type, in report order."""


class Evidence(BaseModel):
    """A place in the workspace that supports a check's status."""

    repo: str | None = Field(default=None, description="repository folder the file belongs to")
    file: str = Field(description="path relative to the workspace")
    line: int = Field(ge=0, description="1-based line (0 when the whole file is meant)")
    symbol: str | None = Field(default=None, description="enclosing class or function")
    note: str = Field(description="what is at this place")


class Check(BaseModel):
    id: str = Field(description="stable check id, e.g. returns_original_payload")
    status: CheckStatus
    detail: str = Field(description="what was seen, one sentence")
    evidence: list[Evidence] = Field(default_factory=list)
    hint: str | None = Field(default=None, description="the fix in one sentence (absent when the check passes)")


class ResolvedTarget(BaseModel):
    kind: Literal["job", "event"]
    name: str = Field(description="qualified member name, e.g. JobMessagingType.GEOCODE_EVENT")
    value: str = Field(description="the string value carried at run time")
    defined_at: Evidence | None = None
    aliases: list[str] = Field(default_factory=list, description="other member names with the same value")


class Summary(BaseModel):
    passed: int = 0
    failed: int = 0
    unknown: int = 0
    total: int = 0
    verdict: Literal["ok", "incomplete", "broken"] = Field(
        default="ok", description="broken: a check fails; incomplete: none fails but some are unknown"
    )

    @classmethod
    def of(cls, checks: list[Check]) -> Summary:
        passed = sum(c.status == "pass" for c in checks)
        failed = sum(c.status == "fail" for c in checks)
        unknown = sum(c.status == "unknown" for c in checks)
        verdict = "broken" if failed else ("incomplete" if unknown else "ok")
        return cls(passed=passed, failed=failed, unknown=unknown, total=len(checks), verdict=verdict)


class FlowReport(BaseModel):
    """The checklist of one job or event type."""

    target: ResolvedTarget
    checks: list[Check]
    summary: Summary
    failing: list[str] = Field(default_factory=list, description="ids of the failing checks")
    related_skills: list[RelatedSkill] = Field(
        default_factory=list, description="runbooks (workspace and bundled) about this flow: URI and why"
    )
    related_skills_more: int = Field(default=0, description="related skills found beyond related_skills (capped)")

    @classmethod
    def build(cls, target: ResolvedTarget, checks: list[Check]) -> FlowReport:
        return cls(
            target=target,
            checks=checks,
            summary=Summary.of(checks),
            failing=[c.id for c in checks if c.status == "fail"],
        )

    def check(self, check_id: str) -> Check | None:
        return next((c for c in self.checks if c.id == check_id), None)

    def summary_text(self) -> str:
        """A few lines for humans and models: the verdict, then each check that did not pass."""
        s = self.summary
        head = (
            f"{self.target.kind} {self.target.name} = '{self.target.value}': {s.verdict} "
            f"({s.passed} pass, {s.failed} fail, {s.unknown} unknown of {s.total})"
        )
        lines = [head]
        for check in self.checks:
            if check.status == "pass":
                continue
            where = ""
            if check.evidence:
                ev = check.evidence[0]
                where = f" [{ev.file}:{ev.line}]"
            lines.append(f"- {check.status.upper()} {check.id}: {check.detail}{where}")
            if check.hint:
                lines.append(f"  fix: {check.hint}")
        return "\n".join(lines)


class VerifyAllReport(BaseModel):
    """Every job and event type of the workspace, verified."""

    flows: list[FlowReport]
    failed_flows: int = Field(description="flows with at least one failing check")
    unknown_flows: int = Field(description="flows with no failing check but some unknown")

    @classmethod
    def build(cls, flows: list[FlowReport]) -> VerifyAllReport:
        return cls(
            flows=flows,
            failed_flows=sum(f.summary.failed > 0 for f in flows),
            unknown_flows=sum(f.summary.failed == 0 and f.summary.unknown > 0 for f in flows),
        )
