"""MCP adapters of the pictures: the ``visualize_mesh`` tool, the MCP App resource ``ui://mesh/graph.html``,
and the app named in the ``_meta.ui.resourceUri`` of the tools whose results it draws.

A result carries the app's view (:mod:`tools.pictures.view`) in its ``_meta`` only when the client
negotiated MCP Apps (:func:`mcp.server.apps.client_supports_apps`); other clients get the text and
structured content exactly as before.
"""

from __future__ import annotations

from typing import Annotated, Literal

import anyio.to_thread
from mcp.server.apps import EXTENSION_ID
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.resources import TextResource
from mcp.types import Annotations, CallToolResult
from pydantic import Field

from server.output_models import ResultModel
from server.runtime import Runtime
from server.sdk_tools import registered_tools
from server.toolkit import READ_ONLY_LOCAL, mesh_tool, tool_result
from tools.mesh_index.mcp_tools import refresh_with_progress
from tools.mesh_index.service import get_index_service
from tools.pictures.app import APP_MIME_TYPE, APP_TOOLS, APP_URI, CSP_META, app_html
from tools.pictures.attach import with_view
from tools.pictures.mesh import MAX_SERVICES


def register(server: MCPServer, runtime: Runtime) -> None:
    """visualize_mesh, the app resource, and the app named on the tools it draws (registered before this)."""

    @server.tool(name="visualize_mesh", annotations=READ_ONLY_LOCAL, meta={"ui": {"resourceUri": APP_URI}})
    @mesh_tool
    async def visualize_mesh(
        ctx: Context,
        format: Annotated[Literal["mermaid", "json", "html"], Field(
            description="html: page in `html`")] = "mermaid",
        service: Annotated[str | None, Field(max_length=256, description="zoom in")] = None,
        max_services: Annotated[int, Field(ge=1, le=MAX_SERVICES, description="more are folded")] = 40,
    ) -> Annotated[CallToolResult, ResultModel("tools.pictures.mesh_model:MeshGraph")]:
        """Services (repositories), queues, streams and websocket outputs, folded to fit."""
        index = get_index_service(runtime)
        await refresh_with_progress(index, ctx)
        from tools.pictures.mesh_render import mesh_text
        from tools.pictures.service import visualize
        from tools.pictures.view import mesh_view

        graph = await anyio.to_thread.run_sync(visualize, index, format, service, max_services)
        return with_view(ctx, tool_result(graph, mesh_text(graph)), lambda: mesh_view(graph))

    server.add_resource(TextResource(
        uri=APP_URI, name="mesh-graph-app", title="mesh-mcp graph (MCP App)",
        description="Draws flow_map, trace and visualize_mesh results in hosts that render MCP Apps. Reads only.",
        mime_type=APP_MIME_TYPE, text=app_html(), annotations=Annotations(audience=["user"], priority=0.2),
        meta={"ui": {"csp": CSP_META, "prefersBorder": True}},
    ))
    for tool in registered_tools(server):
        if tool.name in APP_TOOLS:
            tool.meta = {**(tool.meta or {}), "ui": {"resourceUri": APP_URI}}
    extensions = getattr(getattr(server, "_lowlevel_server", None), "extensions", None)
    if isinstance(extensions, dict):  # advertise MCP Apps (SEP-2133 extension capability)
        extensions.setdefault(EXTENSION_ID, {})
