"""Which workspace files and folders changed since the last refresh, without walking: Linux inotify.

The index checks freshness by walking the workspace (a ``scandir`` per folder and a ``stat``
per file: 0.15-0.3 s at 20,000 files). A long-running server keeps an inotify watch on every
folder it walked instead; the kernel queues an event, naming the entry, the moment a file in a
watched folder is written, created, removed or renamed. :meth:`FolderWatch.changes` drains that
queue (non-blocking, at the start of a call) into a :class:`Delta`:

- ``files``: the paths of the files named by an event (the caller stats and hashes only those);
- ``folders``: the sub-folders created, removed, renamed (either name) or changed in their
  metadata (the caller walks each of those again, and only those);
- ``full``: the caller must walk the whole workspace: the queue overflowed, the workspace folder
  itself was removed, moved or unmounted, a watch could not be set (the user's watch limit), or
  reading the queue failed.

A watch is set on a folder *before* the folder is read (:meth:`FolderWatch.add`, called by the
walk for each folder right before its ``scandir``), so a change is either seen by that read or
queued as an event. The watches of a folder that was removed or renamed are dropped
(:meth:`FolderWatch.forget`): inotify watches an inode, and a renamed folder's watch would
otherwise report events under its old name.

Only where ``inotify_init1`` exists (Linux); elsewhere :meth:`FolderWatch.create` returns
None and every call walks.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import logging
import os
import struct
import sys
import threading
from dataclasses import dataclass, field

log = logging.getLogger("mesh.index.watch")

IN_MODIFY = 0x002
IN_ATTRIB = 0x004
IN_CLOSE_WRITE = 0x008
IN_MOVED_FROM = 0x040
IN_MOVED_TO = 0x080
IN_CREATE = 0x100
IN_DELETE = 0x200
IN_DELETE_SELF = 0x400
IN_MOVE_SELF = 0x800
IN_UNMOUNT = 0x2000
IN_Q_OVERFLOW = 0x4000
IN_IGNORED = 0x8000
IN_ONLYDIR = 0x01000000
IN_DONT_FOLLOW = 0x02000000
IN_ISDIR = 0x40000000
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = os.O_CLOEXEC

EVENTS = (
    IN_MODIFY
    | IN_ATTRIB
    | IN_CLOSE_WRITE
    | IN_MOVED_FROM
    | IN_MOVED_TO
    | IN_CREATE
    | IN_DELETE
    | IN_DELETE_SELF
    | IN_MOVE_SELF
)
"""Everything that can change a file's content, stat or presence in a folder."""

_HEADER = struct.Struct("iIII")  # struct inotify_event: wd, mask, cookie, len (then the name, NUL-padded)

_libc: ctypes.CDLL | None = None


def _load_libc() -> ctypes.CDLL | None:
    global _libc
    if _libc is None and sys.platform.startswith("linux"):
        try:
            lib = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
            lib.inotify_init1.argtypes = [ctypes.c_int]
            lib.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
            lib.inotify_rm_watch.argtypes = [ctypes.c_int, ctypes.c_int]
            _libc = lib
        except (OSError, AttributeError) as exc:
            log.debug("inotify unavailable: %s", exc)
    return _libc


@dataclass(slots=True)
class Delta:
    """What the events drained by one :meth:`FolderWatch.changes` name (absolute paths)."""

    files: set[str] = field(default_factory=set)
    folders: set[str] = field(default_factory=set)
    full: bool = False

    @property
    def empty(self) -> bool:
        return not self.full and not self.files and not self.folders


