"""Read, then write, one small file in a folder someone else may be writing to (an untrusted workspace).

``mesh-mcp init`` reads a client's configuration file, merges its entry and writes the file back.
Between the read and the write the folder may change: a file or a symlink may appear where there
was none, or the file read may be replaced. Both steps here make that window harmless:

- :func:`read_file` opens the file with ``O_NOFOLLOW`` relative to the folder opened once
  (``O_DIRECTORY | O_NOFOLLOW``), so a symlink is refused (never followed, never read), and
  records the identity of what it read (device, inode, size, modification time).
- :func:`write_file` writes a temporary file in that same folder (``O_CREAT | O_EXCL |
  O_NOFOLLOW``), then:
  - when nothing existed at the read: ``link`` it to the file's name, which fails if *anything*
    (file, symlink, dangling symlink) now has that name: it is never overwritten nor followed;
  - when a file was read: ``rename`` it over the name only if the name still holds that same file
    (same identity, not a symlink). The remaining window is the instant between that ``lstat`` and the
    ``rename``; ``rename`` replaces a symlink put there in that instant without following it.
  The temporary file is removed in every case. A file system without hard links gets an
  ``O_CREAT | O_EXCL | O_NOFOLLOW`` create written in place (exclusive, not atomic).

Everything happens relative to the folder's descriptor, so a folder swapped for a symlink after it
was opened does not redirect the write. On systems without ``O_NOFOLLOW`` / ``dir_fd`` (Windows)
the same steps run by path. :class:`Changed` says what moved; nothing was written then.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
BY_FD = bool(_NOFOLLOW and _DIRECTORY) and {os.open, os.link, os.replace, os.unlink, os.stat} <= os.supports_dir_fd
"""POSIX: every step relative to the folder's descriptor."""


class Changed(Exception):
    """The file changed between the read and the write (or is not a plain file); nothing was written."""


@dataclass(frozen=True)
class Seen:
    """What :func:`read_file` found: ``data`` None when no file had that name."""

    data: bytes | None
    identity: tuple[int, int, int, int] | None


def _identity(st: os.stat_result) -> tuple[int, int, int, int]:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


class Folder:
    """A folder opened once; files read and written relative to it (see the module docstring)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd: int | None = os.open(path, os.O_RDONLY | _DIRECTORY | _NOFOLLOW) if BY_FD else None

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def __enter__(self) -> Folder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _where(self, name: str) -> str:
        return name if self.fd is not None else str(self.path / name)

    def read_file(self, name: str, max_bytes: int) -> Seen:
        """The file ``name`` and its identity; :class:`Changed` for a symlink, a non-file or a too-big file."""
        try:
            fd = os.open(self._where(name), os.O_RDONLY | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0), dir_fd=self.fd)
        except FileNotFoundError:
            return Seen(None, None)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise Changed(f"{self.path / name} is a symlink (not followed)") from None
            raise
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_size > max_bytes:
                raise Changed(f"{self.path / name} is not a regular file under {max_bytes // 1024} KiB")
            chunks = []
            while chunk := os.read(fd, 65536):
                chunks.append(chunk)
                if sum(map(len, chunks)) > max_bytes:
                    raise Changed(f"{self.path / name} grew past {max_bytes // 1024} KiB while read")
        finally:
            os.close(fd)
        return Seen(b"".join(chunks), _identity(st))

    def write_file(self, name: str, data: bytes, seen: Seen) -> None:
        """Write ``data`` as ``name`` if ``name`` is still what :func:`read_file` saw; else :class:`Changed`."""
        tmp = f".mesh-mcp-{secrets.token_hex(6)}.tmp"
        fd = os.open(self._where(tmp), os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o644, dir_fd=self.fd)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            if seen.identity is None:
                self._create(tmp, name, data)
            else:
                self._replace(tmp, name, seen)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._where(tmp), dir_fd=self.fd)

    def _create(self, tmp: str, name: str, data: bytes) -> None:
        appeared = Changed(f"{self.path / name} appeared since it was read (a file or a symlink): not overwritten")
        try:
            os.link(self._where(tmp), self._where(name), src_dir_fd=self.fd, dst_dir_fd=self.fd)
            return
        except FileExistsError:
            raise appeared from None
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK):
                raise
        try:  # no hard links here: an exclusive create, written in place
            fd = os.open(self._where(name), os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o644, dir_fd=self.fd)
        except FileExistsError:
            raise appeared from None
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())

    def _replace(self, tmp: str, name: str, seen: Seen) -> None:
        try:
            st = os.stat(self._where(name), dir_fd=self.fd, follow_symlinks=False)
        except FileNotFoundError:
            raise Changed(f"{self.path / name} was removed since it was read: not recreated") from None
        if not stat.S_ISREG(st.st_mode) or _identity(st) != seen.identity:
            raise Changed(f"{self.path / name} was replaced or changed since it was read (now "
                          f"{'a symlink' if stat.S_ISLNK(st.st_mode) else 'another file'}): not overwritten")
        os.replace(self._where(tmp), self._where(name), src_dir_fd=self.fd, dst_dir_fd=self.fd)
