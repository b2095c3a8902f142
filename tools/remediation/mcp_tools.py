"""MCP adapters of tools.remediation: ``propose_remediation`` and ``apply_remediation``.

``propose_remediation`` is always listed: it only reads Redis and the databases and
writes its own plan file. ``apply_remediation`` is registered only when the server runs
with remediation enabled (``--enable-remediation``), and even then it needs an approval
token minted by a human with ``mesh-mcp approve PLAN_ID``.
"""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult
from pydantic import Field

from server.output_models import ResultModel
from server.runtime import Runtime
from server.toolkit import DESTRUCTIVE_REMOTE, PLANS_ONLY, mesh_tool, tool_result
from tools.detail import DetailArg, shaped, with_summary
from tools.remediation.symptoms import Symptom

Name = Annotated[str, Field(min_length=1, max_length=512)]
Id = Annotated[str, Field(min_length=1, max_length=256)]


def register(server: MCPServer, runtime: Runtime) -> None:
    """Register propose_remediation, and apply_remediation when remediation is enabled."""

    @server.tool(name="propose_remediation", annotations=PLANS_ONLY)
    @mesh_tool
    async def propose_remediation(
        symptom: Annotated[
            Symptom,
            Field(
                description="the repair: replay dead letters, claim a dead consumer's entries, clear a stale "
                "lock, reconcile FAILED rows replayed since, requeue rows stuck PROCESSING, retry failed BullMQ jobs"
            ),
        ],
        stream: Annotated[Name | None, Field(description="stream key (dlq_replay, claim_dead_consumer, "
                                                         "clear_stale_lock), e.g. stream:event:created")] = None,
        group: Annotated[Name | None, Field(description="consumer group (needed when the stream has several)")] = None,
        service: Annotated[Name | None, Field(description="service whose database holds the outbox tables "
                                                          "(reconcile_outbox, requeue_stuck_job; optional for "
                                                          "dlq_replay to reconcile event_queue)")] = None,
        queue: Annotated[Name | None, Field(description="BullMQ queue (retry_failed_job)")] = None,
        ids: Annotated[
            list[Id] | None,
            Field(max_length=10_000, description="restrict to these ids: DLQ entry ids or messageIds, pending "
                  "entry ids, outbox row UUIDs or BullMQ job ids; default: every match up to the plan cap"),
        ] = None,
        detail: DetailArg = "summary",
    ) -> Annotated[CallToolResult, ResultModel("tools.remediation.model:Plan")]:
        """Propose a repair plan for a symptom a runtime tool reported; changes nothing.
        Steps in the runbook's order (back up, claim, clear stale locks, replay, confirm, clean up, guarded
        SQL, BullMQ retry), each with its command, target, precondition and reversibility; plus plan_id,
        expiry, blast_radius. A human approves it out of band (`mesh-mcp approve PLAN_ID`) before
        apply_remediation can run it.
        """
        from tools.remediation.planner import Request, propose
        from tools.remediation.summary import summarise_plan

        plan = await propose(
            runtime.settings, runtime.connections, Request(symptom, stream, group, service, queue, ids)
        )
        shown = shaped(plan, detail, summarise_plan, runtime.settings.limits.summary_items)
        return tool_result(shown, plan.summary_text())

    with_summary(server, "propose_remediation", "tools.remediation.summary:PlanSummary")
    if not runtime.settings.enable_remediation:
        return

    @server.tool(name="apply_remediation", annotations=DESTRUCTIVE_REMOTE)
    @mesh_tool
    async def apply_remediation(
        plan_id: Annotated[str, Field(min_length=1, max_length=64, description="plan_id from propose_remediation")],
        approval_token: Annotated[
            str,
            Field(max_length=4096, description="the token a human printed with `mesh-mcp approve PLAN_ID`; "
                  "it approves this exact plan once and expires"),
        ],
        dry_run: Annotated[bool, Field(description="check token and preconditions, change nothing")] = False,
    ) -> Annotated[CallToolResult, ResultModel("tools.remediation.model:ApplyReport")]:
        """Apply an approved remediation plan, step by step; DESTRUCTIVE.

        Refuses a missing, altered, expired, reused or other-plan token and a plan edited after
        approval. Re-checks every precondition first and stops at the first drift without
        touching anything; backs up (and reads back) before any delete; runs SQL in a
        transaction; stops at the first failure and reports what was done. Never replays a
        message twice (a replay already in the audit log or the stream is drift). In signature
        mode, refuses while the approvers' trust file could be changed by the server's user.
        Every step goes to the audit log; the result's audit_head (COUNT:SHA256) is the log's new
        head. dry_run checks everything and changes nothing (the token stays unused).
        """
        from tools.remediation.executor import apply_plan

        report = await apply_plan(
            runtime.settings, runtime.connections, plan_id, approval_token, dry_run=dry_run
        )
        return tool_result(report, report.summary_text())
