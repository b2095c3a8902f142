"""What tools/list costs a model: input side under the goal, descriptions dedented, no generated titles."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from bench.tools_list_size import INPUT_SIDE_GOAL, sizes
from server.config import Settings
from tests.helpers import in_process_client

pytestmark = pytest.mark.anyio


async def test_input_side_of_tools_list_is_under_the_goal() -> None:
    rows = await sizes(remediation=False)
    total = sum(input_side for _, input_side, _ in rows)
    assert total < INPUT_SIDE_GOAL, sorted(rows, key=lambda r: -r[1])[:5]


async def test_descriptions_are_dedented_and_schemas_carry_no_generated_titles(
    make_settings: Callable[..., Settings],
) -> None:
    async with in_process_client(make_settings(enable_remediation=True)) as client:
        tools = (await client.list_tools()).tools
    for tool in tools:
        assert tool.description and tool.description == tool.description.strip(), tool.name
        assert not any(line.startswith(" ") for line in tool.description.splitlines()), tool.name
        assert "title" not in tool.input_schema, tool.name
        for name, prop in tool.input_schema["properties"].items():
            assert prop.get("title") != name.replace("_", " ").title(), (tool.name, name)
            assert prop.get("description"), (tool.name, name)  # every parameter says what it is
        text = json.dumps(tool.output_schema or {})
        assert '"title": "Job Id"' not in text and '"title": "Plan Id"' not in text, tool.name


def test_an_optional_parameter_written_as_a_nullable_type_accepts_the_same_values() -> None:
    """The compact listing writes ``anyOf: [{"type": "string", ...}, {"type": "null"}]`` as
    ``{"type": ["string", "null"], ...}``: both schemas accept and refuse the same values."""
    import jsonschema

    from server.tool_listing import _nullable_in_place

    originals = [
        {"anyOf": [{"type": "string", "minLength": 1, "maxLength": 3}, {"type": "null"}], "default": None},
        {"anyOf": [{"type": "integer", "minimum": 0, "maximum": 5}, {"type": "null"}], "description": "n"},
        {"anyOf": [{"type": "array", "items": {"type": "string", "maxLength": 2}, "maxItems": 2}, {"type": "null"}]},
    ]
    values = [None, "", "a", "abcd", 0, 5, 6, -1, 2.5, True, [], ["ab"], ["abc"], ["a", "b", "c"], {}]
    for original in originals:
        compact = _nullable_in_place(original)
        assert "anyOf" not in compact and "null" in compact["type"], compact
        for value in values:
            assert jsonschema.Draft202012Validator(original).is_valid(value) == \
                jsonschema.Draft202012Validator(compact).is_valid(value), (original, value)
    # an anyOf of two real types, or one whose branch has keywords of its own at the top, is left alone
    kept = {"anyOf": [{"type": "string"}, {"type": "integer"}]}
    assert _nullable_in_place(kept) == kept
    enum = {"anyOf": [{"enum": ["a", "b"], "type": "string"}, {"type": "null"}]}
    assert _nullable_in_place(enum) == enum


async def test_the_whole_listing_stays_under_40_kb() -> None:
    """tools/list is sent at every connect: 175 KB before (150 KB of output schemas). Every tool, present and
    future, gets an outline of its result (server.tool_listing.compact_listing), not the full schema."""
    from bench.tools_list_size import WHOLE_LISTING_LIMIT, whole_listing_bytes

    whole, count = await whole_listing_bytes(remediation=True)
    assert whole < WHOLE_LISTING_LIMIT, (whole, count)


async def test_every_output_schema_is_an_outline_that_real_results_satisfy(
    make_settings: Callable[..., Settings], redis_url: str,
) -> None:
    import jsonschema

    async with in_process_client(make_settings(enable_remediation=True, redis={"url": redis_url})) as client:
        tools = (await client.list_tools()).tools
        results = {name: await client.call_tool(name, arguments) for name, arguments in (
            ("server_info", {}), ("list_streams", {}), ("list_queues", {}))}
    for tool in tools:
        schema = tool.output_schema
        assert schema is not None and "$defs" not in schema and "$ref" not in json.dumps(schema), tool.name
        for prop in schema.get("properties", {}).values():  # one level: field names, enum codes
            assert set(prop) <= {"enum"}, (tool.name, prop)
    by_name = {tool.name: tool for tool in tools}
    for name, result in results.items():
        assert not result.is_error, (name, result.content)
        jsonschema.validate(result.structured_content, by_name[name].output_schema)
