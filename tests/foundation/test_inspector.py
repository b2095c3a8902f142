"""A client we did not write (the MCP Inspector CLI) lists every tool with its annotations."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.helpers import REPO_ROOT, in_process_client

INSPECTOR = "@modelcontextprotocol/inspector@2.12.0"

pytestmark = pytest.mark.inspector


@pytest.mark.anyio
async def test_inspector_lists_every_tool_with_annotations(
    mesh_config: Callable[..., Path], redis_url: str, tmp_path: Path, make_settings: Callable[..., object]
) -> None:
    if shutil.which("npx") is None or shutil.which("node") is None:
        pytest.skip("npx (Node.js) is not installed; .ci/run installs it")
    version = subprocess.run(["node", "--version"], capture_output=True, text=True, check=False).stdout
    major = int(version.strip().lstrip("v").split(".")[0] or 0)
    if major < 20:
        pytest.skip(f"the Inspector {INSPECTOR} needs Node.js 20 or later (found {version.strip()})")
    config = mesh_config({"redis": {"url": redis_url}})
    home = tmp_path / "home"
    home.mkdir()
    result = subprocess.run(
        ["npx", "-y", INSPECTOR, "--cli", "-e", f"MESH_CONFIG={config}", "-e", f"PYTHONPATH={REPO_ROOT}",
         "--connect-timeout", "90000", "--method", "tools/list", sys.executable, "-m", "server.cli", "serve"],
        cwd=REPO_ROOT,
        env={**os.environ, "HOME": str(home), "npm_config_update_notifier": "false"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    listed = json.loads(result.stdout)["tools"]
    async with in_process_client(make_settings(redis={"url": redis_url})) as client:
        expected = {tool.name for tool in (await client.list_tools()).tools}
    assert {tool["name"] for tool in listed} == expected
    for tool in listed:
        annotations = tool.get("annotations") or {}
        for hint in ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"):
            assert hint in annotations, f"{tool['name']} lacks {hint}"
