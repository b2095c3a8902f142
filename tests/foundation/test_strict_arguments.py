"""Every tool's schema says what the server enforces: unknown arguments and coerced types are refused.

Walks every tool of a server with remediation enabled (so apply_remediation is included) through
a real in-process MCP session; a new tool is covered without changing this file.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.helpers import in_process_client

pytestmark = pytest.mark.anyio


def _options(prop: dict[str, Any]) -> list[dict[str, Any]]:
    """The alternatives a parameter's schema accepts: its ``anyOf``, or one per type of a
    ``"type": [T, "null"]`` (the compact listing's form of an optional parameter), or itself."""
    if "anyOf" in prop:
        return prop["anyOf"]
    if isinstance(prop.get("type"), list):
        return [{**prop, "type": kind} if kind != "null" else {"type": "null"} for kind in prop["type"]]
    return [prop]


def _minimal_arguments(schema: dict[str, Any]) -> dict[str, Any]:
    """Valid-looking values for the required parameters (validation is all these tests reach)."""
    out: dict[str, Any] = {}
    for name in schema.get("required", []):
        prop = schema["properties"][name]
        options = _options(prop)
        first = next((o for o in options if o.get("type") != "null"), prop)
        if "enum" in first:
            out[name] = first["enum"][0]
        elif first.get("type") == "integer":
            out[name] = max(1, first.get("minimum", 1))
        elif first.get("type") == "boolean":
            out[name] = False
        elif first.get("type") == "array":
            out[name] = []
        else:
            out[name] = "x" * max(1, first.get("minLength", 1))
    return out


async def test_every_tool_advertises_and_enforces_no_extra_arguments(make_settings: Callable[..., Any]) -> None:
    async with in_process_client(make_settings(enable_remediation=True)) as client:
        tools = (await client.list_tools()).tools
        assert len(tools) >= 15
        for tool in tools:
            assert tool.input_schema.get("additionalProperties") is False, tool.name
            args = {**_minimal_arguments(tool.input_schema), "no_such_argument": 1}
            result = await client.call_tool(tool.name, args)
            assert result.is_error, f"{tool.name} accepted an unknown argument"
            assert f"'no_such_argument' is not a parameter of {tool.name}" in result.content[0].text, (
                tool.name, result.content[0].text)


async def test_integers_and_booleans_are_not_coerced(make_settings: Callable[..., Any]) -> None:
    async with in_process_client(make_settings()) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        checked = 0
        for tool in tools.values():
            for name, prop in tool.input_schema.get("properties", {}).items():
                kinds = {o.get("type") for o in _options(prop)}
                base = _minimal_arguments(tool.input_schema)
                if "integer" in kinds and "string" not in kinds:
                    for bad in ("1", True):
                        result = await client.call_tool(tool.name, {**base, name: bad})
                        assert result.is_error, f"{tool.name}.{name} accepted {bad!r}"
                        assert f"'{name}'" in result.content[0].text
                    checked += 1
                if "boolean" in kinds and "string" not in kinds:
                    for bad in ("true", 1):
                        result = await client.call_tool(tool.name, {**base, name: bad})
                        assert result.is_error, f"{tool.name}.{name} accepted {bad!r}"
                    checked += 1
        assert checked >= 10, "the walk must reach the integer and boolean parameters"


async def test_a_well_formed_call_still_works(make_settings: Callable[..., Any]) -> None:
    async with in_process_client(make_settings()) as client:
        result = await client.call_tool("server_info", {})
    assert not result.is_error


async def test_advertised_integer_bounds_are_the_enforced_ones(
    make_settings: Callable[..., Any], redis_url: str
) -> None:
    """At each advertised minimum/maximum a call passes validation (the library agrees); one past, it is refused."""
    async with in_process_client(make_settings(redis={"url": redis_url})) as client:
        checked = []
        for tool in (await client.list_tools()).tools:
            base = _minimal_arguments(tool.input_schema)
            for name, prop in tool.input_schema.get("properties", {}).items():
                option = next((o for o in _options(prop) if o.get("type") == "integer"), None)
                if option is None:
                    continue
                for bound, past in (("maximum", 1), ("minimum", -1)):
                    if bound not in option:
                        continue
                    edge = option[bound]
                    at = await client.call_tool(tool.name, {**base, name: edge})
                    text = at.content[0].text if at.content else ""
                    assert "invalid arguments" not in text and "must be between" not in text, (tool.name, name, text)
                    beyond = await client.call_tool(tool.name, {**base, name: edge + past})
                    assert beyond.is_error and f"'{name}'" in beyond.content[0].text, (tool.name, name, edge + past)
                    checked.append(f"{tool.name}.{name}.{bound}")
        assert any(c.startswith("list_pending.count.maximum") for c in checked), checked
        assert any(c.startswith("dlq_list.count.maximum") for c in checked), checked


def _edges(prop: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """(bound, a value at the bound the schema accepts, the value one past it) for one parameter."""
    out: list[tuple[str, Any, Any]] = []
    for option in _options(prop):
        kind = option.get("type")
        if kind == "number":
            for bound, past in (("maximum", 1), ("minimum", -1)):
                if bound in option:
                    out.append((bound, option[bound], option[bound] + past))
            if "exclusiveMinimum" in option:  # just inside is accepted, the bound itself is not
                out.append(("exclusiveMinimum", option["exclusiveMinimum"] + 0.5, option["exclusiveMinimum"]))
            if "exclusiveMaximum" in option:
                out.append(("exclusiveMaximum", option["exclusiveMaximum"] - 0.5, option["exclusiveMaximum"]))
        elif kind == "string" and "enum" not in option:
            if "maxLength" in option:
                out.append(("maxLength", "x" * option["maxLength"], "x" * (option["maxLength"] + 1)))
            if option.get("minLength", 0) >= 1:
                out.append(("minLength", "x" * option["minLength"], "x" * (option["minLength"] - 1)))
        elif kind == "array":
            item = _minimal_arguments({"required": ["v"], "properties": {"v": option.get("items", {})}})["v"]
            if "maxItems" in option:
                out.append(("maxItems", [item] * option["maxItems"], [item] * (option["maxItems"] + 1)))
            if option.get("minItems", 0) >= 1:
                out.append(("minItems", [item] * option["minItems"], [item] * (option["minItems"] - 1)))
    return out


async def test_advertised_number_length_and_size_bounds_are_the_enforced_ones(
    make_settings: Callable[..., Any], redis_url: str
) -> None:
    """Floats, string lengths and list sizes of every tool: accepted at the advertised bound, refused one past."""
    async with in_process_client(make_settings(redis={"url": redis_url}, enable_remediation=True)) as client:
        checked = []
        for tool in (await client.list_tools()).tools:
            base = _minimal_arguments(tool.input_schema)
            for name, prop in tool.input_schema.get("properties", {}).items():
                for bound, at_value, past_value in _edges(prop):
                    at = await client.call_tool(tool.name, {**base, name: at_value})
                    text = at.content[0].text if at.content else ""
                    assert "invalid arguments" not in text, (tool.name, name, bound, text[:300])
                    beyond = await client.call_tool(tool.name, {**base, name: past_value})
                    assert beyond.is_error and "invalid arguments" in beyond.content[0].text, (tool.name, name, bound)
                    assert f"'{name}" in beyond.content[0].text, (tool.name, name, beyond.content[0].text[:300])
                    checked.append(f"{tool.name}.{name}.{bound}")
        for expected in ("trace_request.since_s.exclusiveMinimum", "trace_request.services.maxItems",
                         "query_outbox.older_than_s.maximum", "trace_job.job_id.maxLength",
                         "propose_remediation.ids.maxItems", "inspect_stream.stream.minLength"):
            assert expected in checked, checked
