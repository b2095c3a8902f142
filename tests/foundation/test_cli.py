"""The command line: help, doctor, and one clear line for bad configuration."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from server.demo.embedded import free_port
from tests.helpers import REPO_ROOT


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    clean_env = {k: v for k, v in os.environ.items() if not k.startswith("MESH_")}
    return subprocess.run(
        [sys.executable, "-m", "server.cli", *args],
        cwd=REPO_ROOT,
        env={**clean_env, "PYTHONPATH": str(REPO_ROOT), **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_help_lists_every_command() -> None:
    result = run_cli("--help")
    assert result.returncode == 0
    for command in ("serve", "demo", "doctor", "index", "impact", "catalogue", "verify", "approve", "approver"):
        assert command in result.stdout


def test_serve_help_names_the_transports() -> None:
    result = run_cli("serve", "--help")
    assert result.returncode == 0
    assert "--http" in result.stdout and "--enable-remediation" in result.stdout and "--workspace" in result.stdout


def test_doctor_passes_with_reachable_services(
    mesh_config: Callable[..., Path], pg_url: str, redis_url: str, tmp_path: Path
) -> None:
    config = mesh_config({"workspace": str(tmp_path), "services": {"event": {"postgres": pg_url}},
                          "redis": {"url": redis_url}})
    result = run_cli("doctor", "--config", str(config), "--json")
    report = json.loads(result.stdout)
    by_name = {check["name"]: check for check in report["checks"]}
    assert by_name["postgres:event"]["status"] == "ok", by_name["postgres:event"]
    assert by_name["redis"]["status"] == "ok"
    assert "PostgreSQL" in by_name["postgres:event"]["detail"]


def test_doctor_fails_on_unreachable_redis(mesh_config: Callable[..., Path]) -> None:
    port = free_port()
    config = mesh_config({"redis": {"url": f"redis://127.0.0.1:{port}/0"}})
    result = run_cli("doctor", "--config", str(config))
    assert result.returncode != 0
    assert f"127.0.0.1:{port}" in result.stdout
    assert "Traceback" not in result.stdout + result.stderr


def test_doctor_fails_on_unreachable_database_and_redacts(mesh_config: Callable[..., Path]) -> None:
    port = free_port()
    config = mesh_config({"services": {"user": {"postgres": f"postgresql://app:hunter2@127.0.0.1:{port}/user"}}})
    result = run_cli("doctor", "--config", str(config), "--json")
    assert result.returncode == 1
    report = json.loads(result.stdout)
    failing = [c for c in report["checks"] if c["status"] == "fail"]
    assert any(c["name"] == "postgres:user" for c in failing)
    assert "hunter2" not in result.stdout + result.stderr


def test_unknown_config_key_is_one_line(mesh_config: Callable[..., Path]) -> None:
    config = mesh_config({"redis": {"url": "redis://127.0.0.1:6379/0", "timeout": 3}})
    result = run_cli("doctor", "--config", str(config))
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "redis.timeout" in lines[0] and str(config) in lines[0]


def test_bad_dsn_is_one_line(mesh_config: Callable[..., Path]) -> None:
    config = mesh_config({"services": {"user": {"postgres": "not a dsn"}}})
    result = run_cli("serve", "--config", str(config))
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1
    assert "services.user.postgres" in result.stderr


def test_bad_http_address_is_one_line(mesh_config: Callable[..., Path]) -> None:
    config = mesh_config({"redis": {"url": "redis://127.0.0.1:6379/0"}})
    result = run_cli("serve", "--config", str(config), "--http", "nohost")
    assert result.returncode == 2
    assert "HOST:PORT" in result.stderr


def test_no_command_prints_help_and_exits_2() -> None:
    result = run_cli()
    assert result.returncode == 2
    assert "usage: mesh-mcp" in result.stderr and result.stdout == ""


def test_impact_depth_bounds_are_stated_and_enforced() -> None:
    helped = run_cli("impact", "--help")
    assert "0 to 5" in helped.stdout
    refused = run_cli("impact", "X", "--depth", "6")
    assert refused.returncode == 2 and "must be from 0 to 5" in refused.stderr


def test_a_closed_pipe_is_not_a_traceback(tmp_path: Path) -> None:
    """`mesh-mcp catalogue | head`: the reader is gone before we write; no traceback, status 141."""
    workspace = REPO_ROOT / "resources" / "sample_workspace"
    proc = subprocess.Popen(
        [sys.executable, "-m", "server.cli", "catalogue", "--workspace", str(workspace)],
        cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT), "MESH_STATE_DIR": str(tmp_path)},
    )
    proc.stdout.close()
    _, err = proc.communicate(timeout=120)
    assert b"Traceback" not in err and b"Exception ignored" not in err, err.decode()
    assert proc.returncode == 141


def test_doctor_prints_the_whole_cause_of_a_failed_connection(mesh_config: Callable[..., Path], pg_url: str) -> None:
    """A missing role is the end of libpq's message; the text output must not cut it off."""
    role_url = pg_url.replace("postgresql://postgres@", "postgresql://no_such_role_xyz@")
    config = mesh_config({"services": {"user": {"postgres": role_url}}})
    result = run_cli("doctor", "--config", str(config), env={"COLUMNS": "80"})
    assert result.returncode == 1
    assert 'role "no_such_role_xyz" does not exist' in result.stdout, result.stdout


def test_tables_fit_the_terminal_and_colour_only_on_a_tty() -> None:
    from server.cli_support import format_table, use_colour
    from server.text_safety import terminal

    rows = [["postgres:event", "ok", "x" * 300], ["redis", "fail", "connection refused " * 10]]
    for width in (60, 100):
        table = format_table(["check", "status", "detail"], rows, width=width)
        assert max(len(line) for line in table.splitlines()) <= width, table
        assert "…" in table and "\033[" not in table
    coloured = terminal(format_table(["check", "status", "detail"], rows, width=80, colour=True))  # as printed
    assert "\033[32mok" in coloured and "\033[31mfail" in coloured

    class Tty:
        def isatty(self) -> bool:
            return True

    os.environ.pop("NO_COLOR", None)
    assert use_colour(Tty()) is True
    os.environ["NO_COLOR"] = "1"
    try:
        assert use_colour(Tty()) is False
    finally:
        del os.environ["NO_COLOR"]
    assert use_colour(open(os.devnull, "w")) is False  # noqa: SIM115
