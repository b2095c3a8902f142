"""The registered tools of an :class:`MCPServer`, as the SDK's own ``Tool`` objects.

``MCPServer`` has no public accessor for them: ``list_tools()`` returns the protocol's
``Tool`` (name, schemas, title), not the registered ``mcp.server.mcpserver.tools.Tool``
whose argument model :mod:`server.strict_args` hardens and whose title
:mod:`server.tool_titles` fills. This module is the only place that reaches into the
SDK's private tool manager, so an SDK change breaks here, loudly, and nowhere else.
It also registers a tool whose output schema is already known (:mod:`server.schema_cache`)
without having the SDK generate it again, and a tool whose result model is named by path
(:mod:`server.output_models`), loaded on its first call.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Annotated, Any, get_args, get_origin

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.tools import Tool
from mcp.server.mcpserver.utilities.func_metadata import FuncMetadata
from mcp.types import CallToolResult
from pydantic import BaseModel

from server.output_models import ResultModel, loaded


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


def declared_output_model(fn: Callable[..., Any]) -> type[BaseModel] | ResultModel | None:
    """``Model`` when ``fn`` returns ``Annotated[CallToolResult, Model]`` (how every mesh tool is
    written, see :func:`server.toolkit.tool_result`; ``Model`` may be a :class:`ResultModel`), else None.

    For that form the SDK's ``func_metadata`` validates results against ``Model`` itself, unwrapped
    (``_create_output_model``: a BaseModel is used directly); ``tests/foundation/test_schema_cache.py``
    checks that the tools registered by :func:`add_tool_with_output_schema` match the SDK's own.
    """
    try:
        annotation = inspect.signature(fn, eval_str=True).return_annotation
    except (NameError, TypeError, ValueError):
        return None
    if get_origin(annotation) is not Annotated:
        return None
    base, *metadata = get_args(annotation)
    if not (isinstance(base, type) and issubclass(base, CallToolResult)) or len(metadata) != 1:
        return None
    model = metadata[0]
    if isinstance(model, ResultModel):
        return model
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


def add_tool_with_output_schema(
    server: MCPServer, fn: Callable[..., Any], output_schema: dict[str, Any] | None, **kwargs: Any
) -> bool:
    """Register ``fn`` as the SDK would, but with ``output_schema`` given instead of generated.

    The argument model and the input schema are the SDK's (``structured_output=False`` skips
    only the output side); the output model is the one ``fn`` declares, so results are validated
    exactly as before. ``output_schema`` None: generated from the (loaded) model by the SDK's
    ``FuncMetadata``, as its ``func_metadata`` does for ``Annotated[CallToolResult, Model]``. False,
    and nothing registered, when ``fn``'s return annotation is not of the form
    :func:`declared_output_model` reads (register it the SDK's way then).
    """
    model = declared_output_model(fn)
    if model is None or kwargs.pop("structured_output", None) is not None:
        return False
    server._tool_manager.add_tool(fn, structured_output=False, **kwargs)
    tool = registered_tool(server, kwargs.get("name") or fn.__name__)
    arg_model = tool.fn_metadata.arg_model
    if output_schema is None:
        output_schema = FuncMetadata(arg_model=arg_model, output_model=loaded(model)).output_schema
    tool.fn_metadata = FuncMetadata(
        arg_model=arg_model, output_model=model, output_schema=output_schema, wrap_output=False
    )
    return True


def load_output_model(server: MCPServer, name: str) -> None:
    """Before ``name``'s call: swap the :class:`ResultModel` it was registered with for the class(es)."""
    tool = server._tool_manager.get_tool(name)
    if tool is not None and isinstance(tool.fn_metadata.output_model, ResultModel):
        tool.fn_metadata.output_model = tool.fn_metadata.output_model.load()


def set_output(server: MCPServer, name: str, output_model: Any, schema: Callable[[], dict[str, Any]],
               *, keep_schema: bool = False) -> None:
    """Validate ``name``'s results against ``output_model``; advertise ``schema()`` (not called
    when ``keep_schema``: the schema registered with the tool already is that one, from the cache)."""
    metadata = registered_tool(server, name).fn_metadata
    metadata.output_model = output_model
    if not keep_schema:
        metadata.output_schema = schema()
