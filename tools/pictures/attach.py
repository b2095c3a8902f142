"""Attach the MCP App's view to a tool result, for clients that render MCP Apps only."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mcp.server.apps import client_supports_apps
from mcp.types import CallToolResult

from tools.pictures.view import VIEW_META_KEY


def with_view(ctx: Any, result: CallToolResult, view: Callable[[], dict[str, Any]]) -> CallToolResult:
    """``result`` with the app's view in its ``_meta`` when the client negotiated MCP Apps; else unchanged
    (the text and structured content are never touched)."""
    if ctx is not None and not result.is_error and client_supports_apps(ctx):
        result.meta = {**(result.meta or {}), VIEW_META_KEY: view()}
    return result
