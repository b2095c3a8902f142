"""MCP adapters of the stream tools: inspect_stream, list_pending, dlq_list, list_streams.

Thin: flat validated arguments, one library call, a pydantic result plus a short text.
All four only read Redis (``READ_ONLY_REMOTE``).
"""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult
from pydantic import Field

from server.output_models import ResultModel
from server.runtime import Runtime
from server.toolkit import READ_ONLY_REMOTE, annotate, mesh_tool, tool_result
from tools.arg_bounds import MAX_IDLE_MS
from tools.detail import DetailArg, shaped, with_summary

StreamName = Annotated[str, Field(min_length=1, max_length=512, description="stream key, e.g. stream:event:created")]
Cursor = Annotated[
    str | None, Field(default=None, max_length=2048, description="next_cursor of the previous page; omit to start")
]


def register(server: MCPServer, runtime: Runtime) -> None:
    """Register the stream tools on ``server``."""
    max_count = runtime.settings.limits.max_count
    count_hint = Annotated[int, Field(ge=1, le=max_count, description=f"entries per page (1 to {max_count})")]
    limit_hint = Annotated[int, Field(ge=1, le=max_count, description=f"streams described (1 to {max_count})")]

    @server.tool(name="inspect_stream", annotations=READ_ONLY_REMOTE)
    @mesh_tool
    async def inspect_stream_tool(
        stream: StreamName, detail: DetailArg = "summary"
    ) -> Annotated[CallToolResult, ResultModel("tools.streams.inspect_models:StreamReport")]:
        """Start here for any Redis stream problem; list_streams gives the names.
        Length, consumer groups (pending, lag, last delivered id, dead consumers), oldest pending entry, dead-letter
        stream, and `anomalies` (dead_consumer, stuck_pending, trimmed_pending, no_group, lag_growing, dlq_not_empty,
        stale_idempotency_lock), each with evidence and a next step.
        """
        from tools.streams.inspect import inspect_stream
        from tools.streams.summary import summarise_stream

        report = await inspect_stream(runtime.connections, runtime.settings, stream)
        shown = shaped(report, detail, summarise_stream, runtime.settings.limits.summary_items)
        return tool_result(shown, report.summary_text())

    @server.tool(name="list_pending", annotations=READ_ONLY_REMOTE)
    @mesh_tool
    @annotate(count=count_hint)
    async def list_pending_tool(
        stream: StreamName,
        group: Annotated[str, Field(min_length=1, max_length=512, description="consumer group name")],
        consumer: Annotated[
            str | None, Field(default=None, max_length=512, description="only entries held by this consumer")
        ] = None,
        min_idle_ms: Annotated[
            int, Field(ge=0, le=MAX_IDLE_MS, description="only entries idle at least this long (Redis 6.2+)")
        ] = 0,
        count: int = 50,
        cursor: Cursor = None,
    ) -> Annotated[CallToolResult, ResultModel("tools.streams.pending:PendingPage")]:
        """A page of a consumer group's pending entries, by id.
        Owner consumer, idle time, delivery count, and the message's fields (or whether it was trimmed or deleted).
        Use after inspect_stream reports dead_consumer, stuck_pending or trimmed_pending.
        """
        from tools.streams.pending import list_pending

        page = await list_pending(
            runtime.connections, runtime.settings, stream, group,
            consumer=consumer, min_idle_ms=min_idle_ms, count=count, cursor=cursor,
        )
        return tool_result(page, page.summary_text())

    @server.tool(name="dlq_list", annotations=READ_ONLY_REMOTE)
    @mesh_tool
    @annotate(count=count_hint)
    async def dlq_list_tool(
        stream: Annotated[
            str | None,
            Field(default=None, max_length=512,
                  description="source stream (or its dead-letter stream); omit for every dead-letter stream"),
        ] = None,
        count: int = 50,
        cursor: Cursor = None,
        type: Annotated[
            str | None, Field(default=None, max_length=256, description="only this event type (payload type field)")
        ] = None,
        contains: Annotated[
            str | None, Field(default=None, max_length=256, description="only errors containing this text (any case)")
        ] = None,
    ) -> Annotated[CallToolResult, ResultModel("tools.streams.dlq:DeadLetterPage")]:
        """Dead letters of one stream (`<stream>-dlq`) or of every dead-letter stream, oldest first.
        messageId, error, payload, event type and id, retry bookkeeping, idempotency lock, and whether the original
        is still in the stream or a PEL. Export these before any replay.
        """
        from tools.streams.dlq import list_dead_letters

        page = await list_dead_letters(
            runtime.connections, runtime.settings, stream=stream, count=count, cursor=cursor,
            type=type, contains=contains,
        )
        return tool_result(page, page.summary_text())

    @server.tool(name="list_streams", annotations=READ_ONLY_REMOTE)
    @mesh_tool
    @annotate(limit=limit_hint)
    async def list_streams_tool(
        match: Annotated[
            str | None, Field(default=None, max_length=512, description="SCAN glob on key names, e.g. stream:*")
        ] = None,
        limit: int = 100,
        include_bullmq: Annotated[bool, Field(description="also list BullMQ's own <prefix>:<queue>:events")] = False,
    ) -> Annotated[CallToolResult, ResultModel("tools.streams.discovery:StreamList")]:
        """Stream keys in Redis (bounded SCAN) with length, groups, pending and dead letters.
        Dead-letter streams are marked `dlq`. Gives the names inspect_stream, list_pending and dlq_list take.
        """
        from tools.streams.discovery import list_streams

        result = await list_streams(
            runtime.connections, runtime.settings, match=match, limit=limit, include_bullmq=include_bullmq
        )
        return tool_result(result, result.summary_text())

    with_summary(server, "inspect_stream", "tools.streams.summary:StreamSummary")
