"""MCP adapter of lint_flows: one read-only tool over the workspace (refreshes the index first)."""

from __future__ import annotations

from typing import Annotated, Literal

import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult
from pydantic import Field

from server.output_models import ResultModel
from server.runtime import Runtime
from server.toolkit import READ_ONLY_LOCAL, mesh_tool, tool_result
from tools.lint.rules import CODES
from tools.mesh_index.mcp_tools import refresh_with_progress
from tools.mesh_index.service import get_index_service


def register(server: MCPServer, runtime: Runtime) -> None:
    """Register ``lint_flows`` on ``server``."""

    @server.tool(name="lint_flows", annotations=READ_ONLY_LOCAL)
    @mesh_tool
    async def lint_flows(
        ctx: Context,
        codes: Annotated[list[Annotated[str, Field(max_length=60)]] | None, Field(
            max_length=len(CODES),
            description="only these codes (all when omitted): " + ", ".join(CODES))] = None,
        min_severity: Annotated[Literal["info", "warning", "error"], Field(
            description="hide findings below this severity (catalogue orphans are info)")] = "warning",
    ) -> Annotated[CallToolResult, ResultModel("tools.lint.model:LintReport")]:
        """Workspace-wide flow defects that no single flow's check sees, each with file:line evidence.
        Filters matching nothing, types and streams nothing consumes, workers on unregistered queues, payload
        fields read at the wrong level, diverging shared migrations, dropped option keys, unread config keys,
        impossible preconditions, contract members newer than the pinned package. Errors first.
        """
        service = get_index_service(runtime)
        await refresh_with_progress(service, ctx)
        from tools.lint.engine import lint

        report = await anyio.to_thread.run_sync(lambda: lint(service, codes, min_severity))
        return tool_result(report, report.summary_text())
