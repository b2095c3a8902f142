"""Issue 23, routes 1 and 2: who the approvers are cannot be changed by the agent.

Signature mode reads the approvers (and the mode) only from a trust file; the environment
and the workspace's mesh.toml are refused, and the trust file with every folder above it
must be out of the server user's reach (checked by mode bits here, and as a real second OS
user where ``useradd`` works).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest

from server.approval.keys import create_approver_key
from server.approval.trust import check_gate, gate_status, protection_problems, user_trust_path
from server.config import ConfigError, load_settings
from server.errors import RemediationRefused
from tests.helpers import REPO_ROOT, in_process_client
from tools.remediation.planner import approval_note

KEY = "11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo="
EVE = "Mx3wF0mJnf1HoTNzGSqQ9W9ufGCKoHeF9VmbnHk3BGo="


def _trust(tmp_path: Path, approvers: dict[str, str] | None = None) -> Path:
    path = tmp_path / "trust" / "trust.toml"
    path.parent.mkdir(exist_ok=True)
    body = "".join(f'{who} = "{key}"\n' for who, key in (approvers or {"alice": KEY}).items())
    path.write_text('mode = "signature"\n[approvers]\n' + body)
    return path


def _load(trust: Path | None = None, environ: dict[str, str] | None = None, **kw):
    overrides = {"approval": {"trust_file": str(trust)}} if trust else None
    return load_settings(environ=environ or {}, overrides=overrides, **kw)


# -- route 1: the environment ----------------------------------------------------------


@pytest.mark.parametrize(("environ", "message"), [
    ({"MESH_APPROVAL__APPROVERS__EVE": EVE}, "MESH_APPROVAL__APPROVERS refused"),
    ({"MESH_APPROVAL__MODE": "local"}, "MESH_APPROVAL__MODE refused"),
    ({"MESH_APPROVAL__TOKEN_TTL_S": "86400"}, "MESH_APPROVAL__TOKEN_TTL_S refused"),
])
def test_environment_cannot_change_the_approvers_in_signature_mode(tmp_path, environ, message) -> None:
    trust = _trust(tmp_path)
    assert _load(trust).approval.approvers == {"alice": KEY}
    with pytest.raises(ConfigError, match=message):
        _load(trust, environ)


def test_environment_cannot_name_the_trust_file_nor_switch_signature_on_with_its_own_keys(tmp_path) -> None:
    with pytest.raises(ConfigError, match="MESH_APPROVAL__TRUST_FILE is refused"):
        _load(environ={"MESH_APPROVAL__TRUST_FILE": str(_trust(tmp_path, {"eve": EVE}))})
    with pytest.raises(ConfigError, match="refused"):
        _load(environ={"MESH_APPROVAL__MODE": "signature", "MESH_APPROVAL__APPROVERS__EVE": EVE})
    with pytest.raises(ConfigError, match="only the command-line flag"):
        _load(environ={"MESH_APPROVAL__ALLOW_UNPROTECTED_APPROVERS": "true"})


def test_no_setting_replaces_the_system_trust_file(tmp_path, monkeypatch) -> None:
    import server.approval.trust as trust_module

    system = _trust(tmp_path)  # stands for /etc/mesh-mcp/trust.toml (the test does not touch /etc)
    monkeypatch.setattr(trust_module, "system_trust_path", lambda: system)
    assert _load().approval.trust_file == str(system)  # exists: signature mode, without any setting
    (tmp_path / "eve").mkdir()
    other = _trust(tmp_path / "eve", {"eve": EVE})
    with pytest.raises(ConfigError) as info:
        _load(other)
    assert str(info.value) == (
        f"[approval] trust_file = {str(other)!r} is refused: the system trust file {system} exists, and no "
        "setting can replace it (remove the setting, or have its owner edit that file)")
    assert _load(system).approval.approvers == {"alice": KEY}  # naming the same file is fine


def test_the_server_refuses_to_start_with_an_approver_in_its_environment(tmp_path, mesh_config) -> None:
    """As an agent would do it: a variable added to the MCP client's server config. The configuration is
    refused: ``serve`` starts only in its degraded mode (every tool answering with the refusal, nothing
    registered that could apply a plan: tests/foundation/test_config_errors_reach_the_user.py), and
    ``doctor`` exits 2."""
    config = mesh_config({"state_dir": str(tmp_path / "state"), "approval": {"trust_file": str(_trust(tmp_path))}})
    env = {k: v for k, v in os.environ.items() if not k.startswith("MESH_")}
    env.update(PYTHONPATH=str(REPO_ROOT), MESH_APPROVAL__APPROVERS__EVE=EVE, MESH_STANDALONE="1")
    result = subprocess.run([sys.executable, "-m", "server.cli", "serve", "--config", str(config),
                             "--enable-remediation"], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                            env=env, cwd=REPO_ROOT, timeout=60)
    assert "MESH_APPROVAL__APPROVERS refused" in result.stderr and "degraded mode" in result.stderr
    assert result.stdout == ""
    doctor = subprocess.run([sys.executable, "-m", "server.cli", "doctor", "--config", str(config)],
                            capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=60)
    assert doctor.returncode == 2 and "MESH_APPROVAL__APPROVERS refused" in doctor.stderr


def test_a_bad_trust_file_is_a_configuration_error(tmp_path) -> None:
    trust = _trust(tmp_path, {"alice": "not a key"})
    with pytest.raises(ConfigError, match=r"approvers\.alice: not base64"):
        _load(trust)
    trust.write_text('mode = "local"\n')
    with pytest.raises(ConfigError, match="invalid 'mode'"):
        _load(trust)


def test_the_server_checks_the_gate_at_start(tmp_path, mesh_config) -> None:
    config = mesh_config({"state_dir": str(tmp_path / "state"), "approval": {"trust_file": str(_trust(tmp_path))}})
    env = {k: v for k, v in os.environ.items() if not k.startswith("MESH_")}
    env["PYTHONPATH"] = str(REPO_ROOT)
    result = subprocess.run([sys.executable, "-m", "server.cli", "serve", "--config", str(config),
                             "--enable-remediation"], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                            env=env, cwd=REPO_ROOT, timeout=60)  # stdin at EOF: the stdio server stops
    assert "approval gate:" in result.stderr and "apply_remediation refuses until this is fixed" in result.stderr


def test_the_home_folder_comes_from_the_account_not_from_HOME(monkeypatch, tmp_path) -> None:
    before = user_trust_path()
    monkeypatch.setenv("HOME", str(tmp_path))
    assert user_trust_path() == before


# -- route 1: the workspace's mesh.toml -------------------------------------------------


def test_a_replaced_workspace_config_cannot_add_an_approver(tmp_path) -> None:
    """mesh.toml read-only, its folder writable: the agent swaps the file with os.replace."""
    trust = _trust(tmp_path)
    ws = tmp_path / "ws"
    ws.mkdir()
    config = ws / "mesh.toml"
    config.write_text('[conventions]\ndlq_suffix = ":dlq"\n')  # naming hints: all a workspace's file may hold
    config.chmod(0o444)
    assert _load(trust, workspace=ws).approval.approvers == {"alice": KEY}
    forged = ws / "forged.toml"
    forged.write_text(f'[approval]\nmode = "signature"\n[approval.approvers]\neve = "{EVE}"\n')
    os.replace(forged, config)  # works: the folder is writable
    with pytest.raises(ConfigError, match=r"approval\.mode, approval\.approvers\.eve refused: this file is the "):
        _load(trust, workspace=ws)
    config.write_text('[approval]\nmode = "local"\n')
    with pytest.raises(ConfigError, match=r"approval\.mode refused"):
        _load(trust, workspace=ws)
    (tmp_path / "eve").mkdir()
    config.write_text(f'[approval]\ntrust_file = "{_trust(tmp_path / "eve", {"eve": EVE})}"\n')
    with pytest.raises(ConfigError, match=r"approval\.trust_file refused: this file is the workspace's own file"):
        load_settings(environ={}, workspace=ws)


# -- the protection check -----------------------------------------------------------------


def _tree(tmp_path: Path) -> Path:
    folder = tmp_path / "etc" / "mesh-mcp"
    folder.mkdir(parents=True)
    for d in (tmp_path, tmp_path / "etc", folder):
        d.chmod(0o755)
    trust = folder / "trust.toml"
    trust.write_text(f'[approvers]\nalice = "{KEY}"\n')
    trust.chmod(0o644)
    return trust


def test_protection_by_mode_bits(tmp_path) -> None:
    """Evaluated for another uid than the files' owner (works as root or not, no chown)."""
    trust = _tree(tmp_path)
    owner = trust.stat().st_uid
    other = owner + 4242
    assert protection_problems(trust, uid=other, gids=set()) == []
    owned = protection_problems(trust, uid=owner, gids=set())
    assert (owner == 0 and "runs as root" in owned[0]) or any(f"{trust} is owned by the server's user" in p
                                                            for p in owned)
    folder = trust.parent
    folder.chmod(0o775)
    assert protection_problems(trust, uid=other, gids={folder.stat().st_gid}) == [
        f"{folder} is writable by group {folder.stat().st_gid}, a group of the server's user"]
    assert protection_problems(trust, uid=other, gids=set()) == []
    folder.chmod(0o777)
    assert protection_problems(trust, uid=other, gids=set()) == [f"{folder} is writable by every user"]
    folder.chmod(0o1777)  # sticky, like /tmp: others cannot rename an entry they do not own
    assert protection_problems(trust, uid=other, gids=set()) == []
    folder.chmod(0o755)
    link_dir = tmp_path / "agent"
    link_dir.mkdir(mode=0o777)
    link_dir.chmod(0o777)
    (link_dir / "trust.toml").symlink_to(trust)
    assert protection_problems(link_dir / "trust.toml", uid=other, gids=set()) == [
        f"{link_dir} is writable by every user"]
    assert "no trust file" in protection_problems(tmp_path / "nothing.toml", uid=other, gids=set())[0]


