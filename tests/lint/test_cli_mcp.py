"""``mesh-mcp lint`` (a real subprocess: exit codes, SARIF file, baselines) and lint_flows through real MCP clients."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from server.config import load_settings
from tests.helpers import REPO_ROOT, in_process_client, render_toml, stdio_client
from tools.lint.rules import CODES

SCHEMA = json.loads((Path(__file__).parent / "sarif-schema-2.1.0.json").read_text())


def run_cli(*args: str, state: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MESH_")}
    env.update({"PYTHONPATH": str(REPO_ROOT), "MESH_STATE_DIR": str(state)})
    return subprocess.run([sys.executable, "-m", "server.cli", "lint", *args], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


def test_cli_exit_codes_sarif_and_json(workspace: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    sarif = tmp_path / "out.sarif"
    result = run_cli("--workspace", str(workspace), "--sarif", str(sarif), state=state)
    assert result.returncode == 1, result.stderr  # errors exist, --fail-on defaults to error
    assert "ERROR consumer-never-matches npm-packages/packages/post-processors/src/common/job-failed" in result.stdout
    assert "fix: " in result.stdout and "below warning not shown" in result.stdout
    document = json.loads(sarif.read_text())
    jsonschema.Draft4Validator(SCHEMA).validate(document)
    assert all(r["level"] != "note" for r in document["runs"][0]["results"])

    warnings_only = run_cli("--workspace", str(workspace), "--codes", "migration-diverges,migration-missing",
                            state=state)
    assert warnings_only.returncode == 0, warnings_only.stderr
    assert "WARNING migration-diverges" in warnings_only.stdout
    strict = run_cli("--workspace", str(workspace), "--codes", "migration-diverges", "--fail-on", "warning",
                     state=state)
    assert strict.returncode == 1

    as_json = run_cli("--workspace", str(workspace), "--json", "--min-severity", "info", state=state)
    data = json.loads(as_json.stdout)
    assert as_json.returncode == 1 and data["min_severity"] == "info"
    assert any(f["severity"] == "info" for f in data["findings"])
    assert {"code", "severity", "file", "line", "message", "fix", "evidence"} <= set(data["findings"][0])

    unknown = run_cli("--workspace", str(workspace), "--codes", "no-such-code", state=state)
    assert unknown.returncode == 2 and "known codes:" in unknown.stderr and unknown.stdout == ""
    missing = run_cli("--workspace", str(workspace), "--baseline", str(tmp_path / "nope.json"), state=state)
    assert missing.returncode == 2 and "--write-baseline" in missing.stderr


def test_cli_baseline_fails_only_on_new_findings(workspace: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    baseline = tmp_path / "baseline.json"
    written = run_cli("--workspace", str(workspace), "--write-baseline", str(baseline), state=state)
    assert written.returncode == 0, written.stderr
    recorded = json.loads(baseline.read_text())
    assert recorded["version"] == 1 and len(recorded["findings"]) == 12

    accepted = run_cli("--workspace", str(workspace), "--baseline", str(baseline), "--fail-on", "info", state=state)
    assert accepted.returncode == 0, accepted.stdout
    assert "0 finding(s) at or above warning" in accepted.stdout and "accepted by the baseline" in accepted.stdout

    # moving code does not make old findings new (fingerprints hold no line numbers)
    refund = workspace / "workers-runners/worker-order/src/workers/handlers/refund-order.handler.ts"
    refund.write_text("// moved down\n\n" + refund.read_text())
    # a new defect: another handler reading a business field from the envelope
    ship = workspace / "workers-runners/worker-order/src/workers/handlers/ship-order.handler.ts"
    ship.write_text(ship.read_text().replace("const from = job.data.emitter;",
                                             "const from = (job.data as any).customerId;"))
    new = run_cli("--workspace", str(workspace), "--baseline", str(baseline), "--json", state=state)
    assert new.returncode == 1
    findings = json.loads(new.stdout)["findings"]
    assert [(f["code"], f["file"]) for f in findings] == [
        ("payload-wrong-level", "workers-runners/worker-order/src/workers/handlers/ship-order.handler.ts")]
    assert "customerId" in findings[0]["message"]


@pytest.mark.anyio
async def test_lint_flows_tool_in_process(workspace: Path, tmp_path: Path) -> None:
    settings = load_settings(environ={}, overrides={"workspace": str(workspace), "state_dir": str(tmp_path / "s")})
    async with in_process_client(settings) as client:
        tool = {t.name: t for t in (await client.list_tools()).tools}["lint_flows"]
        assert tool.annotations.read_only_hint is True and tool.annotations.open_world_hint is False
        result = await client.call_tool("lint_flows", {})
        assert not result.is_error
        data = result.structured_content
        assert data["min_severity"] == "warning" and data["summary"]["total"] == len(data["findings"]) == 10
        assert data["findings"][0]["severity"] == "error"
        text = result.content[0].text
        assert "ERROR payload-wrong-level" in text and "refund-order.handler.ts:13" in text and "fix:" in text

        info = await client.call_tool("lint_flows", {"codes": ["type-never-consumed"], "min_severity": "info"})
        found = info.structured_content["findings"]
        assert [f["code"] for f in found] == ["type-never-consumed"]
        assert any("'order.archived'" in e["note"] for e in found[0]["evidence"])

        bad = await client.call_tool("lint_flows", {"codes": ["consumer-never-matchs"]})
        assert bad.is_error and "consumer-never-matchs" in bad.content[0].text
        assert all(code in bad.content[0].text for code in CODES)
        severity = await client.call_tool("lint_flows", {"min_severity": "fatal"})
        assert severity.is_error and "min_severity" in severity.content[0].text
        extra = await client.call_tool("lint_flows", {"code": ["x"]})
        assert extra.is_error and "'code' is not a parameter of lint_flows" in extra.content[0].text


@pytest.mark.anyio
async def test_lint_flows_tool_over_stdio(workspace: Path, tmp_path: Path) -> None:
    config = tmp_path / "mesh.toml"
    config.write_text(render_toml({"workspace": str(workspace), "state_dir": str(tmp_path / "s")}), encoding="utf-8")
    async with stdio_client(config) as client:
        result = await client.call_tool("lint_flows", {"codes": ["worker-queue-not-registered"]})
        assert not result.is_error
        [finding] = result.structured_content["findings"]
        assert finding["file"] == "workers-runners/worker-order/src/workers/audit.worker.ts"
        assert [e["file"] for e in finding["evidence"]][:2] == [finding["file"],
                                                                "workers-runners/worker-order/src/app.module.ts"]
