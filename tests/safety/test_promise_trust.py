"""Promise: in signature mode the approvers come from the trust file only, and the gate says when
the server's own user could change them.

What ``server/approval/trust.py`` guarantees, checked with real files (the machine's
``/etc/mesh-mcp`` and home folder are never written: trust files live in the test's folder and
are named by ``[approval] trust_file`` through overrides, as the command line does):

- a trust file is read strictly; every problem is a configuration error naming the file and the key;
- every source an agent could use to change who approves is refused with a sentence saying what
  to do: ``MESH_APPROVAL__*`` variables, approvers or ``mode = "local"`` in a config file, a trust
  file named in the workspace's ``mesh.toml``, ``allow_unprotected_approvers`` outside the command line;
- :func:`protection_problems` names each file or folder on the way that the server's user owns,
  or can write through one of its groups or as everyone (a sticky folder is fine when the entry
  below it is someone else's), once each; root is never protected;
- the gate status, its lines and its dict say all of that, and ``check_gate`` refuses while it
  fails unless the server was started with ``--allow-unprotected-approvers``.
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

import pytest

from server.approval.keys import fingerprint, parse_public_key
from server.approval.trust import (
    GateStatus,
    apply_trust_policy,
    check_gate,
    default_trust_path,
    gate_status,
    log_gate_at_start,
    protection_problems,
    read_trust_file,
    system_trust_path,
    user_trust_path,
)
from server.config import ConfigError, load_settings
from server.errors import RemediationRefused

KEY = "11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo="
EVE = "Mx3wF0mJnf1HoTNzGSqQ9W9ufGCKoHeF9VmbnHk3BGo="
OTHER_UID = 54321  # a user that owns nothing here: the files belong to the test's user


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _trust(tmp_path: Path, body: str = f'mode = "signature"\n[approvers]\nalice = "{KEY}"\n') -> Path:
    return _write(tmp_path / "trust" / "trust.toml", body)


def _load(trust: Path | None, *, environ: dict[str, str] | None = None, approval: dict | None = None, **kw):
    overrides = {"state_dir": "/nonexistent-state", "approval": {**({"trust_file": str(trust)} if trust else {}),
                                                                  **(approval or {})}}
    return load_settings(environ=environ or {}, overrides=overrides, **kw)


# -- reading the trust file --------------------------------------------------------------------


def test_a_trust_file_gives_the_mode_the_approvers_and_the_audit_copies(tmp_path: Path) -> None:
    trust = _trust(tmp_path, 'audit_copy_file = "/var/log/mesh/audit.log"\naudit_syslog = true\n'
                             f'[approvers]\nalice = "{KEY}"\n"bob.ops@x" = "{EVE}"\n')
    read = read_trust_file(trust)
    assert (read.mode, read.approvers, read.audit_copy_file, read.audit_syslog) == (
        "signature", {"alice": KEY, "bob.ops@x": EVE}, "/var/log/mesh/audit.log", True)
    settings = _load(trust)
    approval = settings.approval
    assert (approval.mode, approval.trust_file, approval.approvers) == (
        "signature", str(trust), {"alice": KEY, "bob.ops@x": EVE})
    assert (approval.audit_copy_file, approval.audit_syslog) == ("/var/log/mesh/audit.log", True)


def test_a_trust_file_without_audit_settings_leaves_them_alone(tmp_path: Path) -> None:
    approval = _load(_trust(tmp_path)).approval
    assert (approval.audit_copy_file, approval.audit_syslog) == (None, False)


@pytest.mark.parametrize(("body", "problem"), [
    ('mode = "local"\n', "invalid 'mode': Input should be 'signature' (keys: mode, [approvers], audit_copy_file, "
                         "audit_syslog)"),
    ('approver = "x"\n', "invalid 'approver': Extra inputs are not permitted (keys: mode, [approvers], "
                         "audit_copy_file, audit_syslog)"),
    ('[approvers]\nalice = 1\n', "invalid 'approvers.alice': Input should be a valid string (keys: mode, "
                                 "[approvers], audit_copy_file, audit_syslog)"),
    (f'[approvers]\n"bob smith" = "{KEY}"\n', "approver id 'bob smith': 1-64 letters, digits and . _ @ -"),
    (f'[approvers]\n"bob\\n" = "{KEY}"\n', "approver id 'bob\\n': 1-64 letters, digits and . _ @ -"),
    ('[approvers]\nalice = "not a key"\n', "approvers.alice: not base64; paste the line printed by "
                                           "`mesh-mcp approver init`"),
])
def test_a_bad_trust_file_names_itself_and_the_key(tmp_path: Path, body: str, problem: str) -> None:
    trust = _trust(tmp_path, body)
    for read in (lambda: read_trust_file(trust), lambda: _load(trust)):
        with pytest.raises(ConfigError) as info:
            read()
        assert str(info.value) == f"trust file {trust}: {problem}"


def test_an_unreadable_or_broken_trust_file_is_named(tmp_path: Path) -> None:
    folder = tmp_path / "is-a-folder.toml"
    folder.mkdir()
    with pytest.raises(ConfigError) as info:
        read_trust_file(folder)
    assert str(info.value) == f"trust file {folder}: cannot be read (Is a directory)"
    for content in (b"[approvers\n", b"mode = \"sig\xff\"\n"):
        broken = tmp_path / "broken.toml"
        broken.write_bytes(content)
        with pytest.raises(ConfigError) as info:
            read_trust_file(broken)
        assert str(info.value).startswith(f"trust file {broken}: not valid TOML: ")


# -- what an agent could use to change the approvers ---------------------------------------------


def test_the_default_places_of_the_trust_file() -> None:
    """``/etc/mesh-mcp/trust.toml``, then ``~<account>/.config/mesh-mcp/trust.toml`` (home from pwd)."""
    import pwd

    assert system_trust_path() == Path("/etc/mesh-mcp/trust.toml")
    home = Path(pwd.getpwuid(os.geteuid()).pw_dir)
    assert user_trust_path() == home / ".config" / "mesh-mcp" / "trust.toml"
    if system_trust_path().exists() or user_trust_path().exists():
        pytest.skip("this machine has a trust file: the fallback to the system place is not observable")
    assert default_trust_path() == Path("/etc/mesh-mcp/trust.toml")


def test_no_trust_file_and_no_signature_asked_is_local_mode(tmp_path: Path) -> None:
    approval = _load(None).approval
    assert (approval.mode, approval.trust_file) == ("local", None)


def test_asking_for_signature_mode_without_a_trust_file_fails_closed(tmp_path: Path) -> None:
    missing = tmp_path / "none" / "trust.toml"
    approval = _load(missing).approval  # named but absent: signature mode with no approvers
    assert (approval.mode, approval.trust_file, approval.approvers) == ("signature", str(missing), {})
    config = _write(tmp_path / "etc" / "mesh.toml", f'[approval]\nmode = "signature"\ntrust_file = "{missing}"\n')
    assert load_settings(environ={}, config_file=config).approval.mode == "signature"


def test_the_environment_cannot_name_the_trust_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        _load(None, environ={"MESH_APPROVAL__TRUST_FILE": str(_trust(tmp_path))})
    assert str(info.value) == (
        "MESH_APPROVAL__TRUST_FILE is refused: the trust file is never named by an environment variable (an agent "
        "can add those to the MCP client's server config); use the default place /etc/mesh-mcp/trust.toml")


def test_allow_unprotected_comes_only_from_the_command_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        _load(None, environ={"MESH_APPROVAL__ALLOW_UNPROTECTED_APPROVERS": "true"})
    assert str(info.value) == ("the MESH_* environment: allow_unprotected_approvers is refused there: only the "
                               "command-line flag `mesh-mcp serve --allow-unprotected-approvers` sets it")
    config = _write(tmp_path / "etc" / "mesh.toml", "[approval]\nallow_unprotected_approvers = true\n")
    with pytest.raises(ConfigError) as info:
        load_settings(environ={}, config_file=config)
    assert str(info.value) == (f"{config}: allow_unprotected_approvers is refused there: only the command-line "
                               "flag `mesh-mcp serve --allow-unprotected-approvers` sets it")
    assert _load(_trust(tmp_path), approval={"allow_unprotected_approvers": True}).approval.allow_unprotected_approvers


def test_in_signature_mode_no_approval_setting_comes_from_the_environment(tmp_path: Path) -> None:
    trust = _trust(tmp_path)
    with pytest.raises(ConfigError) as info:
        _load(trust, environ={"MESH_APPROVAL__TOKEN_TTL_S": "60", "MESH_APPROVAL__APPROVERS__EVE": EVE})
    assert str(info.value) == (
        "signature mode: MESH_APPROVAL__APPROVERS, MESH_APPROVAL__TOKEN_TTL_S refused: in signature mode nothing of "
        "[approval] comes from MESH_* variables (an agent can set them); approvers live in the trust file "
        f"{trust}. Remove the variable(s) from the server's environment")
    assert _load(None, environ={"MESH_APPROVAL__TOKEN_TTL_S": "60"}).approval.token_ttl_s == 60  # local mode: fine


def test_a_config_file_cannot_list_approvers_or_ask_for_local_mode(tmp_path: Path) -> None:
    trust = _trust(tmp_path)
    config = _write(tmp_path / "etc" / "mesh.toml", f'[approval]\ntrust_file = "{trust}"\n'
                                                    f'[approval.approvers]\neve = "{EVE}"\n')
    with pytest.raises(ConfigError) as info:
        load_settings(environ={}, config_file=config)
    assert str(info.value) == (
        f"{config}: [approval] approvers are refused in signature mode: approvers are read only from the trust file "
        f"{trust} (outside the workspace, not writable by the server's user); move them there")
    config.write_text(f'[approval]\ntrust_file = "{trust}"\nmode = "local"\n', encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_settings(environ={}, config_file=config)
    assert str(info.value) == (
        f"[approval] mode = \"local\" is refused: the trust file {trust} exists, and a trust file is the only place "
        "that decides the mode. Remove mode = \"local\" (or the trust file, as its owner)")
    missing = tmp_path / "none.toml"
    config.write_text(f'[approval]\ntrust_file = "{missing}"\nmode = "local"\n', encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_settings(environ={}, config_file=config)
    assert str(info.value).startswith("[approval] mode = \"local\" is refused: signature mode is configured, and")


def test_the_workspace_config_cannot_name_a_trust_file(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    config = _write(ws / "mesh.toml", f'[approval]\ntrust_file = "{_trust(tmp_path)}"\n')
    with pytest.raises(ConfigError) as info:
        load_settings(environ={}, workspace=ws)
    assert str(info.value).startswith(  # issue 32: nothing but [conventions] is taken from the workspace's file
        f"{config}: approval.trust_file refused: this file is the workspace's own file, which an agent working "
        "there can edit, so it may hold only [conventions]. 'approval' (it decides who approves remediation plans) "
        "belongs in your own config file")
    config.unlink()
    outside = _write(tmp_path / "etc" / "mesh.toml", f'[approval]\ntrust_file = "{_trust(tmp_path)}"\n')
    assert load_settings(environ={}, config_file=outside, workspace=ws).approval.mode == "signature"


def test_a_workspace_config_that_is_a_symlink_out_of_the_workspace_cannot_name_a_trust_file(tmp_path: Path) -> None:
    """An agent that can write the workspace can replace its mesh.toml by a symlink to a file elsewhere: the
    guarded reader refuses to follow it out of the workspace, so nothing of it (its trust_file) is read."""
    ws = tmp_path / "ws"
    ws.mkdir()
    elsewhere = _write(tmp_path / "out" / "evil.toml", f'[approval]\ntrust_file = "{_trust(tmp_path)}"\n')
    (ws / "mesh.toml").symlink_to(elsewhere)
    with pytest.raises(ConfigError) as info:
        load_settings(environ={}, workspace=ws)
    assert "mesh.toml" in str(info.value) and "a symlink to a place outside the workspace" in str(info.value)


def test_a_config_that_cannot_be_told_apart_from_the_workspace_cannot_name_a_trust_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fail closed: a relative workspace whose working folder was deleted cannot be resolved, so the
    config file counts as the workspace's and its trust_file is refused."""
    trust = _trust(tmp_path)
    config = _write(tmp_path / "etc" / "mesh.toml", f'[approval]\ntrust_file = "{trust}"\n')
    file_data = {"approval": {"trust_file": str(trust)}}

    def policy(workspace: str) -> dict:
        return apply_trust_policy({}, file_data=file_data, env_data={}, overrides={}, config_file=config,
                                  workspace=workspace)

    assert policy(str(tmp_path / "ws"))["approval"]["mode"] == "signature"  # resolvable, outside: accepted
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    with pytest.raises(ConfigError) as info:
        policy("ws")
    assert "[approval] trust_file is refused in the workspace's mesh.toml" in str(info.value)