def _second_user() -> str | None:
    if os.geteuid() != 0 or shutil.which("useradd") is None or sys.platform != "linux":
        return None
    name = f"mesh-t{uuid.uuid4().hex[:8]}"
    result = subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
                            capture_output=True, text=True)
    return name if result.returncode == 0 else None


def test_protection_as_a_second_os_user() -> None:
    user = _second_user()
    if user is None:
        if os.environ.get("CI") == "true" and os.geteuid() == 0:
            pytest.fail("CI runs as root: useradd must work here")
        pytest.skip("needs root and useradd to create a second OS user (the mode-bit test covers the rules)")
    base = Path(tempfile.mkdtemp(prefix="mesh-trust-", dir="/tmp"))
    try:
        trust = _tree(base)
        import pwd

        uid, gid = pwd.getpwnam(user).pw_uid, pwd.getpwnam(user).pw_gid

        def as_user(action) -> object:
            """Run ``action()`` in a forked child that became ``user`` (setgid/setuid): a real second user."""
            read, write = os.pipe()
            pid = os.fork()
            if pid == 0:  # the child: drop to the second user, run, report, exit without cleanup
                try:
                    os.setgroups([])
                    os.setgid(gid)
                    os.setuid(uid)
                    os.write(write, json.dumps({"ok": action()}).encode())
                except BaseException as exc:
                    os.write(write, json.dumps({"error": repr(exc)}).encode())
                finally:
                    os._exit(0)
            os.close(write)
            with os.fdopen(read, "rb") as fh:
                data = json.loads(fh.read() or b"{}")
            os.waitpid(pid, 0)
            assert "ok" in data, data
            return data["ok"]

        def check() -> dict:
            assert os.geteuid() == uid
            settings = load_settings(environ={}, overrides={"approval": {"trust_file": str(trust)}})
            return gate_status(settings).as_dict()

        def replace() -> bool:
            new = trust.with_name("trust.new")
            new.write_text("[approvers]\n")
            os.replace(new, trust)
            return True

        protected = as_user(check)
        assert protected["trust_check"] == "ok" and protected["approvers"][0]["id"] == "alice", protected
        os.chown(trust, uid, -1)  # the server's user owns the file: it could chmod and edit it
        assert any("owned by the server's user" in p for p in as_user(check)["problems"])
        os.chown(trust, 0, -1)
        os.chown(trust.parent, uid, -1)  # the folder is the user's: it can os.replace the file
        problems = as_user(check)["problems"]
        assert problems == [f"{trust.parent} is owned by the server's user (uid {uid}), who can change it or its "
                            "mode"], problems
        assert as_user(replace)  # and the route is real: the user did replace the root-owned file
        assert trust.read_text() == "[approvers]\n"
    finally:
        shutil.rmtree(base, ignore_errors=True)
        subprocess.run(["userdel", user], capture_output=True)


