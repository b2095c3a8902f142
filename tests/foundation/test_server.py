"""The MCP server answers over every transport, in read-only mode by default."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from server.demo.embedded import free_port, port_answers
from tests.helpers import REPO_ROOT, in_process_client, stdio_client

pytestmark = pytest.mark.anyio

SECRET = "s3cretpw"


@pytest.fixture
def config_with_secret(mesh_config: Callable[..., Path], pg_url: str, redis_url: str) -> Path:
    secret_dsn = pg_url.replace("postgresql://postgres@", f"postgresql://postgres:{SECRET}@")
    return mesh_config({"services": {"event": {"postgres": secret_dsn}}, "redis": {"url": redis_url}})


async def test_server_info_in_process(make_settings: Callable[..., object], redis_url: str) -> None:
    settings = make_settings(redis={"url": redis_url}, services={"event": {"postgres": "postgresql://u:pw@h/db"}})
    async with in_process_client(settings) as client:
        result = await client.call_tool("server_info", {})
    assert not result.is_error
    info = result.structured_content
    assert info["mode"] == "read-only"
    assert "server_info" in info["tools"]
    assert info["services"] == ["event"]
    assert info["config"]["services"]["event"]["postgres"] == "postgresql://u:***@h/db"
    assert "read-only mode" in result.content[0].text


async def test_read_only_mode_does_not_list_apply_remediation(make_settings: Callable[..., object]) -> None:
    async with in_process_client(make_settings()) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
    assert "apply_remediation" not in names
    assert "server_info" in names


async def test_every_tool_has_honest_annotations(make_settings: Callable[..., object]) -> None:
    async with in_process_client(make_settings(enable_remediation=True)) as client:
        tools = (await client.list_tools()).tools
    for tool in tools:
        ann = tool.annotations
        assert ann is not None, tool.name
        assert ann.read_only_hint is not None and ann.destructive_hint is not None, tool.name
        assert ann.idempotent_hint is not None and ann.open_world_hint is not None, tool.name
        if ann.read_only_hint:
            assert ann.destructive_hint is False, tool.name
        assert tool.output_schema is not None, f"{tool.name} has no structured output"
        assert tool.title, f"{tool.name} has no title (add it to server/tool_titles.py)"
    by_name = {t.name: t.annotations for t in tools}
    assert by_name["propose_remediation"].idempotent_hint is False, "each call writes a new plan file"
    assert by_name["apply_remediation"].destructive_hint is True


async def test_server_info_over_stdio_never_leaks_the_password(config_with_secret: Path) -> None:
    async with stdio_client(config_with_secret) as client:
        result = await client.call_tool("server_info", {})
    assert not result.is_error
    assert result.structured_content["mode"] == "read-only"
    dumped = str(result.structured_content) + result.content[0].text
    assert SECRET not in dumped
    assert "***" in str(result.structured_content["config"]["services"])


@pytest.fixture
def http_server(config_with_secret: Path) -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "server.cli", "serve", "--config", str(config_with_secret),
         "--http", f"127.0.0.1:{port}"],
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 30
        while not port_answers("127.0.0.1", port, 0.2):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"HTTP server did not start: {proc.stderr.read().decode()[-2000:]}")
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        try:
            out, _ = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
        assert out == b"", "the HTTP server wrote to stdout"


async def test_server_info_over_streamable_http(http_server: str) -> None:
    from mcp import Client

    async with Client(http_server, cache=None) as client:
        result = await client.call_tool("server_info", {})
    assert not result.is_error
    assert result.structured_content["name"] == "mesh-mcp"
    assert SECRET not in str(result.structured_content)


def test_http_path_is_mcp(http_server: str) -> None:
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(http_server.replace("/mcp", "/nope"), timeout=5)
    assert err.value.code == 404


async def test_invalid_arguments_read_as_sentences(make_settings: Callable[..., object]) -> None:
    async with in_process_client(make_settings()) as client:
        result = await client.call_tool("analyze_impact", {"detail": "full", "target": "X", "depth": 99})
        missing = await client.call_tool("analyze_impact", {"detail": "full"})
    assert result.is_error and missing.is_error
    text = result.content[0].text
    assert "invalid arguments for analyze_impact: 'depth'" in text and "(got 99)" in text
    assert "call again" in text and "pydantic" not in text
    assert "'target' is required" in missing.content[0].text
