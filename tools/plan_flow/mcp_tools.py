"""MCP adapter of plan_flow: one read-only tool that reads only the workspace (it writes no file)."""

from __future__ import annotations

from typing import Annotated, Literal

import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult
from pydantic import Field

from server.output_models import ResultModel
from server.runtime import Runtime
from server.toolkit import READ_ONLY_LOCAL, mesh_tool, tool_result
from tools.mesh_index.mcp_tools import refresh_with_progress
from tools.mesh_index.service import get_index_service


def register(server: MCPServer, runtime: Runtime) -> None:
    """Register ``plan_flow`` on ``server``."""

    @server.tool(name="plan_flow", annotations=READ_ONLY_LOCAL)
    @mesh_tool
    async def plan_flow(
        kind: Annotated[Literal["job", "event"], Field(description="job or event")],
        name: Annotated[str, Field(min_length=1, max_length=100, description="new member, UPPER_SNAKE_CASE")],
        domain: Annotated[str, Field(min_length=1, max_length=100, description="its domain, e.g. event")],
        ctx: Context,
        queue: Annotated[str | None, Field(max_length=100, description="job queue; a new member adds it")] = None,
        emitter: Annotated[str | None, Field(max_length=100, description="repository that writes it")] = None,
        consumer: Annotated[str | None, Field(max_length=100, description="event post-processor")] = None,
    ) -> Annotated[CallToolResult, ResultModel("tools.plan_flow.model:FlowPlan")]:
        """Read-only edit plan for a new job or event in this workspace, before writing code.

        Ordered `phases` (contracts, publish STOP, producers, workers/consumers, verify) of `steps`: action,
        file, mode, line/anchor, snippet copied from the domain's nearest sibling flow, why (file:line).
        `checks`: verify_flow ids passing once applied.
        """
        index = get_index_service(runtime)
        await refresh_with_progress(index, ctx)
        from tools.plan_flow.service import plan_flow as plan_lib

        plan = await anyio.to_thread.run_sync(lambda: plan_lib(index, kind, name, domain, queue, emitter, consumer))
        return tool_result(plan, plan.summary_text())
