"""MCP adapter of ``trace_request`` (read only)."""

from typing import TYPE_CHECKING, Annotated

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult
from pydantic import Field

from server.output_models import ResultModel
from server.runtime import Runtime
from server.toolkit import READ_ONLY_REMOTE, mesh_tool, tool_result
from tools.arg_bounds import MAX_SINCE_S
from tools.detail import DetailArg, shaped, with_summary
from tools.outbox.mcp_tools import catalog_of
from tools.skills.model import attach_related

if TYPE_CHECKING:
    from tools.mesh_index.service import IndexService


def index_of(runtime: Runtime) -> "IndexService | None":
    """The runtime's static index when a workspace is configured (for the websocket messages), else None."""
    if runtime.settings.workspace is None:
        return None
    from tools.mesh_index.service import get_index_service  # loaded only when a workspace is used

    return get_index_service(runtime)


def register(server: MCPServer, runtime: Runtime) -> None:
    """Register trace_request on ``server``."""

    @server.tool(name="trace_request", annotations=READ_ONLY_REMOTE)
    @mesh_tool
    async def trace_request(
        ctx: Context,
        correlation_id: Annotated[
            str | None, Field(min_length=1, max_length=200, description="event_queue.correlation_id of the request")
        ] = None,
        trace_id: Annotated[
            str | None, Field(min_length=1, max_length=200,
                              description="W3C trace id (32 hex) matched in traceparent, or the old traceId uuid")
        ] = None,
        entity_id: Annotated[
            str | None, Field(min_length=1, max_length=200,
                              description="a business id inside payloads (heuristic search)")
        ] = None,
        start: Annotated[
            str | None, Field(min_length=1, max_length=300, description="SERVICE:TABLE:ID of any outbox row")
        ] = None,
        since_s: Annotated[
            float, Field(gt=0, le=MAX_SINCE_S, description="window of the entity_id search (s)")
        ] = 86400,
        services: Annotated[
            list[str] | None, Field(min_length=1, max_length=50,
                                    description="services to search (default: all)")
        ] = None,
        detail: DetailArg = "summary",
    ) -> Annotated[CallToolResult, ResultModel("tools.trace_request.model:RequestReport")]:
        """Follow one request across every service: give exactly one of correlation_id, trace_id, entity_id, start.
        Each item is traced like trace_job. verdict: the first broken link (`inconclusive` with `unavailable` when
        a service could not be searched); also `trace_context` findings and `ws_messages` (static).
        """
        from tools.outbox.learnt_shape import settings_for_runtime
        from tools.pictures.attach import with_view
        from tools.pictures.view import request_view
        from tools.skills.trace_links import related_to_request
        from tools.trace_request.service import trace_request as trace_request_lib
        from tools.trace_request.summary import request_text, summarise_request

        settings = await settings_for_runtime(runtime)
        report = await trace_request_lib(
            runtime.connections, settings, catalog_of(runtime), correlation_id=correlation_id,
            trace_id=trace_id, entity_id=entity_id, start=start, since_s=since_s, services=services,
            index=index_of(runtime),
        )
        related = attach_related(report, await related_to_request(runtime, report))
        shown = shaped(report, detail, summarise_request, runtime.settings.limits.summary_items)
        result = tool_result(shown, "\n".join(filter(None, [request_text(report), related])))
        return with_view(ctx, result, lambda: request_view(report))

    with_summary(server, "trace_request", "tools.trace_request.summary:RequestSummary")