def test_programmatic_approvers_are_kept_and_reported_by_the_gate(tmp_path: Path) -> None:
    trust = _trust(tmp_path)
    settings = _load(trust, approval={"approvers": {"eve": EVE}})
    assert settings.approval.approvers == {"eve": EVE}
    status = gate_status(settings)
    assert status.source == "settings given programmatically, not the trust file"
    assert status.problems[-1] == (
        f"the server's approvers differ from those of {trust} (set programmatically, or the trust file changed "
        "since the server started: restart it)")


# -- protection: who could change the trust file ---------------------------------------------------


def _tree(tmp_path: Path) -> Path:
    folder = tmp_path / "etc" / "mesh-mcp"
    folder.mkdir(parents=True)
    for d in (tmp_path, tmp_path / "etc", folder):
        d.chmod(0o755)
    trust = _write(folder / "trust.toml", f'[approvers]\nalice = "{KEY}"\n')
    trust.chmod(0o644)
    return trust


def test_a_tree_the_user_cannot_write_is_protected(tmp_path: Path) -> None:
    assert protection_problems(_tree(tmp_path), uid=OTHER_UID, gids=set()) == []


def test_each_reachable_entry_is_named_once_with_why(tmp_path: Path) -> None:
    trust = _tree(tmp_path)
    group = trust.stat().st_gid
    trust.chmod(0o664)
    (tmp_path / "etc").chmod(0o757)
    assert protection_problems(trust, uid=OTHER_UID, gids={group}) == [
        f"{trust} is writable by group {group}, a group of the server's user",
        f"{tmp_path / 'etc'} is writable by every user",
    ]
    assert protection_problems(trust, uid=OTHER_UID, gids={group + 1}) == [  # not one of its groups
        f"{tmp_path / 'etc'} is writable by every user"]
    owner = trust.stat().st_uid
    if owner != 0:
        assert protection_problems(trust, uid=owner, gids=set())[0] == (
            f"{trust} is owned by the server's user (uid {owner}), who can change it or its mode")


