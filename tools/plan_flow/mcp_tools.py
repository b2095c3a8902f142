"""MCP adapter of plan_flow: one read-only tool that reads only the workspace (it writes no file)."""

from __future__ import annotations

from typing import Annotated, Literal

import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult
from pydantic import Field

from server.runtime import Runtime
from server.toolkit import READ_ONLY_LOCAL, mesh_tool, tool_result
from tools.mesh_index.mcp_tools import refresh_with_progress
from tools.mesh_index.service import get_index_service
from tools.plan_flow.model import FlowPlan


def register(server: MCPServer, runtime: Runtime) -> None:
    """Register ``plan_flow`` on ``server``."""

    @server.tool(name="plan_flow", annotations=READ_ONLY_LOCAL)
    @mesh_tool
    async def plan_flow(
        kind: Annotated[Literal["job", "event"], Field(description="job or event")],
        name: Annotated[
            str,
            Field(
                min_length=1,
                max_length=100,
                description="the new member in UPPER_SNAKE_CASE, e.g. SYNC_EXTERNAL_CALENDAR",
            ),
        ],
        domain: Annotated[
            str, Field(min_length=1, max_length=100, description="the domain it belongs to, e.g. event, user, ranking")
        ],
        ctx: Context,
        queue: Annotated[
            str | None,
            Field(
                max_length=100,
                description=(
                    "jobs only: an existing queue (member, qualified name or value) or a new queue member to add "
                    "(then a worker for it); default: the domain's existing queue"
                ),
            ),
        ] = None,
        emitter: Annotated[
            str | None,
            Field(max_length=100, description=("repository or package that writes it (default: the sibling's)")),
        ] = None,
        consumer: Annotated[
            str | None,
            Field(
                max_length=100,
                description=(
                    "events: post-processor class or repository that should accept it (default: the sibling's)"
                ),
            ),
        ] = None,
    ) -> Annotated[CallToolResult, FlowPlan]:
        """The edit plan for a new job or event type in THIS workspace, before writing any code (read-only).

        Returns ordered `phases` (contracts, the publish STOP, producers, workers, consumers, verify), each a
        list of `steps` with `action`, `file`, `mode` (insert after `line` / replace `line`..`end_line` / create
        / run), `anchor` (the line's text), `snippet` (the shape of the nearest sibling flow of the domain,
        renamed) and `why` (the sibling's file:line). The value follows the domain's enum convention; the queue
        is the domain's unless `queue` is given. `checks` are the verify_flow ids that pass once applied;
        `not_covered` says which cannot and why. A name or value that exists already is refused with its site.
        """
        index = get_index_service(runtime)
        await refresh_with_progress(index, ctx)
        from tools.plan_flow.service import plan_flow as plan_lib

        plan = await anyio.to_thread.run_sync(lambda: plan_lib(index, kind, name, domain, queue, emitter, consumer))
        return tool_result(plan, plan.summary_text())
