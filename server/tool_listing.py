"""What ``tools/list`` costs a model's context, kept small without losing meaning.

The SDK advertises a tool's docstring as written (with the source's indentation) and pydantic's
generated ``title`` on every parameter ("Job Id" for ``job_id``) and on the argument model
("trace_jobArguments"), and on every field and model of an output schema. :func:`compact_listing`
dedents each description and drops those generated titles (a title written by hand is kept), and
writes an optional parameter's ``anyOf: [{"type": "string", ...}, {"type": "null"}]`` as the
equivalent ``{"type": ["string", "null"], ...}`` (JSON Schema applies ``maxLength`` and the other
keywords of one type only to values of that type, so both accept exactly the same values).
``bench/tools_list_size.py`` measures the result; docs/benchmarks.md records it (goal: input side
under 20 KB).
"""

from __future__ import annotations

import inspect
from typing import Any

from mcp.server.mcpserver import MCPServer

from server.sdk_tools import registered_tools


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


def _nullable_in_place(schema: Any) -> Any:
    """``anyOf: [{"type": T, ...}, {"type": "null"}]`` as ``{"type": [T, "null"], ...}``, at every depth.

    Only when the non-null branch has a single ``type`` and no ``anyOf``/``$ref`` of its own: the
    keywords it carries (``maxLength``, ``items``, ``maximum``...) constrain values of type ``T``
    only, so the collapsed schema accepts exactly what the ``anyOf`` did.
    """
    if isinstance(schema, list):
        return [_nullable_in_place(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _nullable_in_place(v) for k, v in schema.items()}
    branches = out.get("anyOf")
    if isinstance(branches, list) and len(branches) == 2 and {"type": "null"} in branches:
        other = branches[0] if branches[1] == {"type": "null"} else branches[1]
        if (isinstance(other, dict) and isinstance(other.get("type"), str)
                and not {"anyOf", "oneOf", "allOf", "$ref", "enum", "const"} & other.keys()
                and not other.keys() & (out.keys() - {"anyOf"})):
            rest = {k: v for k, v in out.items() if k != "anyOf"}
            return {**other, "type": [other["type"], "null"], **rest}
    return out


def _without_title(schema: Any, generated: str) -> Any:
    if isinstance(schema, dict) and schema.get("title") == generated:
        return {k: v for k, v in schema.items() if k != "title"}
    return schema


def compact_listing(server: MCPServer) -> None:
    """Dedent every tool description; drop generated titles from every input and output schema; write
    optional input parameters as nullable types."""
    for tool in registered_tools(server):
        if tool.description:
            tool.description = inspect.cleandoc(tool.description)
        tool.parameters = _nullable_in_place(_drop_generated_titles(tool.parameters))
        if tool.fn_metadata.output_schema is not None:
            tool.fn_metadata.output_schema = _drop_generated_titles(tool.fn_metadata.output_schema)
