"""An MCP client that negotiates MCP Apps, and the browser harness of the app (tests/js/apps/run.mjs)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.client.extension import ClientExtension

from server.app import build_server
from server.config import Settings
from tests.helpers import REPO_ROOT

HARNESS_DIR = REPO_ROOT / "tests" / "js" / "apps"
ARTIFACTS = Path(os.environ.get("MESH_TEST_ARTIFACTS", REPO_ROOT / "tmp" / "artifacts")) / "mcp-app"
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")


class AppsHost(ClientExtension):
    """What a host rendering MCP Apps advertises (SEP-1865 / SEP-2133)."""

    identifier = "io.modelcontextprotocol/ui"

    def settings(self) -> dict[str, Any]:
        return {"mimeTypes": ["text/html;profile=mcp-app"]}


@asynccontextmanager
async def apps_client(settings: Settings, server: Any = None) -> AsyncIterator[Any]:
    async with Client(server or build_server(settings), cache=None, extensions=[AppsHost()]) as client:
        yield client


def wire(result: Any) -> dict[str, Any]:
    """A CallToolResult as the host receives it on the wire (camelCase, ``_meta``)."""
    return result.model_dump(mode="json", by_alias=True, exclude_none=True)


def _unavailable(reason: str) -> None:
    message = f"the browser tests cannot run: {reason} (apt-get install chromium; cd tests/js/apps && npm ci)"
    if "chromium" in os.environ.get("MESH_TEST_UNINSTALLABLE", "").split():
        pytest.skip(f"{message}; .ci/run could not install chromium")
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


def run_browser(cases: list[dict[str, Any]], tmp: Path) -> dict[str, dict[str, Any]]:
    """Every case in one headless Chromium; per case what was drawn, clicked and sent (screenshots in ARTIFACTS)."""
    node = shutil.which("node")
    if node is None:
        _unavailable("node is not installed")
    if not Path(CHROMIUM).exists():
        _unavailable(f"{CHROMIUM} does not exist")
    if not (HARNESS_DIR / "node_modules" / "playwright-core").is_dir():
        _unavailable("tests/js/apps/node_modules has no playwright-core")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    cases_file = tmp / "cases.json"
    cases_file.write_text(json.dumps(cases), encoding="utf-8")
    proc = subprocess.run([node, "run.mjs", str(cases_file), str(ARTIFACTS)], cwd=HARNESS_DIR, capture_output=True,
                          text=True, timeout=180, check=False, env={**os.environ, "CHROMIUM": CHROMIUM})
    assert proc.returncode == 0, f"run.mjs failed: {proc.stderr[-3000:]}"
    out = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    return {case["name"]: case for case in out}
