"""MCP adapters of the runtime diagnosis tools: query_outbox, outbox_health, trace_job, trace_event.

Thin wrappers: flat validated arguments, one call into the plain modules, a pydantic
result plus a short text. All four only read (READ_ONLY_REMOTE).
"""

from typing import TYPE_CHECKING, Annotated, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult
from pydantic import Field

from server.output_models import ResultModel
from server.runtime import Runtime
from server.toolkit import READ_ONLY_REMOTE, mesh_tool, tool_result
from tools.arg_bounds import MAX_OLDER_THAN_S
from tools.detail import DetailArg, shaped, with_summary
from tools.skills.model import attach_related

if TYPE_CHECKING:  # the libraries and result models are imported on a tool's first call
    from tools.outbox.model import TraceReport
    from tools.outbox.schema_discovery import SchemaCatalog

TRACE_REPORT = "tools.outbox.model:TraceReport"
TRACE_SUMMARY = "tools.outbox.summary:TraceSummary"

SERVICE_DOC = "a service of [services.<name>] in mesh.toml; omit for every service"


def catalog_of(runtime: Runtime) -> "SchemaCatalog":
    """The per-server schema cache of the outbox tables."""
    from tools.outbox.schema_discovery import SchemaCatalog

    return runtime.service("outbox.schema", lambda: SchemaCatalog(runtime.connections, runtime.settings))


def with_picture(report: "TraceReport") -> str:
    """The trace's text followed by its picture, for clients that only show text (no line of the text can
    open a Markdown fence of its own: values read from the database are untrusted too)."""
    from server.text_safety import defuse_fences

    return f"{defuse_fences(report.summary_text())}\n```mermaid\n{report.mermaid or ''}```"


