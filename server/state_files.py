"""Opening files of the state folder safely: never through a symlink, never a FIFO or device.

The state folder (plans, backups, the audit log, ``used_nonces``, ``tool-schemas/``) must be
written only where the user meant: a planted symlink (``audit.log -> ~/.bashrc``) or FIFO
(``used_nonces``) is refused with :class:`StateFileError` instead of followed or waited on.

- :func:`state_folder`: make a folder (parents 0700) and refuse one that is a symlink or no folder.
- :func:`open_state_file`: ``os.open`` with ``O_NOFOLLOW | O_NONBLOCK``; refuses anything but a
  regular file. Returns the descriptor.
- :func:`read_state_bytes`: the whole regular file (``b""`` when missing).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from server.errors import MeshError

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_BINARY = getattr(os, "O_BINARY", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


class StateFileError(MeshError):
    """A state file or folder is a symlink, FIFO, device or not a folder: refused, never followed."""


def _refuse(path: Path, what: str) -> StateFileError:
    return StateFileError(
        f"state {what} {path} is a symlink or not a regular {what}: refused (never followed); "
        "remove it, or set state_dir to a folder of your own outside the workspace"
    )


def state_folder(path: Path) -> Path:
    """``path`` as an existing real folder (made 0700 with its parents when missing)."""
    missing = [p for p in (path, *path.parents) if not os.path.lexists(p)]
    try:
        for folder in reversed(missing):  # every folder made here is 0700, not only the last one
            folder.mkdir(mode=0o700, exist_ok=True)
    except FileExistsError:
        raise _refuse(path, "folder") from None
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode):  # a symlink to a folder is refused too
        raise _refuse(path, "folder")
    return path


def open_state_file(path: Path, flags: int, mode: int = 0o600) -> int:
    """``os.open(path, flags)`` never following a symlink nor blocking on a FIFO; regular files only."""
    state_folder(path.parent)
    if not _NOFOLLOW and os.path.islink(path):  # no O_NOFOLLOW (Windows): check first
        raise _refuse(path, "file")
    try:
        fd = os.open(path, flags | _NOFOLLOW | _NONBLOCK | _BINARY | _CLOEXEC, mode)
    except OSError as exc:
        if os.path.islink(path) or (path.exists() and not path.is_file()):
            raise _refuse(path, "file") from None
        raise exc
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise _refuse(path, "file")
        if _NONBLOCK:
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_state_bytes(path: Path) -> bytes:
    """The whole of the regular state file ``path``; ``b""`` when it does not exist."""
    if not os.path.lexists(path):
        return b""
    fd = open_state_file(path, os.O_RDONLY)
    with os.fdopen(fd, "rb") as fh:
        return fh.read()