def test_the_owner_of_an_entry_is_named_even_when_its_mode_is_strict(tmp_path: Path) -> None:
    trust = _tree(tmp_path)
    os.chown(trust.parent, OTHER_UID, -1) if os.geteuid() == 0 else pytest.skip("chown needs root")
    assert protection_problems(trust, uid=OTHER_UID, gids=set()) == [
        f"{trust.parent} is owned by the server's user (uid {OTHER_UID}), who can change it or its mode"]


def test_a_sticky_folder_protects_only_entries_of_someone_else(tmp_path: Path) -> None:
    trust = _tree(tmp_path)
    trust.parent.chmod(0o1777)  # like /tmp
    assert protection_problems(trust, uid=OTHER_UID, gids=set()) == []
    if os.geteuid() != 0:
        pytest.skip("giving the file to the server's user needs root")
    os.chown(trust, OTHER_UID, -1)  # the user's own entry in a sticky folder: it can replace it
    assert protection_problems(trust, uid=OTHER_UID, gids=set()) == [
        f"{trust} is owned by the server's user (uid {OTHER_UID}), who can change it or its mode",
        f"{trust.parent} is writable by every user",
    ]


def test_a_sticky_folder_owned_by_the_user_is_not_protection(tmp_path: Path) -> None:
    trust = _tree(tmp_path)
    if os.geteuid() != 0:
        pytest.skip("chown needs root")
    trust.parent.chmod(0o1755)
    os.chown(trust.parent, OTHER_UID, -1)
    assert protection_problems(trust, uid=OTHER_UID, gids=set()) == [
        f"{trust.parent} is owned by the server's user (uid {OTHER_UID}), who can change it or its mode"]


