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
from tools.paging import DEFAULT_LIMIT, MAX_LIMIT, page


def register(server: MCPServer, runtime: Runtime) -> None:
    """Register ``lint_flows`` on ``server``."""

    @server.tool(name="lint_flows", annotations=READ_ONLY_LOCAL)
    @mesh_tool
    async def lint_flows(
        ctx: Context,
        codes: Annotated[list[Annotated[str, Field(max_length=60)]] | None, Field(
            max_length=len(CODES),
            description="only these codes: " + ", ".join(CODES))] = None,
        min_severity: Annotated[Literal["info", "warning", "error"], Field(
            description="hide findings below this (catalogue orphans are info)")] = "warning",
        limit: Annotated[int, Field(ge=1, le=MAX_LIMIT, description="page size")] = DEFAULT_LIMIT,
        offset: Annotated[int, Field(ge=0, description="first finding (page.next_offset)")] = 0,
    ) -> Annotated[CallToolResult, ResultModel("tools.lint.model:LintReport")]:
        """Workspace-wide flow defects no single flow's check sees, with file:line evidence: filters matching
        nothing, types nothing consumes, unregistered queues, payload fields read at the wrong level, diverging
        migrations, dropped options, unread config keys, contract members newer than the pin. Errors first; paged.
        """
        service = get_index_service(runtime)
        await refresh_with_progress(service, ctx)
        from tools.lint.engine import lint

        report = await anyio.to_thread.run_sync(lambda: lint(service, codes, min_severity))
        report.findings, report.page = page(report.findings, limit, offset)
        return tool_result(report, report.summary_text())
