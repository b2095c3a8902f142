"""``mesh-mcp serve`` shares one server per workspace between its stdio clients (server/shared_front.py).

Each test starts real ``mesh-mcp serve`` processes through the SDK's stdio client, in shared mode
(the suite sets ``MESH_STANDALONE=1`` for every other test), with the sockets in the test's own
runtime folder; the shared servers it started are killed at the end.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.helpers import REPO_ROOT

SAMPLE = REPO_ROOT / "resources" / "sample_workspace"
ENUM = "npm-packages/packages/messaging/src/jobs/events/payloads.ts"
pytestmark = pytest.mark.anyio


@pytest.fixture
def runtime(tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path / "run"
    folder.mkdir(mode=0o700)
    yield folder
    for pid_file in folder.glob("*.pid"):
        with suppress(OSError, ValueError):
            os.kill(int(pid_file.read_text()), signal.SIGKILL)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    return Path(shutil.copytree(SAMPLE, tmp_path / "ws"))


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "MESH_STANDALONE"}
    return {**env, "PYTHONPATH": str(REPO_ROOT), **extra}


@asynccontextmanager
async def client(workspace: Path, runtime: Path, *extra: str, env: dict[str, str] | None = None) -> AsyncIterator[Any]:
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "server.cli", "serve", "--workspace", str(workspace), "--runtime-dir", str(runtime), *extra],
        env=env or _env(), cwd=str(REPO_ROOT),
    )
    async with Client(params, cache=None, read_timeout_seconds=60) as c:
        yield c


def _daemons(runtime: Path) -> list[int]:
    """Live processes running a shared server on a socket of this runtime folder."""
    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        cmd = proc.info["cmdline"] or []
        if "--shared-daemon" in cmd and str(runtime) in " ".join(cmd) and proc.status() != psutil.STATUS_ZOMBIE:
            found.append(proc.info["pid"])
    return found


async def _matches(c: Any, target: str) -> list[dict[str, Any]]:
    result = await c.call_tool("analyze_impact", {"target": target})
    return [] if result.is_error else (result.structured_content or {}).get("matches", [])


async def test_two_clients_are_served_by_one_process_and_both_see_an_edit(workspace: Path, runtime: Path) -> None:
    async with client(workspace, runtime) as a, client(workspace, runtime) as b:
        assert len(_daemons(runtime)) == 1
        assert await _matches(a, "events.archive_event") == []
        assert await _matches(b, "events.archive_event") == []
        source = workspace / ENUM
        text = source.read_text()
        source.write_text(text.replace("export enum EventsJobType {",
                                       "export enum EventsJobType {\n  ARCHIVE_EVENT = 'events.archive_event',"))
        deadline = time.monotonic() + 20
        seen_a = seen_b = []
        while time.monotonic() < deadline and not (seen_a and seen_b):
            seen_a = await _matches(a, "events.archive_event")
            seen_b = await _matches(b, "events.archive_event")
        assert [m["name"] for m in seen_a] == ["EventsJobType.ARCHIVE_EVENT"] and seen_a == seen_b
        assert len(_daemons(runtime)) == 1


async def test_a_killed_shared_process_is_restarted_by_the_next_client(workspace: Path, runtime: Path) -> None:
    async with client(workspace, runtime) as a:
        assert await _matches(a, "events.geocode_event")
        [first] = _daemons(runtime)
    os.kill(first, signal.SIGKILL)
    psutil.Process(first).wait(10) if psutil.pid_exists(first) else None
    async with client(workspace, runtime) as b:
        assert await _matches(b, "events.geocode_event")
        [second] = _daemons(runtime)
        assert second != first


async def test_the_shared_process_exits_after_its_idle_time(workspace: Path, runtime: Path) -> None:
    async with client(workspace, runtime, "--idle-exit", "1") as a:
        assert await _matches(a, "events.geocode_event")
        [pid] = _daemons(runtime)
    psutil.Process(pid).wait(15)
    assert not list(runtime.glob("*.sock")) and not list(runtime.glob("*.pid"))


async def test_different_settings_never_share_a_process(workspace: Path, runtime: Path, tmp_path: Path) -> None:
    other = Path(shutil.copytree(SAMPLE, tmp_path / "other"))
    async with client(workspace, runtime) as a, client(other, runtime) as b:
        assert await _matches(a, "events.geocode_event") and await _matches(b, "events.geocode_event")
        assert len(_daemons(runtime)) == 2
    # libpq reads PG* variables: another PGHOST is another database, so another server
    async with client(workspace, runtime, env=_env(PGHOST="db-elsewhere")) as c:
        assert await _matches(c, "events.geocode_event")
        assert len(_daemons(runtime)) == 3


@pytest.mark.parametrize("how", ["flag", "env", "remediation", "remediation-env"])
async def test_standalone_serves_in_process(workspace: Path, runtime: Path, how: str) -> None:
    extra = {"flag": ["--standalone"], "env": [], "remediation": ["--enable-remediation"], "remediation-env": []}[how]
    env = {"env": _env(MESH_STANDALONE="1"), "remediation-env": _env(MESH_ENABLE_REMEDIATION="true")}.get(how)
    async with client(workspace, runtime, *extra, env=env) as a:
        assert await _matches(a, "events.geocode_event")
        assert _daemons(runtime) == [] and not list(runtime.glob("*.sock"))


async def test_a_runtime_folder_open_to_others_is_not_used(workspace: Path, runtime: Path) -> None:
    runtime.chmod(0o777)
    async with client(workspace, runtime) as a:
        assert await _matches(a, "events.geocode_event")
        assert _daemons(runtime) == [] and not list(runtime.glob("*.sock"))