def test_a_symlinked_folder_is_checked_as_written_and_as_resolved_once_each(tmp_path: Path) -> None:
    trust = _tree(tmp_path)
    (tmp_path / "etc").chmod(0o777)
    link = tmp_path / "link"
    link.symlink_to(trust.parent, target_is_directory=True)
    problems = protection_problems(link / "trust.toml", uid=OTHER_UID, gids=set())
    assert problems == [f"{tmp_path / 'etc'} is writable by every user"]  # via the resolved path, named once


def test_root_and_a_missing_file_are_never_protected(tmp_path: Path) -> None:
    trust = _tree(tmp_path)
    assert protection_problems(trust, uid=0, gids=set()) == [
        "the server runs as root, which can write any file: no trust file is protected from an agent running as "
        "root; run the server as an unprivileged user"]
    missing = tmp_path / "nothing.toml"
    assert protection_problems(missing, uid=OTHER_UID, gids=set()) == [
        f"no trust file at {missing}: signature mode has no approvers (create it, root-owned 0644)"]
    assert protection_problems(Path(os.path.relpath(trust)), uid=OTHER_UID, gids=set()) == []  # relative: made absolute


def test_the_server_users_own_groups_are_used_by_default(tmp_path: Path) -> None:
    """Without ``uid`` / ``gids``: this process's user, with its groups."""
    trust = _tree(tmp_path)
    me = os.geteuid()
    problems = protection_problems(trust)
    if me == 0:
        assert problems[0].startswith("the server runs as root")
    else:
        assert f"{trust} is owned by the server's user (uid {me}), who can change it or its mode" in problems