# -- the gate, before every apply, and where it is shown -----------------------------------


def test_the_gate_reads_the_trust_file_again(tmp_path) -> None:
    trust = _trust(tmp_path)
    settings = _load(trust)
    trust.write_text(f'[approvers]\nalice = "{KEY}"\neve = "{EVE}"\n')  # changed after the start
    status = gate_status(settings)
    assert any("differ" in p for p in status.problems)
    with pytest.raises(RemediationRefused, match="approver set is not protected"):
        check_gate(settings)


@pytest.mark.anyio
async def test_allow_unprotected_is_shown_by_server_info_and_plans(tmp_path, redis_url) -> None:
    alice = create_approver_key(tmp_path / "alice.key", "alice", "correct horse battery", scrypt_n=2**10)
    trust = _trust(tmp_path, {"alice": alice})
    settings = load_settings(environ={}, overrides={
        "state_dir": str(tmp_path / "state"), "redis": {"url": redis_url}, "enable_remediation": True,
        "approval": {"trust_file": str(trust), "allow_unprotected_approvers": True}})
    assert "--allow-unprotected-approvers" in approval_note(settings)
    async with in_process_client(settings) as client:
        info = await client.call_tool("server_info", {})
    gate = info.structured_content["approval_gate"]
    assert gate["allow_unprotected_approvers"] is True and gate["trust_check"] == "failed"
    assert gate["approvers"][0]["id"] == "alice" and gate["approvers"][0]["fingerprint"].startswith("SHA256:")
    text = info.content[0].text
    assert "--allow-unprotected-approvers" in text and "Trust check FAILED" in text
