"""The registered tools of an :class:`MCPServer`, as the SDK's own ``Tool`` objects.

``MCPServer`` has no public accessor for them: ``list_tools()`` returns the protocol's
``Tool`` (name, schemas, title), not the registered ``mcp.server.mcpserver.tools.Tool``
whose argument model :mod:`server.strict_args` hardens and whose title
:mod:`server.tool_titles` fills. This module is the only place that reaches into the
SDK's private tool manager, so an SDK change breaks here, loudly, and nowhere else.
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.tools import Tool


def registered_tools(server: MCPServer) -> list[Tool]:
    """Every tool registered on ``server`` (the SDK's objects, which may be changed in place)."""
    manager = getattr(server, "_tool_manager", None)
    if manager is None:
        raise RuntimeError("this mcp SDK has no MCPServer._tool_manager: update server/sdk_tools.py for it")
    return list(manager.list_tools())


def registered_tool(server: MCPServer, name: str) -> Tool:
    """The registered tool called ``name`` (KeyError when there is none)."""
    for tool in registered_tools(server):
        if tool.name == name:
            return tool
    raise KeyError(f"{name} is not registered")
