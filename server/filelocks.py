"""Portable exclusive file locks and the POSIX-only parts of file protection.

:func:`exclusive` wraps :class:`filelock.FileLock`: ``fcntl.flock`` on POSIX, ``msvcrt``
locking on Windows, and a lock *file* (:class:`filelock.SoftFileLock`) where neither
exists. The lock is a sidecar file ``<name>.lock`` next to the protected one, so the
protected file itself can be opened, appended to or replaced freely while it is held.

Private files (the local HMAC secret, approver keys, nonces, the audit log) are created
mode 0600 on POSIX. On Windows file modes do not exist (``os.open``'s mode only sets the
read-only flag): what protects them there is the ACL they inherit from the user's profile
folder (``%APPDATA%``, ``%USERPROFILE%``), which grants access to the user, SYSTEM and
Administrators only. :data:`PRIVATE_FILES_NOTE` says so wherever a mode check is skipped.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path

from filelock import FileLock, Timeout

from server.errors import MeshError

LOCK_TIMEOUT_S = 30.0
"""How long a writer waits for another mesh-mcp process to release a lock."""

IS_POSIX = os.name == "posix"
IS_WINDOWS = sys.platform == "win32"

PRIVATE_FILES_NOTE = (
    "file modes are not checked on Windows: private files are protected by the ACL inherited from the "
    "user's profile folder (the user, SYSTEM and Administrators only); keep state_dir and key files there"
)


@contextlib.contextmanager
def exclusive(path: Path, what: str, *, timeout: float = LOCK_TIMEOUT_S) -> Iterator[None]:
    """Hold the exclusive lock of ``path`` (sidecar ``<path>.lock``, created 0600) for the block.

    Raises :class:`~server.errors.MeshError` naming ``what`` when another process holds it
    longer than ``timeout`` seconds.
    """
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    lock_path = path.with_name(path.name + ".lock")
    if os.path.islink(lock_path):  # the lock file is opened with O_TRUNC: never through a planted symlink
        raise MeshError(f"the {what}'s lock {lock_path} is a symlink: refused (never followed); remove it")
    lock = FileLock(str(lock_path), timeout=timeout, mode=0o600)
    try:
        lock.acquire()
    except Timeout:
        raise MeshError(
            f"could not lock the {what} ({lock_path}) within {timeout:.0f} s: another mesh-mcp process holds it; "
            "retry, or remove the .lock file if no mesh-mcp process is running"
        ) from None
    try:
        yield
    finally:
        lock.release()


def lock_kind() -> str:
    """The class :func:`exclusive` uses here (``UnixFileLock``, ``WindowsFileLock`` or ``SoftFileLock``)."""
    return FileLock.__name__
