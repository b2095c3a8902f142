"""MCP adapters of the static index: ``analyze_impact`` and ``list_catalogue``.

Both refresh the index first (only changed files are re-parsed), in a worker thread, and
send MCP progress notifications while files are being parsed; the query itself runs in a
worker thread too. They need only the workspace (no database, no Redis).
"""

from __future__ import annotations

import contextlib
import time
from typing import Annotated, Literal

import anyio
import anyio.from_thread
import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult
from pydantic import Field

from server.output_models import ResultModel
from server.runtime import Runtime
from server.toolkit import READ_ONLY_LOCAL, mesh_tool, tool_result
from tools.detail import DetailArg, shaped, with_summary
from tools.mesh_index.model import Catalogue
from tools.mesh_index.service import IndexService, get_index_service
from tools.paging import DEFAULT_LIMIT, MAX_LIMIT, page
from tools.skills.model import attach_related
from tools.skills.service import get_skill_links

PROGRESS_EVERY_S = 0.25


async def refresh_with_progress(service: IndexService, ctx: Context | None) -> None:
    """Refresh the index in a worker thread, relaying its progress as MCP notifications."""
    last = [0.0]

    def progress(done: int, total: int, path: str) -> None:
        now = time.monotonic()
        if ctx is None or (done < total and now - last[0] < PROGRESS_EVERY_S):
            return
        last[0] = now
        with contextlib.suppress(Exception):  # a client without progress support must not break indexing
            anyio.from_thread.run(ctx.report_progress, float(done), float(total), f"indexed {done}/{total} files")

    await anyio.to_thread.run_sync(lambda: service.refresh(progress))


def register(server: MCPServer, runtime: Runtime) -> None:
    """Register analyze_impact and list_catalogue on ``server``."""

    @server.tool(name="analyze_impact", annotations=READ_ONLY_LOCAL)
    @mesh_tool
    async def analyze_impact(
        target: Annotated[str, Field(
            min_length=1, max_length=512,
            description="member name (GEOCODE_EVENT), qualified name, string value (events.geocode_event), "
            "queue or stream key")],
        ctx: Context,
        depth: Annotated[int, Field(ge=0, le=5, description="follow-up levels to follow (0-5)")] = 1,
        include_tests: Annotated[bool, Field(
            description="also list producers and consumers that exist only in tests")] = False,
        detail: DetailArg = "summary",
    ) -> Annotated[CallToolResult, ResultModel("tools.mesh_index.model:ImpactResult")]:
        """Who produces and who consumes a job, event, websocket message, queue or stream, read from the code.
        Call it first, before any runtime tool. Returns the matching types (an ambiguous name lists each), producer
        and consumer sites (repo, file, line, symbol, kind, confidence, test_only), the queues and streams it travels
        on, follow-ups up to `depth` (what handlers and triggers emit next) and unresolved references; an unknown
        target returns `suggestions`.
        """
        from tools.mesh_index.summary import summarise_impact  # with its model: on the first call

        service = get_index_service(runtime)
        await refresh_with_progress(service, ctx)
        result = await anyio.to_thread.run_sync(lambda: service.analyze_impact(target, depth, include_tests))
        page = await anyio.to_thread.run_sync(get_skill_links(runtime).for_impact, result)
        text = "\n".join(filter(None, [result.summary_text(), attach_related(result, page)]))
        return tool_result(shaped(result, detail, summarise_impact, runtime.settings.limits.summary_items), text)

    with_summary(server, "analyze_impact", "tools.mesh_index.summary:ImpactSummary")

    @server.tool(name="list_catalogue", annotations=READ_ONLY_LOCAL)
    @mesh_tool
    async def list_catalogue(
        ctx: Context,
        kind: Annotated[Literal["job", "event", "ws_event", "queue", "stream"] | None, Field(
            description="only this kind; all kinds when omitted")] = None,
        orphans_only: Annotated[bool, Field(description="only the entries with a problem (orphans)")] = False,
        limit: Annotated[int, Field(ge=1, le=MAX_LIMIT, description="page size")] = DEFAULT_LIMIT,
        offset: Annotated[int, Field(ge=0, description="first entry (page.next_offset)")] = 0,
    ) -> Annotated[CallToolResult, Catalogue]:
        """Every job, event, websocket type, queue and stream, with producer and consumer counts; orphans say why.
        Paged.
        """
        service = get_index_service(runtime)
        await refresh_with_progress(service, ctx)
        result = await anyio.to_thread.run_sync(lambda: service.catalogue(kind, orphans_only))
        result.entries, result.page = page(result.entries, limit, offset)
        return tool_result(result, result.summary_text())
