"""``mesh-mcp approve`` and ``mesh-mcp approver init``: the human side, and its honest limits."""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from server.approval.audit import audit_log
from server.approval.cli import approve_plan, init_approver
from server.approval.keys import fingerprint, parse_public_key
from server.approval.tokens import verify_token
from server.config import load_settings
from server.connections import Connections
from server.errors import RemediationRefused
from tests.helpers import REPO_ROOT
from tests.remediation.conftest import STREAM, Poison, approve
from tools.remediation import store
from tools.remediation.operations import render
from tools.remediation.planner import Request, propose


def _config(mesh_config, tmp_path: Path, outbox_db: str, redis_url: str, **approval) -> Path:
    approval.setdefault("secret_file", str(tmp_path / "secret" / "approval.key"))
    return mesh_config({
        "state_dir": str(tmp_path / "state"),
        "redis": {"url": redis_url},
        "services": {"event": {"postgres": outbox_db}},
        "approval": approval,
    })


async def _plan(settings):
    connections = Connections(settings)
    try:
        return await propose(settings, connections, Request("dlq_replay", STREAM, None, None, None, None))
    finally:
        await connections.aclose()


def _cli(*args: str, **kw) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.run([sys.executable, "-m", "server.cli", *args], capture_output=True, text=True, env=env,
                          cwd=REPO_ROOT, timeout=60, **kw)


@pytest.mark.anyio
async def test_approve_with_piped_stdin_is_refused(tmp_path, mesh_config, outbox_db, redis_url, redis_client):
    config = _config(mesh_config, tmp_path, outbox_db, redis_url)
    settings = load_settings(config_file=config, environ={})
    Poison(redis_client, outbox_db, settings)
    plan = await _plan(settings)
    assert plan.approve_command == f"mesh-mcp approve {plan.plan_id} --config {config.resolve()}"
    result = _cli("approve", plan.plan_id, "--config", str(config), input="ABCDEF\n")
    assert result.returncode == 2
    assert "not an interactive terminal" in result.stderr
    assert result.stdout == ""
    assert audit_log(settings).read()[-1]["result"] == "not_a_terminal"
    assert not (tmp_path / "secret" / "approval.key").exists()  # not even the secret was created
    result = _cli("approver", "init", "--id", "eve", "--out", str(tmp_path / "eve.key"), input="x" * 20 + "\n")
    assert result.returncode == 2 and "not an interactive terminal" in result.stderr
    assert not (tmp_path / "eve.key").exists()


@pytest.mark.anyio
async def test_wrong_code_and_unusable_plans_are_refused(settings, poison, redis_client):
    plan = await _plan(settings)
    out = io.StringIO()
    with pytest.raises(RemediationRefused, match="code did not match"):
        approve_plan(settings, plan.plan_id, is_tty=True, ask=lambda p: "AAAAAA", ask_secret=lambda p: "", out=out)
    shown = out.getvalue()
    for step in plan.steps:  # the human saw every exact command
        assert all(line in shown for line in step.command.splitlines())
    assert plan.plan_sha256 in shown and "local mode" in shown
    path = store.plan_path(settings, plan.plan_id)
    path.write_text(path.read_text().replace(plan.summary, "something else"))
    with pytest.raises(RemediationRefused, match="edited"):
        approve(settings, plan.plan_id)
    results = [r["result"] for r in audit_log(settings).read() if r["event"] == "approval_refused"]
    assert results == ["wrong_code", "plan_unusable"]


