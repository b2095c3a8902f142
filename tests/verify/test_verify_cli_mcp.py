"""``mesh-mcp verify`` (a real subprocess) and the verify_flow tool through real MCP clients."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from server.config import load_settings
from tests.helpers import REPO_ROOT, in_process_client, render_toml, stdio_client


def run_cli(*args: str, state: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MESH_")}
    env.update({"PYTHONPATH": str(REPO_ROOT), "MESH_STATE_DIR": str(state)})
    return subprocess.run(
        [sys.executable, "-m", "server.cli", *args],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_cli_verify_all_table_and_exit_status(workspace: Path, tmp_path: Path) -> None:
    result = run_cli("verify", "--all", "--workspace", str(workspace), state=tmp_path / "state")
    assert result.returncode == 1, result.stderr
    lines = result.stdout.splitlines()
    header = next(line for line in lines if line.startswith("job type"))
    assert header.split() == [
        "job", "type", "decl", "merged", "registry", "queue", "producer", "outbox", "handler", "routed",
        "q-match", "returns", "envelope", "errors", "provided",
    ]
    row = next(line for line in lines if line.startswith("ShopJobType.SHIP_ORDER ")).split()
    assert row[1:] == ["ok"] * 13
    row = next(line for line in lines if line.startswith("ShopJobType.RESTOCK_ITEM ")).split()
    assert row[1:] == ["ok"] * 10 + ["FAIL", "ok", "ok"]
    row = next(line for line in lines if line.startswith("ShopJobType.PRICE_UPDATE ")).split()
    assert row.count("?") == 2 and "FAIL" not in row
    event_header = next(line for line in lines if line.startswith("event type"))
    assert event_header.split()[2:] == ["decl", "producer", "in_tx", "consumer", "accepts"]
    row = next(line for line in lines if line.startswith("ShopEventType.ORDER_CANCELLED ")).split()
    assert row[1:] == ["ok", "ok", "ok", "ok", "FAIL"]
    assert "14 flow(s): 10 with a failing check, 1 incomplete (?), 3 ok." in result.stdout


def test_cli_verify_one_target(workspace: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    good = run_cli("verify", "SHIP_ORDER", "--workspace", str(workspace), state=state)
    assert good.returncode == 0, good.stderr
    assert "ok: 13 pass, 0 fail, 0 unknown of 13" in good.stdout

    bad = run_cli("verify", "REFUND_ORDER", "--workspace", str(workspace), state=state)
    assert bad.returncode == 1
    assert "FAIL queue_matches_target: pushed to 'returns-queue'" in bad.stdout
    assert "at ms-shop/src/modules/refund/refund.service.ts:14" in bad.stdout
    assert "fix: Set the producer's target" in bad.stdout

    dynamic = run_cli("verify", "PRICE_UPDATE", "--json", "--workspace", str(workspace), state=state)
    assert dynamic.returncode == 0, dynamic.stderr
    report = json.loads(dynamic.stdout)
    assert report["summary"]["verdict"] == "incomplete"
    assert {c["id"]: c["status"] for c in report["checks"]}["queue_matches_target"] == "unknown"


def test_cli_verify_all_json_and_errors(workspace: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    result = run_cli("verify", "--all", "--json", "--workspace", str(workspace), state=state)
    assert result.returncode == 1
    report = json.loads(result.stdout)
    assert report["failed_flows"] == 10 and len(report["flows"]) == 14

    usage = run_cli("verify", "--workspace", str(workspace), state=state)
    assert usage.returncode == 2 and "TARGET" in usage.stderr and usage.stdout == ""
    unknown = run_cli("verify", "NO_SUCH_JOB", "--workspace", str(workspace), state=state)
    assert unknown.returncode == 2 and "no job or event type matches 'NO_SUCH_JOB'" in unknown.stderr
    no_ws = run_cli("verify", "SHIP_ORDER", state=state)
    assert no_ws.returncode == 2 and "workspace" in no_ws.stderr


@pytest.mark.anyio
async def test_verify_flow_tool_in_process(workspace: Path, tmp_path: Path) -> None:
    settings = load_settings(environ={}, overrides={"workspace": str(workspace), "state_dir": str(tmp_path / "s")})
    async with in_process_client(settings) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        tool = tools["verify_flow"]
        assert tool.annotations.read_only_hint is True and tool.annotations.destructive_hint is False
        assert tool.annotations.open_world_hint is False
        assert tool.input_schema["required"] == ["target"]

        result = await client.call_tool("verify_flow", {"target": "RESTOCK_ITEM"})
        assert not result.is_error
        data = result.structured_content
        assert data["target"]["value"] == "shop.restock_item"
        assert data["failing"] == ["reads_envelope"]
        assert data["summary"]["failed"] == 1 and data["summary"]["total"] == 13
        text = result.content[0].text
        assert "FAIL reads_envelope" in text and "restock-item.handler.ts:17" in text and "fix:" in text

        event = await client.call_tool("verify_flow", {"target": "shop.order.cancelled"})
        assert event.structured_content["failing"] == ["consumer_accepts_type"]

        missing = await client.call_tool("verify_flow", {"target": "SHIP_ORDR"})
        assert missing.is_error and "no job or event type matches 'SHIP_ORDR'" in missing.content[0].text
        queue = await client.call_tool("verify_flow", {"target": "returns-queue"})
        assert queue.is_error and "not a job or event type" in queue.content[0].text
        empty = await client.call_tool("verify_flow", {"target": ""})
        assert empty.is_error


@pytest.mark.anyio
async def test_verify_flow_tool_without_workspace(tmp_path: Path) -> None:
    settings = load_settings(environ={}, overrides={"state_dir": str(tmp_path / "s")})
    async with in_process_client(settings) as client:
        result = await client.call_tool("verify_flow", {"target": "SHIP_ORDER"})
        assert result.is_error and "workspace" in result.content[0].text


@pytest.mark.anyio
async def test_verify_flow_tool_over_stdio(workspace: Path, tmp_path: Path) -> None:
    config = tmp_path / "mesh.toml"
    config.write_text(render_toml({"workspace": str(workspace), "state_dir": str(tmp_path / "s")}), encoding="utf-8")
    async with stdio_client(config) as client:
        result = await client.call_tool("verify_flow", {"target": "JobMessagingType.PRINT_LABEL"})
        assert not result.is_error
        data = result.structured_content
        assert data["failing"] == ["provided_in_module"]
        check = next(c for c in data["checks"] if c["id"] == "provided_in_module")
        assert check["hint"].startswith("Add PrintLabelHandler to the providers of AppModule")
