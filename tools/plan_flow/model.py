"""Result model of plan_flow: ordered phases of steps, the publish stop, the checks that will pass."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

ACTIONS = (
    "add_member",
    "add_payload_interface",
    "add_registry_key",
    "add_import",
    "add_queue",
    "create_handler",
    "route_in_worker",
    "provide_in_module",
    "emit",
    "consume",
    "add_migration_trigger",
    "publish_contracts",
    "bump_dependency",
    "verify",
)
Mode = Literal["insert", "replace", "create", "run"]


class PlanStep(BaseModel):
    action: str = Field(description="one of " + ", ".join(ACTIONS))
    file: str | None = Field(
        default=None,
        description="file to edit or create, relative to the workspace (None for commands run at the workspace root)",
    )
    mode: Mode = Field(
        description="insert: add snippet after line; replace: snippet replaces line..end_line; "
        "create: new file with snippet; run: commands to run"
    )
    line: int | None = Field(default=None, description="1-based anchor line in the file as it is now")
    end_line: int | None = Field(default=None, description="last line replaced (replace mode)")
    anchor: str | None = Field(default=None, description="the anchor line's text (or symbol) to find it by")
    snippet: str = Field(description="code in the workspace's own style, or the commands to run")
    why: str = Field(description="one line, citing the sibling followed (file:line)")


class PlanPhase(BaseModel):
    name: str = Field(description="contracts | publish | producers | workers | consumers | verify")
    repo: str | None = Field(default=None, description="repository or package the phase edits")
    stop: bool = Field(default=False, description="a hard stop: nothing after it before it is done")
    steps: list[PlanStep]


class FlowPlan(BaseModel):
    kind: Literal["job", "event"]
    name: str = Field(description="the new member name")
    qualified: str = Field(description="how code names it, e.g. JobMessagingType.SYNC_CALENDAR")
    value: str = Field(description="its string value, following the domain's convention")
    domain: str
    convention: str = Field(description="the value convention read from the domain's enum")
    queue: str | None = Field(default=None, description="the queue (job): existing or new")
    siblings: dict[str, str] = Field(
        default_factory=dict, description="role -> sibling followed (qualified name @ file:line)"
    )
    fallback_domain: str | None = Field(
        default=None, description="domain followed when the requested one shows no sibling"
    )
    phases: list[PlanPhase]
    checks: list[str] = Field(description="verify_flow check ids that pass once the plan is applied")
    not_covered: dict[str, str] = Field(
        default_factory=dict, description="check id -> why the plan cannot make it pass"
    )
    notes: list[str] = Field(default_factory=list)
    read_only: bool = Field(default=True, description="plan_flow writes no file")

    def summary_text(self) -> str:
        from tools.plan_flow.render import plan_text

        return plan_text(self)
