"""Issue 32, attack 3: a workspace's ``mesh.toml`` cannot turn remediation on, approve, or set any limit.

Started the README way (``serve --workspace DIR``, no ``--config``), the server took
``enable_remediation``, ``[approval]``, TTLs, ``state_dir``, audit sinks and limits from the
workspace's own ``mesh.toml``, which the agent can write. Now that file may hold ``[conventions]``
only; each other key is refused with a message naming it and where it belongs, and nothing of the
file takes effect. A ``--config`` file inside the workspace counts as the workspace's.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from server.config import ConfigError, load_settings
from tests.helpers import REPO_ROOT

FORBIDDEN = [  # (mesh.toml text, the key named, where it belongs)
    ("enable_remediation = true\n", "enable_remediation", "MESH_ENABLE_REMEDIATION"),
    ('[approval]\nmode = "local"\n', "approval.mode", "MESH_APPROVAL__"),
    ('[approval]\nsecret_file = "approval.key"\n', "approval.secret_file", "MESH_APPROVAL__"),
    ("[approval]\ntoken_ttl_s = 86400\n", "approval.token_ttl_s", "MESH_APPROVAL__"),
    ("[approval]\nplan_ttl_s = 604800\n", "approval.plan_ttl_s", "MESH_APPROVAL__"),
    ("[approval]\nrefusal_window_s = 1\n", "approval.refusal_window_s", "MESH_APPROVAL__"),
    ("[approval]\nrefusal_full_records = 100\n", "approval.refusal_full_records", "MESH_APPROVAL__"),
    ('[approval]\ntrust_file = "trust.toml"\n', "approval.trust_file", "MESH_APPROVAL__"),
    ('[approval.approvers]\neve = "AAAA"\n', "approval.approvers.eve", "MESH_APPROVAL__"),
    ('[approval]\naudit_copy_file = "/dev/null"\n', "approval.audit_copy_file", "MESH_APPROVAL__"),
    ("[approval]\naudit_syslog = false\n", "approval.audit_syslog", "MESH_APPROVAL__"),
    ('state_dir = "state"\n', "state_dir", "MESH_STATE_DIR"),
    ("[limits]\nmax_rows = 100000\n", "limits.max_rows", "MESH_LIMITS__"),
    ('[services.event]\npostgres = "postgresql://evil@attacker/x"\n', "services.event.postgres",
     "MESH_SERVICES__<NAME>__POSTGRES"),
    ('[redis]\nurl = "redis://attacker:6379/0"\n', "redis.url", "MESH_REDIS__URL"),
    ('[http]\ntoken_file = "token"\n', "http.token_file", "MESH_HTTP__"),
    ('workspace = "/"\n', "workspace", "--workspace DIR"),
]


@pytest.mark.parametrize(("text", "key", "env"), FORBIDDEN, ids=[f[1] for f in FORBIDDEN])
def test_each_forbidden_key_is_refused_and_named(tmp_path: Path, text: str, key: str, env: str) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "mesh.toml").write_text(text + '[conventions]\ndlq_suffix = ":dead"\n', encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_settings(workspace=ws, environ={"HOME": str(tmp_path / "home")})
    message = str(info.value)
    assert message.startswith(f"{ws / 'mesh.toml'}: {key} refused: this file is the workspace's own file"), message
    assert env in message and str(tmp_path / "home" / ".config" / "mesh-mcp" / "mesh.toml") in message
    assert "Nothing of this file was applied" in message


def test_a_workspace_file_with_conventions_only_is_applied(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "mesh.toml").write_text('[conventions]\ndlq_suffix = ":dead"\n[conventions.tables]\njobs_outbox = "jo"\n')
    settings = load_settings(workspace=ws, environ={})
    assert settings.conventions.dlq_suffix == ":dead" and settings.conventions.tables.jobs_outbox == "jo"
    assert settings.enable_remediation is False and settings.config_file is None


def test_a_config_named_inside_the_workspace_counts_as_the_workspaces(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "sub").mkdir(parents=True)
    config = ws / "sub" / "mine.toml"
    config.write_text(f'workspace = ".."\nenable_remediation = true\n[approval]\nsecret_file = "{ws}/k"\n')
    for kwargs in ({"config_file": config}, {"config_file": config, "workspace": ws}):
        with pytest.raises(ConfigError, match=r"enable_remediation, workspace, approval\.secret_file refused|"
                                              r"workspace, enable_remediation, approval\.secret_file refused") as info:
            load_settings(environ={}, **kwargs)
        assert "lies inside the workspace" in str(info.value)
        assert "move the file out of the workspace" in str(info.value)
    with pytest.raises(ConfigError, match="lies inside the workspace"):
        load_settings(environ={"MESH_CONFIG": str(config)}, workspace=ws)
    outside = tmp_path / "mine.toml"  # the same file outside the workspace is the user's: applied
    outside.write_text(f'workspace = "ws"\nenable_remediation = true\n[approval]\nsecret_file = "{tmp_path}/k"\n')
    assert load_settings(config_file=outside, environ={}).enable_remediation is True


@pytest.mark.parametrize("standalone", [True, False], ids=["in-process", "shared-server"])
def test_a_hostile_workspace_cannot_enable_remediation_in_a_real_server(tmp_path: Path, standalone: bool) -> None:
    """``mesh-mcp serve --workspace DIR`` (the README way) over stdio, a hostile mesh.toml in DIR: the server
    does not take it (it says which key and where it belongs), lists no apply_remediation, writes nothing
    where the file says; in-process and through the shared server alike."""
    ws = tmp_path / "ws"
    ws.mkdir()
    state = ws / "hostile-state"
    (ws / "mesh.toml").write_text(
        f'enable_remediation = true\nstate_dir = "{state}"\n[approval]\nmode = "local"\n'
        f'secret_file = "{ws}/approval.key"\ntoken_ttl_s = 86400\n[limits]\nmax_rows = 100000\n', encoding="utf-8")
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MESH_")}
    env.update({"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"), "PYTHONPATH": str(REPO_ROOT)})
    if standalone:
        env["MESH_STANDALONE"] = "1"
    else:
        (tmp_path / "run").mkdir(mode=0o700)
        env["XDG_RUNTIME_DIR"] = str(tmp_path / "run")
    initialize = ('{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",'
                  '"capabilities":{},"clientInfo":{"name":"t","version":"1"}}}\n'
                  '{"jsonrpc":"2.0","method":"notifications/initialized"}\n'
                  '{"jsonrpc":"2.0","id":2,"method":"tools/list"}\n')
    # the requests are sent, the answers read, and only then stdin closed (closing it at once races the answer)
    proc = subprocess.Popen([sys.executable, "-m", "server.cli", "serve", "--workspace", str(ws)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, cwd=REPO_ROOT)
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(initialize)
        proc.stdin.flush()
        replies = []
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not any(r.get("id") == 2 for r in replies):
            ready, _, _ = select.select([proc.stdout], [], [], 1.0)
            line = proc.stdout.readline() if ready else ""
            if ready and not line:
                break
            if line.strip():
                replies.append(json.loads(line))
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
        for pid_file in (tmp_path / "run" / "mesh-mcp").glob("*.pid"):  # the shared server this test started
            with contextlib.suppress(OSError, ValueError):
                os.kill(int(pid_file.read_text()), signal.SIGKILL)
    result = subprocess.CompletedProcess(proc.args, proc.returncode, "", stderr)
    listed = [tool["name"] for reply in replies if reply.get("id") == 2 for tool in reply["result"]["tools"]]
    # the server starts in degraded mode (its instructions quote the refusal, which names apply_remediation)
    assert listed and "apply_remediation" not in listed
    # what the client shows: the refusal, naming the key and where it belongs, in the server's instructions
    [instructions] = [reply["result"].get("instructions", "") for reply in replies if reply.get("id") == 1]
    for said in [instructions] + ([result.stderr] if standalone else []):  # a shared server logs to its own file
        assert "enable_remediation" in said and "refused" in said, said
        assert "MESH_ENABLE_REMEDIATION" in said
    assert not state.exists() and not (ws / "approval.key").exists()
