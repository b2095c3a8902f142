"""A server starts (``tools/list``) without importing psycopg or redis; the first tool that needs
one imports it. Checked in a fresh interpreter (the suite's own process has imported both).

Also: ``mesh-mcp serve``'s module does not import the MCP SDK before the index warm-up starts,
and a :class:`server.lazy_modules.LazyModule` behaves as the module it stands for.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from server.lazy_modules import LazyModule
from tests.helpers import FIXTURES, REPO_ROOT, copy_workspace


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    return copy_workspace(FIXTURES / "workspace", tmp_path / "ws")


SCRIPT = r"""
import json, sys
import anyio
from mcp import Client
from server.app import build_server
from server.config import load_settings

settings = load_settings(environ={}, overrides={"workspace": sys.argv[1], "state_dir": sys.argv[2],
                                                "redis": {"url": sys.argv[3]}})
seen = {}

def loaded():
    return sorted(m for m in ("psycopg", "redis") if m in sys.modules)

async def main():
    async with Client(build_server(settings), cache=None) as client:
        tools = await client.list_tools()
        seen["tools"] = len(tools.tools)
        seen["after_list"] = loaded()
        impact = await client.call_tool("analyze_impact", {"target": "GEOCODE_EVENT"})
        seen["impact_error"] = impact.is_error
        seen["after_index_tool"] = loaded()
        streams = await client.call_tool("list_streams", {})
        seen["streams_error"] = streams.is_error
        seen["after_redis_tool"] = loaded()

anyio.run(main)
print(json.dumps(seen))
"""


def test_server_start_imports_neither_psycopg_nor_redis_until_a_tool_needs_them(workspace, tmp_path, redis_url):
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(workspace), str(tmp_path / "state"), redis_url],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["tools"] > 10
    assert seen["after_list"] == [], "tools/list must not need psycopg or redis"
    assert seen["impact_error"] is False and seen["after_index_tool"] == []  # the static index needs neither
    assert seen["streams_error"] is False
    assert "redis" in seen["after_redis_tool"]


def test_serve_module_imports_no_sdk_psycopg_nor_redis():
    code = "import sys, server.serve; print(sorted(m for m in ('mcp', 'psycopg', 'redis') if m in sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_lazy_module_is_the_module_once_used():
    lazy = LazyModule("json.decoder")
    assert "not loaded yet" in repr(lazy)
    assert lazy.JSONDecodeError is json.decoder.JSONDecodeError
    assert "loaded" in repr(lazy) and "not loaded" not in repr(lazy)
    with pytest.raises(AttributeError):
        _ = lazy.no_such_name
    with pytest.raises(ModuleNotFoundError):
        _ = LazyModule("no_such_module_anywhere").x