@pytest.mark.anyio
async def test_approver_init_then_signature_approval(tmp_path, mesh_config, outbox_db, redis_url, redis_client):
    out = io.StringIO()
    answers = iter(["a long passphrase here", "a long passphrase here"])
    line = init_approver("alice", tmp_path / "keys" / "alice.key", is_tty=True, ask_secret=lambda p: next(answers),
                         out=out, scrypt_n=2**10)
    assert re.fullmatch(r'alice = "[A-Za-z0-9+/]{43}="', line)
    with pytest.raises(Exception, match="differ"):
        answers = iter(["a long passphrase here", "another passphrase!!"])
        init_approver("bob", tmp_path / "keys" / "bob.key", is_tty=True, ask_secret=lambda p: next(answers),
                      out=out, scrypt_n=2**10)
    assert not (tmp_path / "keys" / "bob.key").exists()
    trust = tmp_path / "trust" / "trust.toml"
    trust.parent.mkdir()
    trust.write_text('mode = "signature"\n[approvers]\n' + line + "\n")
    config = _config(mesh_config, tmp_path, outbox_db, redis_url, trust_file=str(trust))
    settings = load_settings(config_file=config, environ={})
    assert settings.approval.mode == "signature" and set(settings.approval.approvers) == {"alice"}
    Poison(redis_client, outbox_db, settings)
    plan = await _plan(settings)
    assert "signature mode" in plan.approval_note and "trust check fails" in plan.approval_note
    assert plan.approve_command.endswith("--approver alice")  # the key is not this OS user's default one
    fp = fingerprint(parse_public_key(line.split('"')[1]))
    asked: list[str] = []

    def no_passphrase(prompt: str) -> str:
        asked.append(prompt)
        return "a long passphrase here"

    # no key file: refused before any code or passphrase is asked
    out = io.StringIO()
    with pytest.raises(RemediationRefused, match="not found"):
        approve_plan(settings, plan.plan_id, is_tty=True, ask=lambda p: asked.append(p) or "", out=out,
                     ask_secret=no_passphrase, approver="alice", key_path=tmp_path / "keys" / "missing.key")
    assert asked == []
    screen = out.getvalue()  # the human saw who approves, from where, and the trust check, before anything
    assert f"approvers from the trust file {trust}" in screen and f"approver alice  {fp}" in screen
    assert "trust check: FAILED" in screen and "could have added its own approver key" in screen
    assert "type the code" not in screen
    copy = tmp_path / "elsewhere" / "plan.json"  # approved from a copy of the plan, e.g. on another machine
    copy.parent.mkdir()
    shutil.copy(store.plan_path(settings, plan.plan_id), copy)
    token = approve(settings, plan.plan_id, key_path=tmp_path / "keys" / "alice.key", plan_file=copy,
                    ask_secret=lambda p: "a long passphrase here")
    claims = verify_token(settings, token, plan_id=plan.plan_id, plan_sha256=plan.plan_sha256)
    assert claims.approver == "alice" and claims.mode == "signature"
    approved = [r for r in audit_log(settings).read() if r["event"] == "approved"]
    assert approved[-1]["approver"] == "alice" and token not in str(approved)


@pytest.mark.anyio
@pytest.mark.skipif(sys.platform != "linux", reason="uses a Linux pseudo-terminal")
async def test_an_agent_driving_a_pty_gets_a_local_token(tmp_path, mesh_config, outbox_db, redis_url, redis_client):
    """The documented limit of local mode: a program that reads the screen can type the code back.

    (In signature mode it would then be asked for a passphrase it does not have.)
    """
    config = _config(mesh_config, tmp_path, outbox_db, redis_url)
    settings = load_settings(config_file=config, environ={})
    Poison(redis_client, outbox_db, settings)
    plan = await _plan(settings)
    master, slave = os.openpty()
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "server.cli", "approve", plan.plan_id, "--config", str(config)],
                            stdin=slave, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            cwd=REPO_ROOT)
    os.close(slave)
    try:
        code = None
        screen = []
        for line in proc.stderr:  # type: ignore[union-attr]
            screen.append(line)
            found = re.search(r"type the code (\w+)", line)
            if found:
                code = found.group(1)
                break
        assert code is not None
        shown = "".join(screen)
        assert "Approval gate (checked now, by this command):" in shown and "approval mode: local" in shown
        assert f"Server's note in the plan: {plan.approval_note}" in shown
        os.write(master, f"{code}\n".encode())
        stdout, rest = proc.communicate(timeout=60)
        head = re.search(r"Audit log head now: (\d+):([0-9a-f]{64})", rest)
        assert head is not None and audit_log(settings).head().sha256 == head.group(2)
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
    token = stdout.strip()
    assert proc.returncode == 0 and "\n" not in token  # the token is the only thing on stdout
    assert verify_token(settings, token, plan_id=plan.plan_id, plan_sha256=plan.plan_sha256).approver.startswith(
        "local:")


@pytest.mark.anyio
async def test_a_plan_file_cannot_drive_the_approvers_terminal(settings, poison, redis_client):
    plan = await _plan(settings)
    trick = "all good\x1b[1A\x1b[2K\u202e"
    replay = plan.steps[1]
    message = replay.operation.messages[0]
    fields = [*message.fields[:-1], ("event", message.fields[-1][1] + trick)]
    op = replay.operation.model_copy(update={"messages": [message.model_copy(update={"fields": fields})]})
    steps = list(plan.steps)
    steps[1] = replay.model_copy(update={"operation": op, "command": render(op, settings.conventions)})
    forged = plan.model_copy(update={"summary": trick, "steps": steps}).sealed()
    store.plan_path(settings, plan.plan_id).write_text(forged.model_dump_json())
    out = io.StringIO()
    with pytest.raises(RemediationRefused):
        approve_plan(settings, plan.plan_id, is_tty=True, ask=lambda p: "", ask_secret=lambda p: "", out=out)
    shown = out.getvalue()
    assert "\x1b" not in shown and "\u202e" not in shown
    assert "all good\\u{001b}[1A" in shown  # the summary, escaped
    assert "\\x1b[1A" in shown  # the XADD value, in redis-cli escape syntax