# -- the gate -------------------------------------------------------------------------------------


def test_the_gate_of_local_mode(tmp_path: Path) -> None:
    status = gate_status(_load(None))
    assert (status.mode, status.trust_file, status.source, status.protected) == ("local", None, "local mode", False)
    assert status.lines() == [
        "approval mode: local (HMAC secret readable by this OS user: stops accidents, not an agent)"]
    assert check_gate(_load(None)) == status  # local mode: nothing to refuse
    allowed = gate_status(_load(None, approval={"allow_unprotected_approvers": True}))
    assert allowed.as_dict()["allow_unprotected_approvers"] is True  # the flag is shown in local mode too


def test_the_gate_of_signature_mode_lists_approvers_with_fingerprints(tmp_path: Path) -> None:
    trust = _trust(tmp_path, f'[approvers]\nzed = "{EVE}"\nalice = "{KEY}"\n')
    status = gate_status(_load(trust))
    assert (status.mode, status.trust_file, status.source) == ("signature", str(trust), f"the trust file {trust}")
    assert status.approvers == [("alice", fingerprint(parse_public_key(KEY))),
                                ("zed", fingerprint(parse_public_key(EVE)))]
    assert status.problems == protection_problems(trust)  # run as this user: root, or the owner of the test files
    assert status.as_dict() == {
        "mode": "signature", "trust_file": str(trust), "source": f"the trust file {trust}",
        "approvers": [{"id": "alice", "fingerprint": status.approvers[0][1]},
                      {"id": "zed", "fingerprint": status.approvers[1][1]}],
        "trust_check": "failed", "problems": status.problems, "allow_unprotected_approvers": False}


