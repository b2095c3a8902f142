"""``mesh-mcp demo --serve``: an MCP client connects over stdio to the seeded data."""

from __future__ import annotations

import sys

import pytest

from tests.demo.test_demo import clean_env
from tests.helpers import REPO_ROOT

pytestmark = pytest.mark.anyio


async def test_demo_serve_over_stdio_keeps_stdout_for_mcp() -> None:
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(
        command=sys.executable, args=["-m", "server.cli", "demo", "--serve"], env=clean_env(), cwd=str(REPO_ROOT)
    )
    async with Client(params, cache=None, read_timeout_seconds=90) as client:
        tools = {tool.name for tool in (await client.list_tools()).tools}
        assert {"outbox_health", "trace_job", "inspect_stream", "server_info"} <= tools
        info = await client.call_tool("server_info", {})
        assert info.structured_content["mode"] == "remediation"
        assert info.structured_content["services"] == ["event"]
        health = await client.call_tool("outbox_health", {"service": "event"})
        assert not health.is_error, health.content
        codes = {v["code"] for s in health.structured_content["services"] for v in s["verdicts"]}
        assert {"pending_in_outbox", "stuck_processing"} <= codes
        skill = await client.read_resource("skill://remediate-async-failures")
        assert "dlq_replay" in skill.contents[0].text
