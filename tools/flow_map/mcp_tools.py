"""MCP adapters of the flow pictures: the ``flow_map`` tool and the ``mesh://flow/{target}`` resource.

The tool refreshes the index first (with progress notifications), builds the picture in a
worker thread and, with ``live=true``, reads each hop once through the runtime's read-only
connections. The resource gives the static picture (depth 3, left to right) as
``text/vnd.mermaid`` for clients that attach resources rather than call tools.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal
from urllib.parse import unquote

import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError
from mcp.types import Annotations, CallToolResult
from pydantic import Field

from server.errors import MeshError
from server.output_models import ResultModel
from server.runtime import Runtime
from server.toolkit import READ_ONLY_REMOTE, mesh_tool, tool_result
from tools.detail import DetailArg, shaped, with_summary
from tools.mesh_index.mcp_tools import refresh_with_progress
from tools.mesh_index.service import MAX_DEPTH, get_index_service
from tools.skills.model import RelatedPage, attach_related
from tools.skills.service import get_skill_links

if TYPE_CHECKING:  # the result models are imported on the tool's first call
    from tools.flow_map.model import FlowMap

MERMAID_MIME_TYPE = "text/vnd.mermaid"
FLOW_URI = "mesh://flow/{target}"


def related_to_flow(runtime: Runtime, result: FlowMap) -> RelatedPage:
    """The runbooks about the picture: its matches, the queues and streams drawn, the code's files."""
    from tools.skills.related import TargetFacts

    links = get_skill_links(runtime)
    facts = TargetFacts()
    for match in result.matches:
        facts.names.extend([match.value, match.name, match.name.rsplit(".", 1)[-1], *match.aliases])
        facts.tables.extend(t for t in links.tables_of(match.kind) if t not in facts.tables)
    facts.names.extend(n.value for n in result.nodes if n.role == "route" and n.value)
    facts.files = sorted({n.file for n in result.nodes if n.role == "code" and n.file})
    return links.related(facts)


def register(server: MCPServer, runtime: Runtime) -> None:
    """Register flow_map and the mesh://flow/{target} resource template on ``server``."""

    @server.tool(name="flow_map", annotations=READ_ONLY_REMOTE)
    @mesh_tool
    async def flow_map_tool(
        target: Annotated[str, Field(
            min_length=1, max_length=512,
            description="a job, event or websocket type (member, qualified name or value), a queue or a stream key")],
        ctx: Context,
        depth: Annotated[int, Field(ge=0, le=MAX_DEPTH, description=f"follow-up levels drawn (0-{MAX_DEPTH})")] = 3,
        live: Annotated[bool, Field(
            description="read each hop once at run time and colour it")] = False,
        direction: Annotated[Literal["LR", "TB", "TD", "RL", "BT"], Field(
            description="layout")] = "LR",
        detail: DetailArg = "summary",
    ) -> Annotated[CallToolResult, ResultModel("tools.flow_map.model:FlowMap")]:
        """The flow of a job, event, websocket message, queue or stream as a Mermaid flowchart (in the text;
        with detail="full" also `mermaid`, `nodes`, `edges`). Trouble in red (dead end, unrouted handler, queue
        without worker, filter matching nothing). live=true colours each hop by the trace verdict.
        """
        service = get_index_service(runtime)
        await refresh_with_progress(service, ctx)
        from tools.flow_map.service import flow_map
        from tools.flow_map.summary import summarise_flow
        from tools.pictures.attach import with_view
        from tools.pictures.view import flow_view

        result = await flow_map(service, target, depth, live, direction, runtime)
        page = await anyio.to_thread.run_sync(related_to_flow, runtime, result)
        text = "\n".join(filter(None, [result.summary_text(), attach_related(result, page)]))
        shown = tool_result(shaped(result, detail, summarise_flow, runtime.settings.limits.summary_items), text)
        return with_view(ctx, shown, lambda: flow_view(result))

    with_summary(server, "flow_map", "tools.flow_map.summary:FlowSummary")

    @server.resource(
        FLOW_URI,
        name="flow",
        title="Flow picture (Mermaid)",
        description="The flow of a job, event, websocket type, queue or stream (depth 3) as a Mermaid flowchart; "
        "the flow_map tool gives the same picture with its data and live state.",
        mime_type=MERMAID_MIME_TYPE,
        annotations=Annotations(audience=["user", "assistant"], priority=0.6),
    )
    def read_flow(target: str) -> str:
        from tools.flow_map.service import build_map

        try:
            service = get_index_service(runtime)
            service.refresh()
            result, _graph = build_map(service, unquote(target), 3, "LR")
        except MeshError as exc:
            raise ResourceError(str(exc)) from None
        return result.mermaid
