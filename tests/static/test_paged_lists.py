"""list_catalogue and lint_flows answer one page by default (a whole catalogue filled a model's context:
65 KB of structured content on a real workspace); the page says how many there are and where the next
one starts, in the structured content and in the text."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import FIXTURES, in_process_client

pytestmark = pytest.mark.anyio


@pytest.fixture
def settings(make_settings, workspace: Path):
    return make_settings(workspace=str(workspace))


async def test_the_catalogue_is_paged_and_the_pages_add_up_to_the_whole(settings) -> None:
    async with in_process_client(settings) as client:
        whole = (await client.call_tool("list_catalogue", {"limit": 1000})).structured_content
        values = [(e["kind"], e["value"]) for e in whole["entries"]]
        assert len(values) > 3 and whole["page"] == {"total": len(values), "offset": 0, "shown": len(values),
                                                      "next_offset": None}
        seen, offset = [], 0
        while offset is not None:
            result = await client.call_tool("list_catalogue", {"limit": 3, "offset": offset})
            page = result.structured_content["page"]
            seen += [(e["kind"], e["value"]) for e in result.structured_content["entries"]]
            if page["next_offset"] is not None:
                assert f"call again with offset={page['next_offset']}" in result.content[0].text
            offset = page["next_offset"]
        assert seen == values
        # the counts still describe the whole catalogue
        assert sum(result.structured_content["counts"].values()) == len(values)


async def test_a_default_catalogue_answer_holds_at_most_fifty_entries(make_settings, tmp_path: Path) -> None:
    from bench.gen_workspace import generate

    generate(tmp_path / "big", 800)
    async with in_process_client(make_settings(workspace=str(tmp_path / "big"))) as client:
        result = await client.call_tool("list_catalogue", {})
    page = result.structured_content["page"]
    assert page["total"] > 50 and page["shown"] == len(result.structured_content["entries"]) == 50
    assert page["next_offset"] == 50


async def test_lint_flows_is_paged(make_settings, tmp_path: Path) -> None:
    from tests.helpers import copy_workspace

    ws = copy_workspace(FIXTURES / "lint_workspace", tmp_path / "ws")
    async with in_process_client(make_settings(workspace=str(ws))) as client:
        whole = (await client.call_tool("lint_flows", {"min_severity": "info", "limit": 1000})).structured_content
        first = await client.call_tool("lint_flows", {"min_severity": "info", "limit": 2})
    assert whole["summary"]["total"] > 2
    assert first.structured_content["findings"] == whole["findings"][:2]
    assert first.structured_content["summary"] == whole["summary"]  # totals are of every finding
    assert first.structured_content["page"]["next_offset"] == 2 and "offset=2" in first.content[0].text


@pytest.mark.parametrize("args", [{"limit": 0}, {"limit": 1001}, {"offset": -1}])
async def test_bad_pages_are_refused(settings, args) -> None:
    async with in_process_client(settings) as client:
        result = await client.call_tool("list_catalogue", args)
    assert result.is_error