class FolderWatch:
    """inotify watches on a set of folders under ``root``; :meth:`changes` drains the kernel's queue."""

    def __init__(self, fd: int, lib: ctypes.CDLL, root: str = "") -> None:
        self._fd = fd
        self._lib = lib
        self.root = root
        self._watched: dict[str, int] = {}  # folder -> watch descriptor
        self._paths: dict[int, str] = {}
        self._broken = False  # a watch could not be set: every check reports a full change
        self._lock = threading.Lock()

    @classmethod
    def create(cls, root: str = "") -> FolderWatch | None:
        """A new watch (of the folders under ``root``), or None where inotify is not available."""
        lib = _load_libc()
        if lib is None:
            return None
        fd = lib.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if fd < 0:
            log.debug("inotify_init1 failed: %s", os.strerror(ctypes.get_errno()))
            return None
        return cls(fd, lib, root)

    @property
    def watched(self) -> int:
        return len(self._watched)

    @property
    def broken(self) -> bool:
        return self._broken or self._fd < 0

    def add(self, folders: list[str] | str) -> int:
        """Watch these absolute folder paths; returns how many watches are new.

        The kernel is asked each time (it answers with the watch it has when the folder is
        watched already): after events were lost (a queue overflow), a path may name another
        folder than the one watched under it, or a watched folder may have another name now.
        A folder that cannot be watched (the user's watch limit reached) marks the watch broken,
        except when it no longer exists (its parent's event says so): :meth:`changes` then
        always asks for a full walk."""
        added = 0
        with self._lock:
            if self._fd < 0:
                return 0
            for folder in [folders] if isinstance(folders, str) else folders:
                wd = self._lib.inotify_add_watch(self._fd, os.fsencode(folder), EVENTS | IN_ONLYDIR | IN_DONT_FOLLOW)
                if wd < 0:
                    err = ctypes.get_errno()
                    if err not in (errno.ENOENT, errno.ENOTDIR):  # removed: seen through its parent
                        log.warning("cannot watch %s (%s): every call walks the workspace", folder, os.strerror(err))
                        self._broken = True
                    continue
                old_wd = self._watched.get(folder)
                if old_wd is not None and old_wd != wd:  # the path names another folder: the old watch went with
                    self._paths.pop(old_wd, None)       # the folder it watched (moved away), drop it
                    self._lib.inotify_rm_watch(self._fd, old_wd)
                old = self._paths.get(wd)
                if old is not None and old != folder:  # the same folder under another name: a rename
                    self._watched.pop(old, None)
                added += old_wd != wd
                self._watched[folder] = wd
                self._paths[wd] = folder
        return added

    def snapshot(self) -> tuple[dict[str, int], bool]:
        """The folders watched (folder -> watch descriptor) and whether a watch failed."""
        with self._lock:
            return dict(self._watched), self._broken

    def adopt(self, watched: dict[str, int], broken: bool) -> None:
        """Take over the watches another process set on this inotify instance (a forked child inherits its
        descriptor: its watches are this instance's, and their events queue here)."""
        with self._lock:
            for folder, wd in watched.items():
                self._watched[folder] = wd
                self._paths[wd] = folder
            self._broken = self._broken or broken

    def forget(self, folder: str) -> None:
        """Drop the watches of ``folder`` and of every folder under it (it was removed or renamed)."""
        prefix = folder + "/"
        with self._lock:
            for path in [p for p in self._watched if p == folder or p.startswith(prefix)]:
                wd = self._watched.pop(path)
                self._paths.pop(wd, None)
                if self._fd >= 0:
                    self._lib.inotify_rm_watch(self._fd, wd)  # EINVAL when the kernel dropped it already

    def changed(self) -> bool:
        """Whether anything was queued since the last call (the queue is drained)."""
        return not self.changes().empty

    def changes(self) -> Delta:
        """What the queued events name since the last call (the queue is drained; see the module docstring)."""
        delta = Delta()
        with self._lock:
            if self._fd < 0:
                delta.full = True
                return delta
            while True:
                try:
                    data = os.read(self._fd, 65536)
                except BlockingIOError:
                    break
                except OSError as exc:
                    log.warning("reading inotify events failed (%s): walking the workspace", exc)
                    self._broken = True
                    break
                if not data:
                    break
                self._parse(data, delta)
            delta.full = delta.full or self._broken
        return delta

    def _parse(self, data: bytes, delta: Delta) -> None:
        offset = 0
        while offset + 16 <= len(data):
            wd, mask, _cookie, size = _HEADER.unpack_from(data, offset)
            name = data[offset + 16:offset + 16 + size].rstrip(b"\0")
            offset += 16 + size
            if mask & IN_Q_OVERFLOW:
                log.info("inotify queue overflow: walking the workspace")
                delta.full = True
                continue
            folder = self._paths.get(wd)
            if folder is None:  # a watch dropped by forget(): its folder is walked again anyway
                continue
            if mask & IN_IGNORED:  # the kernel removed the watch (folder deleted or moved away)
                del self._paths[wd]
                if self._watched.get(folder) == wd:
                    del self._watched[folder]
            if not name:  # an event of the watched folder itself
                if mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_UNMOUNT | IN_IGNORED | IN_ATTRIB):
                    if folder == self.root:
                        delta.full = True
                    else:  # its parent reports it too, unless that parent's watch is gone: walk it again
                        delta.folders.add(folder)
                continue
            path = folder + "/" + os.fsdecode(name)
            if mask & IN_ISDIR:
                delta.folders.add(path)
            else:
                delta.files.add(path)

    def __del__(self) -> None:  # a service dropped without close() must not keep its inotify instance
        fd, self._fd = getattr(self, "_fd", -1), -1
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)

    def close(self) -> None:
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1
            self._watched.clear()
            self._paths.clear()
