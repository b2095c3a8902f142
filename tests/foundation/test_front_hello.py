"""The first client after the shared server exited is answered from the last session's handshake
record while a new shared server starts (server/front_hello.py, server/front_relay.py).

Real ``mesh-mcp serve`` fronts through the SDK's stdio client (the stateless protocol:
``server/discover``, ``tools/list``) and raw JSON lines (the ``initialize`` handshake). To show
where an answer came from, the tests mark the record's tool list: a marked description can only
come from the record.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path

import pytest

from tests.foundation.test_shared_serve import SAMPLE, _daemons, _env, client
from tests.helpers import REPO_ROOT

pytestmark = pytest.mark.anyio
MARK = "[answered from the record]"


@pytest.fixture
def runtime(tmp_path: Path) -> Iterator[Path]:
    """The test's own runtime folder; the shared servers started in it are killed at the end."""
    folder = tmp_path / "run"
    folder.mkdir(mode=0o700)
    yield folder
    for pid in _daemons(folder):
        with suppress(OSError):
            os.kill(pid, signal.SIGKILL)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    return Path(shutil.copytree(SAMPLE, tmp_path / "ws"))


def _record(runtime: Path) -> Path:
    [path] = runtime.glob("*.hello.json")
    return path


def _kill_daemons(runtime: Path) -> None:
    for pid in _daemons(runtime):
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while _daemons(runtime) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _daemons(runtime)


def _mark(path: Path, **change: str) -> None:
    data = json.loads(path.read_text())
    for answer in data["answers"]:
        if answer["method"] == "tools/list":
            answer["result"]["tools"][0]["description"] += MARK
            if "params" in change:
                answer["params"] = change["params"]
    path.write_text(json.dumps(data))


async def _tools_and_a_call(workspace: Path, runtime: Path) -> tuple[list, bool]:
    async with client(workspace, runtime) as c:
        tools = (await c.list_tools()).tools
        result = await c.call_tool("analyze_impact", {"target": "GEOCODE_EVENT"})
        return tools, not result.is_error


async def test_the_first_client_after_the_shared_server_exited_is_answered_from_the_record(
        workspace: Path, runtime: Path) -> None:
    first, ok = await _tools_and_a_call(workspace, runtime)
    assert ok and not any(MARK in (t.description or "") for t in first)
    _kill_daemons(runtime)
    _mark(_record(runtime))
    tools, ok = await _tools_and_a_call(workspace, runtime)
    assert MARK in tools[0].description and [t.name for t in tools] == [t.name for t in first]
    assert ok and len(_daemons(runtime)) == 1  # the call went to a new shared server


async def test_a_client_the_record_does_not_know_is_relayed(workspace: Path, runtime: Path) -> None:
    await _tools_and_a_call(workspace, runtime)
    _kill_daemons(runtime)
    _mark(_record(runtime), params=json.dumps({"cursor": "not this client's request"}))
    tools, ok = await _tools_and_a_call(workspace, runtime)
    assert ok and not any(MARK in (t.description or "") for t in tools)


async def test_when_no_shared_server_can_start_a_server_of_its_own_answers(
        workspace: Path, runtime: Path) -> None:
    await _tools_and_a_call(workspace, runtime)
    _kill_daemons(runtime)
    record = _record(runtime)
    _mark(record)
    sock = runtime / record.name.replace(".hello.json", ".sock")
    sock.unlink(missing_ok=True)  # the killed server's
    sock.mkdir()  # no socket can be bound there
    tools, ok = await _tools_and_a_call(workspace, runtime)
    assert MARK in tools[0].description and ok and not _daemons(runtime)


def _lines(proc: subprocess.Popen, n: int, timeout: float = 60) -> list[dict]:
    out, deadline = [], time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        out.append(json.loads(line))
    return out


def _legacy_session(workspace: Path, runtime: Path) -> list[dict]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "server.cli", "serve", "--workspace", str(workspace), "--runtime-dir", str(runtime)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=_env(), cwd=REPO_ROOT, text=True)
    try:
        hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}
        send = [{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": hello},
                {"jsonrpc": "2.0", "method": "notifications/initialized"},
                {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                 "params": {"name": "analyze_impact", "arguments": {"target": "GEOCODE_EVENT"}}}]
        got = []
        for message, answers in zip(send, (1, 0, 1, 1), strict=True):
            proc.stdin.write(json.dumps(message) + "\n")
            proc.stdin.flush()
            got += _lines(proc, answers)
        return got
    finally:
        proc.stdin.close()
        proc.wait(30)


def test_an_initialize_handshake_is_answered_from_the_record_and_replayed_to_the_server(
        workspace: Path, runtime: Path) -> None:
    first = _legacy_session(workspace, runtime)
    assert [m.get("id") for m in first] == [0, 1, 2] and all("result" in m for m in first)
    _kill_daemons(runtime)
    _mark(_record(runtime))
    again = _legacy_session(workspace, runtime)
    assert [m.get("id") for m in again] == [0, 1, 2]  # the server's own answer to initialize was dropped
    assert again[0]["result"] == first[0]["result"]
    assert MARK in again[1]["result"]["tools"][0]["description"]
    assert not again[2]["result"].get("isError") and len(_daemons(runtime)) == 1


def test_a_message_too_long_to_look_at_is_relayed_to_the_server(workspace: Path, runtime: Path) -> None:
    """Over 4 MB in one line: the front does not match it against the record, it passes it on."""
    _legacy_session(workspace, runtime)  # leaves the record
    _kill_daemons(runtime)
    _record(runtime)
    proc = subprocess.Popen(
        [sys.executable, "-m", "server.cli", "serve", "--workspace", str(workspace), "--runtime-dir", str(runtime)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=_env(), cwd=REPO_ROOT, text=True)
    try:
        huge = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                "params": {"name": "analyze_impact", "arguments": {"target": "x" * 5_000_000}}}
        proc.stdin.write(json.dumps(huge) + "\n")
        proc.stdin.flush()
        [answer] = _lines(proc, 1)
        assert answer["id"] == 7  # answered by a server (an error: the target is too long), not dropped
    finally:
        proc.stdin.close()
        proc.wait(30)
