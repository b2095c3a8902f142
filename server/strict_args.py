"""Tool arguments as strict as the schemas say: unknown names refused, no type coercion.

The SDK builds each tool's argument model from its signature with pydantic's defaults: unknown
arguments are ignored and ``"1"`` or ``true`` pass for an integer. :func:`harden_tools` swaps in
a subclass of each model that forbids extra keys and validates strictly, and writes
``additionalProperties: false`` into the advertised input schema, so what a client reads is
what the server enforces. (JSON text standing for a list or object, which some clients send,
is still decoded first by the SDK.)
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer
from pydantic import ConfigDict

from server.sdk_tools import registered_tools


def harden_tools(server: MCPServer) -> None:
    """Make every registered tool refuse unknown arguments and coerced types."""
    for tool in registered_tools(server):
        base = tool.fn_metadata.arg_model
        if getattr(base, "__mesh_strict__", False):
            continue
        strict = type(
            base.__name__,
            (base,),
            {
                "__module__": base.__module__,
                "__mesh_strict__": True,
                "model_config": ConfigDict(**{**base.model_config, "extra": "forbid", "strict": True}),
            },
        )
        tool.fn_metadata.arg_model = strict
        tool.parameters = {**tool.parameters, "additionalProperties": False}
