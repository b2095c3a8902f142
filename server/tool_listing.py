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


def _without_null_defaults(parameters: Any) -> Any:
    """An optional parameter's ``"default": null`` dropped: leaving it out is the same call."""
    if not isinstance(parameters, dict) or not isinstance(parameters.get("properties"), dict):
        return parameters
    required = set(parameters.get("required") or ())
    props = {name: ({k: v for k, v in p.items() if k != "default"}
                    if isinstance(p, dict) and name not in required and "default" in p and p["default"] is None
                    else p)
             for name, p in parameters["properties"].items()}
    return {**parameters, "properties": props}


def _without_title(schema: Any, generated: str) -> Any:
    if isinstance(schema, dict) and schema.get("title") == generated:
        return {k: v for k, v in schema.items() if k != "title"}
    return schema


def _resolve(node: Any, defs: dict[str, Any]) -> Any:
    """``node`` with its ``$ref`` (into ``$defs``) followed, a bounded number of times."""
    for _ in range(8):
        if not (isinstance(node, dict) and isinstance(node.get("$ref"), str)):
            break
        node = defs.get(node["$ref"].rsplit("/", 1)[-1], {})
    return node


def _outline_leaf(node: Any, defs: dict[str, Any]) -> dict[str, Any]:
    """A property of a result as its JSON type only (an object or list is not expanded; an enum is kept)."""
    node = _resolve(node, defs)
    if not isinstance(node, dict):
        return {}
    if isinstance(node.get("enum"), list):
        return {"enum": node["enum"]}  # the codes a result can hold (verdicts, severities): worth their bytes
    return {}


def _outline_object(node: Any, defs: dict[str, Any]) -> dict[str, Any]:
    node = _resolve(node, defs)
    if isinstance(node, dict) and isinstance(node.get("anyOf"), list) and "properties" not in node:
        return _merged([_outline_object(branch, defs) for branch in node["anyOf"]])
    if not isinstance(node, dict) or not isinstance(node.get("properties"), dict):
        return {"type": "object"}
    out: dict[str, Any] = {"type": "object",
                           "properties": {name: _outline_leaf(p, defs) for name, p in node["properties"].items()}}
    if node.get("required"):
        out["required"] = list(node["required"])
    return out


def _merged(branches: list[dict[str, Any]]) -> dict[str, Any]:
    """One outline accepting what any branch accepts (the full and the summary shape of a ``detail`` tool):
    every field of any branch, its types joined; required only what every branch requires."""
    properties: dict[str, Any] = {}
    for branch in branches:
        for name, prop in branch.get("properties", {}).items():
            seen = properties.setdefault(name, prop)
            if seen != prop:
                properties[name] = {}  # two shapes: accept either
    required = [r for r in branches[0].get("required", []) if all(r in b.get("required", []) for b in branches)]
    out: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        out["required"] = required
    return out


def outline_output_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The output schema a client is sent: the names of the result's top-level fields, the required ones,
    and the codes of enum fields (the full and summary shapes of a ``detail`` tool merged); no nested
    model, no type, no description.

    The full schemas of every result were 80% of ``tools/list`` (150 KB sent at every connect, 175 KB in
    all); the fields are described in each tool's description and text. Structured content still
    validates against this outline (it only drops constraints). Applied to every tool, present and
    future, by :func:`compact_listing` (test: tests/foundation/test_tool_listing.py).
    """
    return _outline_object(schema, schema.get("$defs") or {})


def listed_output_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """What :func:`compact_listing` makes of a generated output schema."""
    return outline_output_schema(_drop_generated_titles(schema))


def compact_listing(server: MCPServer) -> None:
    """Dedent every tool description; drop generated titles from every input schema; write optional input
    parameters as nullable types; list every output schema as its outline."""
    for tool in registered_tools(server):
        if tool.description:
            tool.description = inspect.cleandoc(tool.description)
        tool.parameters = _without_null_defaults(_nullable_in_place(_drop_generated_titles(tool.parameters)))
        if tool.fn_metadata.output_schema is not None:
            tool.fn_metadata.output_schema = listed_output_schema(tool.fn_metadata.output_schema)
