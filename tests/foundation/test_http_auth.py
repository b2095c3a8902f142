"""HTTP mode is authenticated: a bearer token, 401 without it, never bound wide without one.

Each test starts the real ``mesh-mcp serve --http`` in a subprocess on a free loopback port and
talks to it with urllib (raw requests) or a real MCP client sending the header.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from email.message import Message
from pathlib import Path

import pytest

from server.config import load_settings
from server.demo.embedded import free_port, port_answers
from server.errors import InvalidArgument
from server.http_auth import StaticTokenVerifier, is_loopback, load_http_token
from tests.helpers import REPO_ROOT

pytestmark = pytest.mark.anyio

TOKEN = "tok-" + "x7Qp2" * 8
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}


def _start(args: list[str], env_extra: dict[str, str]) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k != "MESH_HTTP_TOKEN"}
    return subprocess.Popen(
        [sys.executable, "-m", "server.cli", "serve", *args],
        cwd=REPO_ROOT,
        env={**env, "PYTHONPATH": str(REPO_ROOT), **env_extra},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _stop(proc: subprocess.Popen) -> tuple[bytes, bytes]:
    proc.terminate()
    try:
        return proc.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.communicate()


def _wait(proc: subprocess.Popen, port: int) -> None:
    deadline = time.monotonic() + 30
    while not port_answers("127.0.0.1", port, 0.2):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"HTTP server did not start: {proc.stderr.read().decode()[-2000:]}")
        time.sleep(0.1)


@pytest.fixture
def config(mesh_config: Callable[..., Path], redis_url: str) -> Path:
    return mesh_config({"redis": {"url": redis_url}})


@pytest.fixture
def token_server(config: Path) -> Iterator[tuple[str, list[bytes]]]:
    port = free_port()
    proc = _start(["--config", str(config), "--http", f"127.0.0.1:{port}"], {"MESH_HTTP_TOKEN": TOKEN})
    logs: list[bytes] = []
    try:
        _wait(proc, port)
        yield f"http://127.0.0.1:{port}/mcp", logs
    finally:
        out, err = _stop(proc)
        logs.extend([out, err])
        assert out == b"", "the HTTP server wrote to stdout"
        assert TOKEN.encode() not in err, "the token was logged"


def _post(url: str, headers: dict[str, str]) -> tuple[int, Message]:
    request = urllib.request.Request(
        url,
        data=json.dumps(INIT).encode(),
        headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream", **headers},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.headers
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers


def test_no_token_gets_401_with_a_bearer_challenge(token_server: tuple[str, list[bytes]]) -> None:
    url, _ = token_server
    status, headers = _post(url, {})
    assert status == 401
    assert headers.get("WWW-Authenticate", "").startswith("Bearer")


def test_wrong_token_gets_401(token_server: tuple[str, list[bytes]]) -> None:
    url, _ = token_server
    status, headers = _post(url, {"Authorization": "Bearer " + TOKEN[:-1] + "y"})
    assert status == 401
    assert "invalid_token" in headers.get("WWW-Authenticate", "")
    status, _ = _post(url, {"Authorization": "Basic " + TOKEN})
    assert status == 401


def test_right_token_opens_a_real_mcp_session(token_server: tuple[str, list[bytes]]) -> None:
    url, _ = token_server
    status, _ = _post(url, {"Authorization": f"Bearer {TOKEN}"})
    assert status == 200


async def test_mcp_client_with_the_header_calls_tools(token_server: tuple[str, list[bytes]]) -> None:
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    url, _ = token_server
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {TOKEN}"})
    async with http, Client(streamable_http_client(url, http_client=http), cache=None) as client:
        result = await client.call_tool("server_info", {})
    assert not result.is_error
    assert TOKEN not in json.dumps(result.structured_content), "server_info must never show the token"


def test_refuses_a_non_loopback_address_without_a_token(config: Path) -> None:
    port = free_port()
    proc = _start(["--config", str(config), "--http", f"0.0.0.0:{port}"], {})
    _, err = proc.communicate(timeout=30)
    assert proc.returncode != 0
    assert b"without a bearer token" in err
    assert b"MESH_HTTP_TOKEN" in err
    assert not port_answers("127.0.0.1", port, 0.2)


def test_a_non_loopback_address_with_a_token_requires_it(config: Path) -> None:
    port = free_port()
    proc = _start(["--config", str(config), "--http", f"0.0.0.0:{port}"], {"MESH_HTTP_TOKEN": TOKEN})
    try:
        _wait(proc, port)
        assert _post(f"http://127.0.0.1:{port}/mcp", {})[0] == 401
        assert _post(f"http://127.0.0.1:{port}/mcp", {"Authorization": f"Bearer {TOKEN}"})[0] == 200
    finally:
        _, err = _stop(proc)
    assert TOKEN.encode() not in err


def test_token_file_is_read_and_must_be_private(tmp_path: Path, config: Path) -> None:
    token_file = tmp_path / "http.token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o600)
    settings = load_settings(config_file=config, environ={}, overrides={"http": {"token_file": str(token_file)}})
    assert load_http_token(settings, environ={}) == TOKEN
    assert load_http_token(settings, environ={"MESH_HTTP_TOKEN": "e" * 20}) == "e" * 20, "the variable wins"
    if sys.platform != "win32":
        token_file.chmod(0o644)
        with pytest.raises(InvalidArgument, match="chmod 600"):
            load_http_token(settings, environ={})
    missing = load_settings(config_file=config, environ={}, overrides={"http": {"token_file": str(tmp_path / "no")}})
    with pytest.raises(InvalidArgument, match="cannot be read"):
        load_http_token(missing, environ={})


def test_short_or_empty_tokens_are_refused(config: Path) -> None:
    settings = load_settings(config_file=config, environ={})
    assert load_http_token(settings, environ={}) is None
    for bad in ("", "   ", "short"):
        with pytest.raises(InvalidArgument, match="at least 16"):
            load_http_token(settings, environ={"MESH_HTTP_TOKEN": bad})


def test_the_token_variable_is_not_a_setting(config: Path) -> None:
    settings = load_settings(config_file=config, environ={"MESH_HTTP_TOKEN": TOKEN})
    assert TOKEN not in settings.model_dump_json()


async def test_verifier_accepts_only_the_exact_token() -> None:
    verifier = StaticTokenVerifier(TOKEN)
    assert (await verifier.verify_token(TOKEN)) is not None
    for other in ("", TOKEN[:-1], TOKEN + "x", TOKEN.upper()):
        assert (await verifier.verify_token(other)) is None
    assert TOKEN not in repr(verifier)


@pytest.mark.parametrize(
    ("host", "loopback"),
    [("127.0.0.1", True), ("127.0.0.2", True), ("::1", True), ("localhost", True),
     ("0.0.0.0", False), ("::", False), ("10.0.0.5", False), ("example.org", False)],
)
def test_loopback_detection(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback
