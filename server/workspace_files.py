"""The one guarded reader of workspace files: the workspace is untrusted input.

Every read of a file the workspace supplies goes through :func:`read_bytes` / :func:`read_text`:

- the path is normalised and must stay inside the workspace (an absolute path or a ``../``
  that leaves it is refused before anything is touched: no existence probe outside);
- a symlink is followed only when its resolved target is inside the workspace too;
- the file is opened non-blocking with ``O_NOFOLLOW`` and its type checked on the open
  descriptor (``fstat``): a FIFO, device, socket or folder is refused, a FIFO never hangs;
- the size is capped *while reading*: at most ``max_bytes + 1`` bytes are ever read, so a
  30 MB file (or ``/dev/zero`` behind a symlink) costs no more than the cap;
- on Linux the opened descriptor's real path is checked again (``/proc/self/fd``), so a
  folder swapped for a symlink between the check and the open is caught.

A refusal raises :class:`UnsafeWorkspaceFile` (an ``OSError``: callers that already treat an
unreadable file as unreadable keep doing so) whose message names the path and the reason.
"""

from __future__ import annotations

import errno
import functools
import os
import stat
from pathlib import Path

DEFAULT_MAX_BYTES = 2_000_000
_CHUNK = 1 << 16
_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


class UnsafeWorkspaceFile(OSError):
    """A workspace file refused: outside the workspace, not a regular file, or over the size cap."""

    def __init__(self, path: str, reason: str):
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


class FileTooLarge(UnsafeWorkspaceFile):
    """Over the size cap (found while reading, not from ``stat``)."""


def _inside(root: str, path: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


@functools.lru_cache(maxsize=64)
def _real_root_of(workspace: str) -> str:
    return os.path.realpath(workspace)


def _real_root(workspace: Path | str) -> str:
    return _real_root_of(os.fspath(workspace))


_HAS_PROC_FD = os.path.isdir("/proc/self/fd")


def confine(workspace: Path | str, path: Path | str) -> str:
    """The absolute, normalised path of ``path`` (relative to the workspace, or absolute) when it
    is inside the workspace; else :class:`UnsafeWorkspaceFile`. Nothing is opened or stat'ed."""
    root = os.path.normpath(os.path.abspath(os.fspath(workspace)))
    joined = os.path.normpath(os.path.join(root, os.fspath(path)))
    if not (_inside(root, joined) or _inside(_real_root(root), joined)):
        raise UnsafeWorkspaceFile(os.fspath(path), "outside the workspace")
    return joined


def relative_inside(workspace: Path | str, rel: str) -> str | None:
    """``rel`` normalised when it is a relative path that stays inside the workspace, else None
    (an absolute path, ``..`` leaving the workspace). Pure string work: nothing is touched."""
    if not rel or os.path.isabs(rel) or rel.startswith("~"):
        return None
    norm = os.path.normpath(rel).replace(os.sep, "/")
    if norm == ".." or norm.startswith("../"):
        return None
    return "" if norm == "." else norm


def resolved_inside(workspace: Path | str, path: Path | str) -> str:
    """The real path of ``path`` (symlinks resolved) when it stays inside the workspace's real
    path; else :class:`UnsafeWorkspaceFile`."""
    joined = confine(workspace, path)
    real = os.path.realpath(joined)
    if not _inside(_real_root(workspace), real):
        raise UnsafeWorkspaceFile(os.fspath(path), "a symlink to a place outside the workspace")
    return real


def read_bytes(workspace: Path | str, path: Path | str, max_bytes: int = DEFAULT_MAX_BYTES) -> bytes:
    """The bytes of the regular file ``path`` inside the workspace, at most ``max_bytes``
    (:class:`FileTooLarge` beyond). See the module docstring for what is refused."""
    fd = _open(workspace, path)
    try:
        _check_opened(fd, workspace, path)
        return _read_regular(fd, path, max_bytes)
    finally:
        os.close(fd)


def read_regular_file(path: Path | str, max_bytes: int = DEFAULT_MAX_BYTES) -> bytes:
    """The bytes of ``path`` when it is a regular file and not a symlink (refused outright), at most
    ``max_bytes``: for readers handed an absolute path of a file the crawl listed (the crawl enters
    no linked folder), where the workspace root is not at hand."""
    try:
        fd = os.open(os.fspath(path), _FLAGS)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafeWorkspaceFile(os.fspath(path), "a symlink (not followed)") from exc
        raise
    try:
        return _read_regular(fd, path, max_bytes)
    finally:
        os.close(fd)


def _read_regular(fd: int, path: Path | str, max_bytes: int) -> bytes:
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise UnsafeWorkspaceFile(os.fspath(path), f"not a regular file ({_kind(st.st_mode)})")
    if st.st_size > max_bytes:
        raise FileTooLarge(os.fspath(path), f"{st.st_size} bytes, over the {max_bytes}-byte cap")
    os.set_blocking(fd, True)
    chunks: list[bytes] = []
    total = 0
    while True:
        chunk = os.read(fd, min(max(_CHUNK, st.st_size + 1), max_bytes + 1 - total))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
        if total > max_bytes:
            raise FileTooLarge(os.fspath(path), f"over the {max_bytes}-byte cap (grew while read)")
    return b"".join(chunks)


def read_user_file(path: Path | str, max_bytes: int = DEFAULT_MAX_BYTES) -> bytes:
    """The bytes of ``path`` (anywhere: a user's config file, symbolic links followed as the
    settings follow them) when it is a regular file of at most ``max_bytes``: opened without
    blocking (a FIFO or a terminal is refused, never waited on). Raises FileNotFoundError,
    :class:`UnsafeWorkspaceFile` (not a regular file) or :class:`FileTooLarge`."""
    fd = os.open(os.fspath(path), os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        return _read_regular(fd, path, max_bytes)
    finally:
        os.close(fd)


def read_text(workspace: Path | str, path: Path | str, max_bytes: int = DEFAULT_MAX_BYTES,
              encoding: str = "utf-8", errors: str = "replace") -> str:
    """:func:`read_bytes` decoded (undecodable bytes replaced unless ``errors`` says otherwise)."""
    return read_bytes(workspace, path, max_bytes).decode(encoding, errors)


def _open(workspace: Path | str, path: Path | str) -> int:
    """Open without following a final symlink; a symlink is then resolved and followed only inside."""
    target = confine(workspace, path) if _HAS_PROC_FD else resolved_inside(workspace, path)
    try:
        return os.open(target, _FLAGS)
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
    try:
        return os.open(resolved_inside(workspace, path), _FLAGS)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafeWorkspaceFile(os.fspath(path), "a symlink swapped in while reading") from exc
        raise


def _check_opened(fd: int, workspace: Path | str, path: Path | str) -> None:
    try:
        opened = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return  # no /proc: the realpath check before the open stands
    if not _inside(_real_root(workspace), opened):
        raise UnsafeWorkspaceFile(os.fspath(path), "resolved outside the workspace when opened")


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder")):
        if test(mode):
            return name
    return "not a regular file"