def register(server: MCPServer, runtime: Runtime) -> None:
    """Register query_outbox, outbox_health, trace_job and trace_event on ``server``."""
    limits = runtime.settings.limits

    @server.tool(name="query_outbox", annotations=READ_ONLY_REMOTE)
    @mesh_tool
    async def query_outbox(
        table: Annotated[
            Literal["jobs_outbox", "event_queue", "job_audit"],
            Field(description="which outbox table to read"),
        ],
        service: Annotated[str | None, Field(min_length=1, max_length=100, description=SERVICE_DOC)] = None,
        status: Annotated[
            str | None, Field(min_length=1, max_length=20, description="PENDING, PROCESSING, COMPLETED or FAILED")
        ] = None,
        type: Annotated[
            str | None,
            Field(min_length=1, max_length=255, description="exact job or event type (job_type for job_audit)"),
        ] = None,
        id: Annotated[
            str | None,
            Field(min_length=1, max_length=100, description="row id; for job_audit also matches job_id"),
        ] = None,
        older_than_s: Annotated[
            float | None,
            Field(ge=0, le=MAX_OLDER_THAN_S, description="only rows created more than this many s ago"),
        ] = None,
        limit: Annotated[
            int, Field(ge=1, le=limits.max_rows, description=f"rows per page (max {limits.max_rows})")
        ] = limits.default_rows,
        cursor: Annotated[
            str | None,
            Field(min_length=1, max_length=1024, description="next_cursor of the previous page (same filters)"),
        ] = None,
    ) -> Annotated[CallToolResult, ResultModel("tools.outbox.model:QueryOutboxResult")]:
        """Rows of jobs_outbox, event_queue or job_audit, newest first, filtered and paged (keyset cursor).
        Each row has its age and a hint reading its state. Use it to find stuck or failed rows, then
        trace_job / trace_event on an id. Without service every service is read (down ones in `unavailable`).
        """
        from tools.outbox import query_outbox as query_lib

        result = await query_lib.query_outbox(
            runtime.connections, runtime.settings, catalog_of(runtime), service=service, table=table,
            status=status, type=type, id=id, older_than_s=older_than_s, limit=limit, cursor=cursor,
        )
        return tool_result(result, result.summary_text())

    @server.tool(name="outbox_health", annotations=READ_ONLY_REMOTE)
    @mesh_tool
    async def outbox_health(
        service: Annotated[str | None, Field(min_length=1, max_length=100, description=SERVICE_DOC)] = None,
    ) -> Annotated[CallToolResult, ResultModel("tools.outbox.model:HealthReport")]:
        """Start here when something asynchronous is not happening and you do not know which item.
        Per service and table: counts by status, age of the oldest PENDING and PROCESSING rows, FAILED counts by type,
        and verdicts (pending_in_outbox, event_pending, stuck_processing, handler_failed, push_failed, table_missing,
        slow, unavailable) with a next step. A service that is down is reported; the others answer.
        """
        from tools.outbox import health as health_lib

        report = await health_lib.outbox_health(runtime.connections, runtime.settings, catalog_of(runtime), service)
        return tool_result(report, report.summary_text())

    @server.tool(name="trace_job", annotations=READ_ONLY_REMOTE)
    @mesh_tool
    async def trace_job(
        job_id: Annotated[str, Field(min_length=1, max_length=100, description="the jobs_outbox id (= BullMQ job id)")],
        ctx: Context,
        service: Annotated[str | None, Field(min_length=1, max_length=100, description=SERVICE_DOC)] = None,
        detail: DetailArg = "summary",
    ) -> Annotated[CallToolResult, ResultModel(TRACE_REPORT)]:
        """Follow one job hop by hop and name the first broken link.
        Hops: jobs_outbox row, BullMQ job, job:completed guard, job_audit row, outcome events, their stream entries
        and delivery per group. verdict.code: ok, pending_in_outbox, stuck_processing, pushed_not_consumed,
        handler_failed, success_not_cleaned, event_pending, in_pel, dead_consumer, in_dlq, trimmed,
        idempotency_lock_stale, purged or not_found, with the next step.
        """
        from tools.flow_map.trace_mermaid import trace_mermaid
        from tools.outbox.learnt_shape import settings_for_runtime
        from tools.outbox.summary import summarise_trace
        from tools.outbox.trace import Tracer
        from tools.pictures.attach import with_view
        from tools.pictures.view import trace_view
        from tools.skills.trace_links import related_to_trace

        settings = await settings_for_runtime(runtime)
        report = await Tracer(runtime.connections, settings, catalog_of(runtime)).trace_job(service, job_id)
        report.mermaid = trace_mermaid(report)
        related = attach_related(report, await related_to_trace(runtime, report))
        shown = shaped(report, detail, summarise_trace, limits.summary_items)
        result = tool_result(shown, "\n".join(filter(None, [with_picture(report), related])))
        return with_view(ctx, result, lambda: trace_view(report))

    @server.tool(name="trace_event", annotations=READ_ONLY_REMOTE)
    @mesh_tool
    async def trace_event(
        event_id: Annotated[str, Field(min_length=1, max_length=100, description="the event_queue id")],
        ctx: Context,
        service: Annotated[str | None, Field(min_length=1, max_length=100, description=SERVICE_DOC)] = None,
        detail: DetailArg = "summary",
    ) -> Annotated[CallToolResult, ResultModel(TRACE_REPORT)]:
        """Follow one event_queue row to its stream entries and, per consumer group, whether it was delivered.
        Pending (consumer, idle time), acknowledged or dead-lettered; retry keys, idempotency lock.
        verdict.code (the first broken link): event_pending, stuck_processing, pushed_not_consumed, in_pel,
        dead_consumer, in_dlq, trimmed, idempotency_lock_stale, not_found or ok, with the next step.
        """
        from tools.flow_map.trace_mermaid import trace_mermaid
        from tools.outbox.summary import summarise_trace
        from tools.outbox.trace import Tracer
        from tools.pictures.attach import with_view
        from tools.pictures.view import trace_view
        from tools.skills.trace_links import related_to_trace

        report = await Tracer(runtime.connections, runtime.settings, catalog_of(runtime)).trace_event(
            service, event_id
        )
        report.mermaid = trace_mermaid(report)
        related = attach_related(report, await related_to_trace(runtime, report))
        shown = shaped(report, detail, summarise_trace, limits.summary_items)
        result = tool_result(shown, "\n".join(filter(None, [with_picture(report), related])))
        return with_view(ctx, result, lambda: trace_view(report))

    with_summary(server, "trace_job", TRACE_SUMMARY)
    with_summary(server, "trace_event", TRACE_SUMMARY)
