"""``--detail summary|full`` of the CLI commands whose MCP tool takes ``detail`` (impact, map, trace-request)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from server.demo.command import DemoRun, write_config
from server.demo.report import STATIC_TARGET
from tests.helpers import REPO_ROOT


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MESH_")}
    return subprocess.run([sys.executable, "-m", "server.cli", *args], cwd=REPO_ROOT, capture_output=True, text=True,
                          env={**env, "PYTHONPATH": str(REPO_ROOT)}, timeout=120)


def _both(*args: str) -> tuple[dict, dict]:
    summary = run_cli(*args, "--json", "--detail", "summary")
    full = run_cli(*args, "--json")
    assert summary.stdout and full.stdout, (summary.stderr, full.stderr)
    return json.loads(summary.stdout), json.loads(full.stdout)


def test_cli_detail_shapes_the_json(demo_run: DemoRun, tmp_path: Path) -> None:
    config = write_config(demo_run.settings, tmp_path / "mesh.toml")
    small, whole = _both("impact", STATIC_TARGET, "--config", str(config))
    assert small["detail"] == "summary" and "detail" not in whole
    assert small["counts"]["producers"] == len(whole["producers"])
    small, whole = _both("map", STATIC_TARGET, "--config", str(config))
    assert small["detail"] == "summary" and small["mermaid"].startswith("flowchart") and whole["mermaid"]
    assert small["omitted"]["counts"]["edges"] == len(whole["edges"])
    job = demo_run.scenario.fault("job_handler_failed").refs["job_id"]
    small, whole = _both("trace-request", "--start", f"{demo_run.scenario.service}:jobs_outbox:{job}",
                         "--config", str(config))
    assert small["verdict"] == whole["verdict"] and small["verdict"]["code"] == "handler_failed"
    assert small["counts"]["items"] == len(whole["items"]) and "hops" in whole["items"][0]
    assert "hops" not in small["items"][0]
