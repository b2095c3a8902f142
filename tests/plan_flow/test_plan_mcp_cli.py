"""plan_flow through real MCP sessions (in process and over stdio) and ``mesh-mcp plan-flow``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from server.config import load_settings
from tests.helpers import REPO_ROOT, in_process_client, render_toml, stdio_client


@pytest.mark.anyio
async def test_plan_flow_tool_in_process(workspace: Path, tmp_path: Path) -> None:
    settings = load_settings(environ={}, overrides={"workspace": str(workspace), "state_dir": str(tmp_path / "s")})
    async with in_process_client(settings) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        tool = tools["plan_flow"]
        assert tool.annotations.read_only_hint is True and tool.annotations.destructive_hint is False
        assert sorted(tool.input_schema["required"]) == ["domain", "kind", "name"]
        result = await client.call_tool("plan_flow", {"kind": "job", "name": "RENEW_MEMBERSHIP", "domain": "member"})
        assert not result.is_error
        data = result.structured_content
        assert data["value"] == "member:renew-membership" and data["read_only"] is True
        text = result.content[0].text
        for phase in data["phases"]:
            for step in phase["steps"]:
                assert step["action"] in text
                if step["file"]:
                    assert step["file"] in text
                if step["mode"] in ("insert", "replace") and step["anchor"]:
                    assert step["anchor"] in text
        assert "STOP" in text and "yarn changeset add" in text and "mesh-mcp verify RENEW_MEMBERSHIP" in text
        assert text.index("== contracts") < text.index("STOP") < text.index("== workers")

        clash = await client.call_tool("plan_flow", {"kind": "job", "name": "SEND_DIGEST", "domain": "member"})
        assert (
            clash.is_error
            and "already exists (npm-packages/packages/messaging/src/jobs/member/member.jobs.ts:2"
            in clash.content[0].text
        )
        extra = await client.call_tool("plan_flow", {"kind": "job", "name": "X_Y", "domain": "member", "force": True})
        assert extra.is_error and "force" in extra.content[0].text
        bad = await client.call_tool("plan_flow", {"kind": "task", "name": "X_Y", "domain": "member"})
        assert bad.is_error


@pytest.mark.anyio
async def test_plan_flow_tool_over_stdio(workspace: Path, tmp_path: Path) -> None:
    config = tmp_path / "mesh.toml"
    config.write_text(render_toml({"workspace": str(workspace), "state_dir": str(tmp_path / "s")}), encoding="utf-8")
    async with stdio_client(config) as client:
        result = await client.call_tool(
            "plan_flow", {"kind": "job", "name": "ZIP_REPORT", "domain": "report", "queue": "EXPORTS"}
        )
        assert not result.is_error
        assert result.structured_content["queue"] == "report-export-queue"


def run_cli(*args: str, state: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MESH_")}
    env.update({"PYTHONPATH": str(REPO_ROOT), "MESH_STATE_DIR": str(state)})
    return subprocess.run(
        [sys.executable, "-m", "server.cli", *args], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def test_cli_plan_flow(workspace: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    out = run_cli("plan-flow", "job", "REFUND_ORDER", "--domain", "shop", "--workspace", str(workspace), state=state)
    assert out.returncode == 0, out.stderr
    assert "workers-runners/worker-shop/src/workers/handlers/refund-order.handler.ts" in out.stdout
    assert "return { originalPayload: job.data.payload };" in out.stdout
    js = run_cli(
        "plan-flow", "event", "ORDER_SHIPPED", "--domain", "shop", "--json", "--workspace", str(workspace), state=state
    )
    assert js.returncode == 0, js.stderr
    assert json.loads(js.stdout)["value"] == "shop.order.shipped"
    bad = run_cli("plan-flow", "job", "lower", "--domain", "shop", "--workspace", str(workspace), state=state)
    assert bad.returncode == 2 and "UPPER_SNAKE_CASE" in bad.stderr
    missing = run_cli("plan-flow", "job", "X_Y", "--workspace", str(workspace), state=state)
    assert missing.returncode == 2 and "--domain" in missing.stderr
