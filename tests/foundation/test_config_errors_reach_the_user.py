"""A configuration error reaches the user of an agent: ``serve`` starts in a degraded mode whose
server_info, instructions and every tool say the error (through a real stdio client); ``doctor`` still
fails. mesh.toml is read as UTF-8 with or without a byte-order mark, any other encoding is one line;
MESH_* variables are named by their full name, an unknown one ignored with a warning."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from server.config import ConfigError, load_settings
from tests.helpers import REPO_ROOT, stdio_client


def cli(*args: str, env: dict[str, str] | None = None, cwd: Path = REPO_ROOT) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MESH_")}
    return subprocess.run([sys.executable, "-m", "server.cli", *args], cwd=cwd, capture_output=True, text=True,
                          env={**clean, "PYTHONPATH": str(REPO_ROOT), **(env or {})}, timeout=120)


@pytest.mark.anyio
async def test_serve_with_a_broken_config_connects_and_every_tool_says_the_error(
        mesh_config: Callable[..., Path], tmp_path: Path) -> None:
    config = mesh_config({"redis": {"url": "redis://127.0.0.1:6379/0", "timeout": 3}})
    async with stdio_client(config, env={"MESH_STATE_DIR": str(tmp_path / "state")}) as client:
        assert "could NOT load its configuration" in (client.instructions or "")
        assert "redis.timeout" in client.instructions
        info = await client.call_tool("server_info", {})
        assert not info.is_error
        error = info.structured_content["config_error"]
        assert str(config) in error and "unknown key 'redis.timeout'" in error  # what and where
        assert "mesh-mcp doctor" in error and "restart" in error  # how to fix
        assert info.content[0].text.startswith("CONFIGURATION ERROR")
        names = [t.name for t in (await client.list_tools()).tools]
        assert {"outbox_health", "analyze_impact", "inspect_stream"} <= set(names)
        for name, arguments in (("outbox_health", {}), ("analyze_impact", {"target": "X"}), ("dlq_list", {})):
            result = await client.call_tool(name, arguments)
            assert result.is_error and "mesh-mcp is not configured" in result.content[0].text, name
            assert "redis.timeout" in result.content[0].text
    doctor = cli("doctor", "--config", str(config))
    assert doctor.returncode == 2 and "redis.timeout" in doctor.stderr


def test_utf8_with_a_byte_order_mark_is_read_and_utf16_is_one_line(tmp_path: Path) -> None:
    text = 'state_dir = "state"\n[redis]\nurl = "redis://127.0.0.1:6390/3"\n'
    bom = tmp_path / "bom.toml"
    bom.write_bytes(b"\xef\xbb\xbf" + text.encode())
    assert load_settings(config_file=bom, environ={}).redis.url == "redis://127.0.0.1:6390/3"
    for name, data in (("utf16.toml", text.encode("utf-16")), ("utf16le.toml", text.encode("utf-16-le")),
                       ("latin1.toml", "# café\n".encode("latin-1") + text.encode())):
        path = tmp_path / name
        path.write_bytes(data)
        with pytest.raises(ConfigError) as caught:
            load_settings(config_file=path, environ={})
        message = str(caught.value)
        assert str(path) in message and "UTF-8" in message and "\n" not in message
        result = cli("doctor", "--config", str(path))
        assert result.returncode == 2 and "Traceback" not in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_environment_variables_are_named_by_their_full_name(tmp_path: Path) -> None:
    from server.config import unknown_env_variables

    env = {"MESH_FOO": "1", "MESH_LIMITS__NOPE": "2", "MESH_REDIS__URL": "redis://127.0.0.1:6391/0",
           "MESH_SERVICES__USER__POSTGRES": "postgresql://u@h/db", "MESH_DEMO_REDIS_URL": "x", "MESH_HTTP_TOKEN": "t"}
    assert unknown_env_variables(env) == ["MESH_FOO", "MESH_LIMITS__NOPE"]
    settings = load_settings(environ=env, overrides={"state_dir": str(tmp_path)})  # unknown: a warning, not fatal
    assert settings.redis.url == "redis://127.0.0.1:6391/0" and settings.services["user"].postgres
    with pytest.raises(ConfigError) as caught:
        load_settings(environ={"MESH_LIMITS__MAX_ROWS": "many"})
    assert str(caught.value).startswith("environment variable MESH_LIMITS__MAX_ROWS: invalid value")
    result = cli("doctor", "--json", env={"MESH_FOO": "1", "MESH_STATE_DIR": str(tmp_path)}, cwd=tmp_path)
    assert "unknown environment variable MESH_FOO ignored" in result.stderr
    assert "MESH_FOO" in result.stdout and result.returncode in (0, 1)


def test_doctor_prints_each_finding_once_and_a_summary_that_matches(tmp_path: Path) -> None:
    """No config: it says what it assumed (Redis at 127.0.0.1:6379 db 0) and never ends "all good" after a warning."""
    result = cli("doctor", env={"MESH_FOO": "1", "COLUMNS": "200", "MESH_STATE_DIR": str(tmp_path)}, cwd=tmp_path)
    out = result.stdout
    assert "assumed: Redis at 127.0.0.1:6379 db 0" in out
    table, _, tail = out.partition("\n\n")
    rows = [line.split() for line in table.splitlines()[2:] if not line.startswith(" ")]  # not the wrapped lines
    names = [row[0] for row in rows]
    assert len(names) == len(set(names)) and "environment" in names, out  # each check once, then the summary
    assert out.count("unknown environment variable") == 1, out
    assert "fix:" not in tail  # the table was followed by every problem again
    warned = sum(row[1] == "warn" for row in rows)
    assert warned >= 1 and not tail.strip().startswith("all good"), out
    assert f"{warned} warning(s)" in tail and f"{sum(row[1] == 'ok' for row in rows)} ok" in tail, out


@pytest.mark.anyio
async def test_degraded_mode_registers_nothing_that_could_apply_a_plan(mesh_config: Callable[..., Path],
                                                                         tmp_path: Path) -> None:
    """--enable-remediation on a refused configuration: the degraded server lists no apply_remediation, is
    read-only, and its tools answer with the error (tests/remediation/test_trust.py: an approver smuggled in
    through the environment is such an error)."""
    config = mesh_config({"state_dir": str(tmp_path / "state"), "approval": {"mode": "nope"}})
    async with stdio_client(config, "--enable-remediation", env={"MESH_STANDALONE": "1"}) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert "apply_remediation" not in names and "propose_remediation" in names
        info = await client.call_tool("server_info", {})
        assert "approval.mode" in info.structured_content["config_error"]
        assert info.structured_content["mode"] == "read-only"
        plan = await client.call_tool("propose_remediation", {"symptom": "dlq_replay", "stream": "s"})
        assert plan.is_error and "not configured" in plan.content[0].text
