"""Helpers every MCP tool adapter uses: results, annotations, error translation.

Tool adapters stay thin: validate flat arguments (``Annotated[..., Field()]``), call a
plain library function, and return :func:`tool_result` (structured content from a
pydantic model plus a short human-readable text). They declare that model by path,
``-> Annotated[CallToolResult, ResultModel("pkg.module:Model")]``, and import the library inside
the tool body, so that a server start does not import either (:mod:`server.output_models`).
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import ParamSpec, TypeVar

from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel

from server.errors import MeshError
from server.text_safety import visible

log = logging.getLogger("mesh.tools")

P = ParamSpec("P")
R = TypeVar("R")

READ_ONLY_LOCAL = ToolAnnotations(
    readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=False
)
"""A tool that only reads the local workspace."""

READ_ONLY_REMOTE = ToolAnnotations(
    readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=True
)
"""A tool that only reads databases or Redis (external systems)."""

PLANS_ONLY = ToolAnnotations(
    readOnlyHint=True, destructiveHint=False, idempotentHint=False, openWorldHint=True
)
"""Reads external systems and writes only a new local plan file each call (so not idempotent)."""

DESTRUCTIVE_REMOTE = ToolAnnotations(
    readOnlyHint=False, destructiveHint=True, idempotentHint=False, openWorldHint=True
)
"""A tool that changes external systems (remediation)."""


def tool_result(model: BaseModel, text: str) -> CallToolResult:
    """Structured content from ``model`` plus ``text`` for humans and models. The text's control
    characters (from the workspace, a database, Redis) are shown as ``\\uXXXX``, never passed to a
    client that may print them in a terminal (:func:`server.text_safety.visible`)."""
    return CallToolResult(
        content=[TextContent(type="text", text=visible(text))],
        structured_content=model.model_dump(mode="json"),
    )


def annotate(**hints: object) -> Callable[[Callable[P, Awaitable[R]]], Callable[P, Awaitable[R]]]:
    """Give parameters annotations built at registration time (bounds read from the settings).

    Modules use postponed annotations, which the SDK evaluates in the module's globals; a bound
    that depends on ``runtime.settings`` is set here instead, innermost under ``@mesh_tool``.
    """

    def decorate(fn: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
        fn.__annotations__.update(hints)
        return fn

    return decorate


def mesh_tool(fn: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    """Wrap an async tool: anticipated errors become tool errors, crashes a short message.

    A ``MeshError`` keeps its message (it says what was wrong and what to do). Any other
    exception is logged with its traceback on stderr and reported as one line naming the
    exception type, never a stack trace.
    """
    if not inspect.iscoroutinefunction(fn):
        raise TypeError("mesh_tool wraps async functions")

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await fn(*args, **kwargs)
        except ToolError:
            raise
        except MeshError as exc:
            raise ToolError(visible(str(exc))) from None
        except Exception as exc:
            log.exception("tool %s crashed", fn.__name__)
            raise ToolError(
                f"internal error ({type(exc).__name__}: {visible(str(exc)[:300])}); the server log on stderr has "
                "details"
            ) from None

    return wrapper

