"""docs/what-your-agent-sees.md is generated (bench/what_your_agent_sees.py) and shows every detail tool."""

from __future__ import annotations

import re

import pytest

from bench.what_your_agent_sees import DOC, collect, render
from server.demo.calls import DETAIL_TOOLS, detail_calls
from server.demo.command import DemoRun
from tests.helpers import REPO_ROOT


@pytest.mark.anyio
async def test_the_page_is_rendered_from_real_calls(demo_run: DemoRun) -> None:
    results = await collect(demo_run.settings, detail_calls(demo_run.scenario))
    page = render(results, "today")
    for r in results:
        assert f"## {r['tool']}" in page
        assert r["summary"]["detail"] == "summary" and "detail" not in r["full"]
        assert r["text"] in page  # the text a client gets, verbatim
    assert page.count("<code>detail=\"full\"</code>") == len(results) == len(DETAIL_TOOLS)


def test_the_committed_page_covers_every_detail_tool_and_is_linked() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert text.startswith("# What your agent sees")
    assert re.findall(r"^## (\w+)$", text, flags=re.M) == list(DETAIL_TOOLS)
    for tool in DETAIL_TOOLS:  # both shapes, with their sizes
        section = text.split(f"## {tool}\n", 1)[1].split("\n## ", 1)[0]
        assert re.search(r'`detail="summary"` \(default\), \d+ bytes', section), tool
        assert re.search(r"<code>detail=\"full\"</code>, \d+ bytes", section), tool
        summary = int(re.search(r'`detail="summary"` \(default\), (\d+) bytes', section).group(1))
        assert summary <= 4096, tool
    assert "docs/what-your-agent-sees.md" in (REPO_ROOT / "README.md").read_text(encoding="utf-8")
