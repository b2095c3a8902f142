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
