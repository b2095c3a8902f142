"""MCP adapter of verify_flow: one read-only tool that reads only the workspace.

Like the static index's tools, it refreshes the index first (only changed files are
re-parsed, with MCP progress notifications), so a flow the agent has just edited is
checked as it is on disk; the checks run in a worker thread.
"""

from __future__ import annotations

from typing import Annotated

import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult
from pydantic import Field

from server.output_models import ResultModel
from server.runtime import Runtime
from server.toolkit import READ_ONLY_LOCAL, mesh_tool, tool_result
from tools.mesh_index.mcp_tools import refresh_with_progress
from tools.mesh_index.service import get_index_service
from tools.skills.model import attach_related
from tools.skills.service import get_skill_links


def register(server: MCPServer, runtime: Runtime) -> None:
    """Register ``verify_flow`` on ``server``."""

    @server.tool(name="verify_flow", annotations=READ_ONLY_LOCAL)
    @mesh_tool
    async def verify_flow(
        target: Annotated[
            str,
            Field(
                min_length=1,
                max_length=300,
                description="job or event type: member name (SHIP_ORDER), qualified name "
                "(JobMessagingType.SHIP_ORDER) or string value (shop.ship_order)",
            ),
        ],
        ctx: Context,
    ) -> Annotated[CallToolResult, ResultModel("tools.verify.model:FlowReport")]:
        """Check that a job or event type is wired end to end in the code.
        Use it after adding or changing a flow, or when one never runs. Each check (declared, has_producer,
        producer_uses_outbox, has_handler, handler_routed, stream_has_consumer, ...) is pass, fail or unknown, with
        file:line evidence and a one-sentence fix; `failing` lists the failing check ids.
        """
        index = get_index_service(runtime)
        await refresh_with_progress(index, ctx)
        from tools.verify.service import verify_flow as verify_flow_lib  # on first call: not at server start-up

        report = await anyio.to_thread.run_sync(verify_flow_lib, index, target)
        page = await anyio.to_thread.run_sync(get_skill_links(runtime).for_flow, report)
        text = "\n".join(filter(None, [report.summary_text(), attach_related(report, page)]))
        return tool_result(report, text)
