"""MCP adapters of the BullMQ tools: inspect_queue, list_queues (read-only)."""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult
from pydantic import Field

from server.output_models import ResultModel
from server.runtime import Runtime
from server.toolkit import READ_ONLY_REMOTE, annotate, mesh_tool, tool_result
from tools.arg_bounds import MAX_FAILURES


def register(server: MCPServer, runtime: Runtime) -> None:
    max_count = runtime.settings.limits.max_count
    limit_hint = Annotated[int, Field(ge=1, le=max_count, description=f"queues described (1 to {max_count})")]
    """Register the queue tools on ``server``."""

    @server.tool(name="inspect_queue", annotations=READ_ONLY_REMOTE)
    @mesh_tool
    async def inspect_queue_tool(
        queue: Annotated[str, Field(min_length=1, max_length=512, description="BullMQ queue name, e.g. event-queue")],
        job_id: Annotated[
            str | None,
            Field(default=None, max_length=512, description="a job id (= the jobs_outbox id) to show in detail"),
        ] = None,
        failures: Annotated[
            int, Field(ge=0, le=MAX_FAILURES, description="newest failed jobs to show with their failedReason")
        ] = 5,
    ) -> Annotated[CallToolResult, ResultModel("tools.queues.bull:QueueReport")]:
        """A BullMQ queue, or one job of it (job_id).
        Counts by state, paused or not, oldest waiting job, newest failures with failedReason; a job's state,
        attempts, data, failure and stack trace (or why it is gone). Anomalies: stalled jobs (worker lock gone) and
        overdue delayed jobs, saying whether a worker runs.
        """
        from tools.queues.bull import inspect_queue

        report = await inspect_queue(runtime.connections, runtime.settings, queue, job_id=job_id, failures=failures)
        return tool_result(report, report.summary_text())

    @server.tool(name="list_queues", annotations=READ_ONLY_REMOTE)
    @mesh_tool
    @annotate(limit=limit_hint)
    async def list_queues_tool(
        match: Annotated[
            str | None, Field(default=None, max_length=512, description="SCAN glob on queue names, e.g. *event*")
        ] = None,
        limit: int = 100,
    ) -> Annotated[CallToolResult, ResultModel("tools.queues.discovery:QueueList")]:
        """BullMQ queues in Redis (bounded SCAN) with counts by state and paused flag: the names inspect_queue takes."""
        from tools.queues.discovery import list_queues

        result = await list_queues(runtime.connections, runtime.settings, match=match, limit=limit)
        return tool_result(result, result.summary_text())