def test_the_gate_sees_a_trust_file_damaged_after_the_start(tmp_path: Path) -> None:
    trust = _trust(tmp_path)
    settings = _load(trust)
    trust.write_text("[approvers\n", encoding="utf-8")
    problems = gate_status(settings).problems
    assert problems[-1].startswith(f"trust file {trust}: not valid TOML: ")
    assert gate_status(settings).source == f"the trust file {trust}"


def test_the_gate_lines_say_what_holds_and_what_fails() -> None:
    failing = GateStatus("signature", "/t/trust.toml", "the trust file /t/trust.toml", [("alice", "SHA256:ab")],
                         ["/t is writable by every user", "/t/trust.toml is writable by every user"])
    assert failing.lines() == [
        "approval mode: signature; approvers from the trust file /t/trust.toml",
        "  approver alice  SHA256:ab",
        "trust check: FAILED, an agent running as the server's user could change the approvers:",
        "  - /t is writable by every user",
        "  - /t/trust.toml is writable by every user",
    ]
    assert not failing.protected and failing.as_dict()["trust_check"] == "failed"
    holding = GateStatus("signature", "/t/trust.toml", "the trust file /t/trust.toml", [], [], allow_unprotected=True)
    assert holding.lines() == [
        "approval mode: signature; approvers from the trust file /t/trust.toml",
        "  (no approver listed)",
        "trust check: ok (/t/trust.toml and every folder above it are not writable by the server's user)",
        "WARNING: the server was started with --allow-unprotected-approvers: it applies plans even when the trust "
        "check fails",
    ]
    assert holding.protected and holding.as_dict()["trust_check"] == "ok"
    assert holding.as_dict()["allow_unprotected_approvers"] is True


def test_check_gate_refuses_while_the_check_fails_unless_allowed(tmp_path: Path) -> None:
    trust = _trust(tmp_path)
    settings = _load(trust)
    problems = gate_status(settings).problems
    assert problems  # the test's user (root, or the owner of the files) can change its own trust file
    with pytest.raises(RemediationRefused) as info:
        check_gate(settings)
    assert str(info.value) == (
        "signature mode: the approver set is not protected, so an agent running as the server's OS user could add "
        "its own key: " + "; ".join(problems) + ". Fix the trust file's owner and mode (see docs/remediation.md, "
        "threat model), or start the server with --allow-unprotected-approvers (every plan and server_info then "
        "say so)")
    allowed = _load(trust, approval={"allow_unprotected_approvers": True})
    assert check_gate(allowed).problems == problems
    trust.write_text("[approvers\n", encoding="utf-8")  # two problems now: each one named, "; " between them
    problems = gate_status(settings).problems
    assert len(problems) >= 2
    with pytest.raises(RemediationRefused, match=re.escape("its own key: " + "; ".join(problems) + ". Fix")):
        check_gate(settings)


def test_the_start_logs_each_failing_condition(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    trust = _trust(tmp_path)
    caplog.set_level(logging.WARNING, logger="mesh.approval")
    status = log_gate_at_start(_load(trust))
    assert [r.getMessage() for r in caplog.records] == [
        f"approval gate: {p} (apply_remediation refuses until this is fixed)" for p in status.problems]
    caplog.clear()
    status = log_gate_at_start(_load(trust, approval={"allow_unprotected_approvers": True}))
    assert [r.getMessage() for r in caplog.records] == [
        *(f"approval gate: {p}" for p in status.problems),
        "approval gate: started with --allow-unprotected-approvers (every plan and server_info say so)"]
    assert all(r.name == "mesh.approval" and r.levelno == logging.WARNING for r in caplog.records)
