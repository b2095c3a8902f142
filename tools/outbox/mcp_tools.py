"""MCP adapters of tools.outbox (placeholder until the capability lands)."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

from server.runtime import Runtime


def register(server: MCPServer, runtime: Runtime) -> None:
    """Register this capability's tools on ``server``."""
