"""What ``tools/list`` costs a model's context, kept small without losing meaning.

The SDK advertises a tool's docstring as written (with the source's indentation) and pydantic's
generated ``title`` on every parameter ("Job Id" for ``job_id``) and on the argument model
("trace_jobArguments"), and on every field and model of an output schema. :func:`compact_listing`
dedents each description and drops those generated titles (a title written by hand is kept).
``bench/tools_list_size.py`` measures the result; docs/benchmarks.md records it (goal: input side
under 20 KB).
"""

from __future__ import annotations

import inspect
from typing import Any

from mcp.server.mcpserver import MCPServer


def _generated_title(name: str) -> str:
    """pydantic's default title of a field called ``name``."""
    return name.replace("_", " ").title()


def _drop_generated_titles(schema: Any) -> Any:
    """``schema`` without pydantic's generated titles, at every depth (``$defs`` included)."""
    if isinstance(schema, list):
        return [_drop_generated_titles(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _drop_generated_titles(v) for k, v in schema.items() if k not in ("properties", "$defs")}
    if isinstance(out.get("title"), str) and out["title"].endswith("Arguments"):
        del out["title"]
    if isinstance(schema.get("properties"), dict):
        out["properties"] = {
            name: _without_title(_drop_generated_titles(prop), _generated_title(name))
            for name, prop in schema["properties"].items()
        }
    if isinstance(schema.get("$defs"), dict):
        out["$defs"] = {name: _without_title(_drop_generated_titles(d), name) for name, d in schema["$defs"].items()}
    return out


def _without_title(schema: Any, generated: str) -> Any:
    if isinstance(schema, dict) and schema.get("title") == generated:
        return {k: v for k, v in schema.items() if k != "title"}
    return schema


def compact_listing(server: MCPServer) -> None:
    """Dedent every tool description; drop generated titles from every input and output schema."""
    for tool in server._tool_manager.list_tools():
        if tool.description:
            tool.description = inspect.cleandoc(tool.description)
        tool.parameters = _drop_generated_titles(tool.parameters)
        if tool.fn_metadata.output_schema is not None:
            tool.fn_metadata.output_schema = _drop_generated_titles(tool.fn_metadata.output_schema)
