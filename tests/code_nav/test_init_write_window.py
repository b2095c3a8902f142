"""``mesh-mcp init --write-ide-config`` between its check and its write: nothing that appears is clobbered.

The workspace is untrusted: while init reads ``.mcp.json`` (or finds none) and merges its entry, another
process may create the file, drop a symlink there (to the user's own config, or dangling), or replace the
file. Each test makes that happen at the last moment before the write: when init serialises the merged
JSON, after every check. What appeared is never overwritten nor followed; init says so and exits 1.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import server.ide_config as ide_config
from server.cli import main
from server.exclusive_write import Changed, Folder

OTHER = json.dumps({"mcpServers": {"theirs": {"command": "x"}}})


class _JsonThatActsFirst:
    """``json`` for server.ide_config, running ``act`` once when the merged file is serialised."""

    def __init__(self, act: Callable[[], None]) -> None:
        self.act: Callable[[], None] | None = act

    def _first(self) -> None:
        if self.act is not None:
            act, self.act = self.act, None
            act()

    def dump(self, *args: Any, **kwargs: Any) -> None:
        self._first()
        json.dump(*args, **kwargs)

    def dumps(self, *args: Any, **kwargs: Any) -> str:
        self._first()
        return json.dumps(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(json, name)


def _init(ws: Path, monkeypatch: pytest.MonkeyPatch, act: Callable[[], None], capsys) -> tuple[int, str]:
    monkeypatch.setattr(ide_config, "json", _JsonThatActsFirst(act))
    code = main(["init", "--workspace", str(ws), "--write-ide-config", "--command", "mesh-mcp"])
    return code, capsys.readouterr().out


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    folder = tmp_path / "ws"
    folder.mkdir()
    return folder


def test_a_file_created_after_the_check_is_not_overwritten(ws: Path, monkeypatch, capsys) -> None:
    target = ws / ".mcp.json"
    code, out = _init(ws, monkeypatch, lambda: target.write_text(OTHER), capsys)
    assert target.read_text() == OTHER  # their file, whole
    assert code == 1 and f"skipped {target}: " in out and "appeared since it was read" in out
    assert json.loads((ws / ".cursor" / "mcp.json").read_text())["mcpServers"]["mesh-mcp"]  # the others written
    assert [p.name for p in ws.iterdir() if p.name.startswith(".mesh-mcp-")] == []  # no temporary file left


def test_a_symlink_created_after_the_check_is_neither_followed_nor_replaced(ws: Path, tmp_path: Path, monkeypatch,
                                                                             capsys) -> None:
    victim = tmp_path / "home" / ".claude.json"
    victim.parent.mkdir()
    victim.write_text(OTHER)
    target = ws / ".mcp.json"
    code, out = _init(ws, monkeypatch, lambda: os.symlink(victim, target), capsys)
    assert victim.read_text() == OTHER
    assert target.is_symlink() and os.readlink(target) == str(victim)  # left as it was put there
    assert code == 1 and "appeared since it was read" in out


def test_a_dangling_symlink_created_after_the_check_is_not_followed(ws: Path, tmp_path: Path, monkeypatch,
                                                                    capsys) -> None:
    nowhere = tmp_path / "nowhere.json"
    target = ws / ".mcp.json"
    code, out = _init(ws, monkeypatch, lambda: os.symlink(nowhere, target), capsys)
    assert not nowhere.exists() and target.is_symlink()
    assert code == 1 and "appeared since it was read" in out


def test_a_file_replaced_after_it_was_read_is_not_overwritten(ws: Path, monkeypatch, capsys) -> None:
    target = ws / ".mcp.json"
    target.write_text(json.dumps({"mcpServers": {"old": {"command": "o"}}}))

    def replace() -> None:
        fresh = ws / "fresh.json"
        fresh.write_text(OTHER)
        os.replace(fresh, target)

    code, out = _init(ws, monkeypatch, replace, capsys)
    assert target.read_text() == OTHER
    assert code == 1 and "was replaced or changed since it was read" in out


def test_a_file_replaced_by_a_symlink_after_it_was_read_is_not_overwritten(ws: Path, tmp_path: Path, monkeypatch,
                                                                            capsys) -> None:
    victim = tmp_path / "victim.json"
    victim.write_text(OTHER)
    target = ws / ".mcp.json"
    target.write_text(json.dumps({"mcpServers": {"old": {"command": "o"}}}))

    def swap() -> None:
        target.unlink()
        os.symlink(victim, target)

    code, out = _init(ws, monkeypatch, swap, capsys)
    assert victim.read_text() == OTHER and target.is_symlink()
    assert code == 1 and "(now a symlink): not overwritten" in out


def test_the_write_is_exclusive_even_without_the_check(tmp_path: Path) -> None:
    """The folder-level guarantee itself: a name that exists (a symlink here) when a 'new' file is written fails."""
    victim = tmp_path / "victim"
    victim.write_text("mine")
    os.symlink(victim, tmp_path / "link")
    with Folder(tmp_path) as folder:
        with pytest.raises(Changed, match="appeared since it was read"):
            folder.write_file("link", b"{}", folder.read_file("absent", 1024))
        with pytest.raises(Changed, match="is a symlink"):
            folder.read_file("link", 1024)
    assert victim.read_text() == "mine" and os.readlink(tmp_path / "link") == str(victim)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link", "victim"]
