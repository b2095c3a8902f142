"""The guarded reader of workspace files (server/workspace_files.py), case by case."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from server import workspace_files as wf


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "src/a.ts").write_text("export const a = 1;\n")
    (tmp_path / "secret.txt").write_text("TOP-SECRET\n")
    return root


@pytest.fixture
def alarm() -> Iterator[None]:
    """A call that blocks (a FIFO opened for reading) fails the test after 5 s instead of hanging it."""
    def hung(*_: object) -> None:
        raise TimeoutError("blocked")

    old = signal.signal(signal.SIGALRM, hung)
    signal.alarm(5)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def test_a_regular_file_inside_is_read(ws: Path) -> None:
    assert wf.read_text(ws, "src/a.ts") == "export const a = 1;\n"
    assert wf.read_bytes(ws, ws / "src/a.ts") == b"export const a = 1;\n"
    assert wf.read_text(ws, "src/../src/a.ts") == "export const a = 1;\n"


@pytest.mark.parametrize("path", ["../secret.txt", "src/../../secret.txt", "/etc/passwd"])
def test_paths_leaving_the_workspace_are_refused_before_any_look(ws: Path, path: str) -> None:
    with pytest.raises(wf.UnsafeWorkspaceFile, match="outside the workspace"):
        wf.read_bytes(ws, path)
    assert wf.relative_inside(ws, path) is None


def test_symlinks_are_followed_only_inside(ws: Path, tmp_path: Path) -> None:
    (ws / "inside.ts").symlink_to(ws / "src/a.ts")
    (ws / "leak.txt").symlink_to(tmp_path / "secret.txt")
    (ws / "outdir").symlink_to(tmp_path)
    (ws / "zero").symlink_to("/dev/zero")
    assert wf.read_text(ws, "inside.ts") == "export const a = 1;\n"
    for rel in ("leak.txt", "outdir/secret.txt", "zero"):
        with pytest.raises(wf.UnsafeWorkspaceFile, match="outside the workspace") as refused:
            wf.read_bytes(ws, rel)
        assert "TOP-SECRET" not in str(refused.value)
    with pytest.raises(wf.UnsafeWorkspaceFile, match="a symlink"):
        wf.read_regular_file(ws / "inside.ts")  # where no root is at hand, a symlink is refused outright


def test_a_fifo_or_a_device_is_refused_without_blocking(ws: Path, alarm: None) -> None:
    os.mkfifo(ws / "SKILL.md")
    with pytest.raises(wf.UnsafeWorkspaceFile, match=r"not a regular file \(a FIFO\)"):
        wf.read_bytes(ws, "SKILL.md")
    with pytest.raises(wf.UnsafeWorkspaceFile, match=r"not a regular file \(a character device\)"):
        wf.read_regular_file("/dev/zero")
    with pytest.raises(wf.UnsafeWorkspaceFile, match=r"not a regular file \(a folder\)"):
        wf.read_bytes(ws, "src")


def test_the_cap_holds_while_reading_not_only_by_stat(ws: Path) -> None:
    (ws / "big.txt").write_bytes(b"x" * 5000)
    with pytest.raises(wf.FileTooLarge, match="5000 bytes, over the 1000-byte cap"):
        wf.read_bytes(ws, "big.txt", max_bytes=1000)
    assert len(wf.read_bytes(ws, "big.txt", max_bytes=5000)) == 5000
    maps = Path("/proc/self/maps")  # a regular file whose stat says 0 bytes: only reading shows its size
    if maps.exists() and maps.stat().st_size == 0:
        with pytest.raises(wf.FileTooLarge, match="grew while read"):
            wf.read_regular_file(maps, max_bytes=10)
