"""The on-disk cache of per-file facts: SQLite, keyed by path and content hash.

One row per indexed file: size, mtime, SHA-1 of the content and the facts as JSON (never
pickle: a cache file, whoever wrote it, must not be able to run code). A ``meta``
row holds the signature (facts format + the convention names extraction used); a cache
written with another signature is emptied on open. A cache that cannot be opened or
written (read-only folder, a disk error) is reported through :attr:`FactCache.error` and the
index simply works from memory; a file that is not a database (what an operating system crash
may leave: the cache does not wait for fsync) is moved aside to ``<name>.corrupt`` and rebuilt.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sqlite3
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

log = logging.getLogger("mesh.index.cache")

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS files (
    path TEXT PRIMARY KEY,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    sha1 TEXT NOT NULL,
    facts TEXT NOT NULL
);
"""
FILE_NAME = "static-index.sqlite"


class FactCache:
    def __init__(self, directory: Path, signature: str):
        self.path = directory / FILE_NAME
        self.error: str | None = None
        self.set_aside: Path | None = None  # where a corrupt cache file was moved, if one was
        self._inode: int | None = None  # the file this cache opened (set aside only if still that one)
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        try:
            directory.mkdir(parents=True, exist_ok=True)
            self._inode = _inode(self.path)
            try:
                conn = self._connect(signature)
            except sqlite3.DatabaseError as exc:
                if not _is_corrupt(exc):
                    raise
                self.set_aside = _set_aside(self.path, self._inode)
                log.warning("corrupt cache %s set aside (%s); rebuilding", self.path,
                            self.set_aside or "by another process")
                conn = self._connect(signature)
            self._inode = _inode(self.path)  # the file opened: the one a later corruption sets aside
            self._conn = conn
        except (OSError, sqlite3.Error) as exc:
            self.error = f"cache disabled ({self.path}: {exc})"
            log.warning("%s", self.error)

    def _connect(self, signature: str) -> sqlite3.Connection:
        """Open (create) the cache, emptied when written with another signature.

        ``synchronous=OFF``: no fsync, a cold build does not wait for the disk. A process that dies
        mid-write loses nothing (SQLite's journal does not depend on fsync for that); what an
        operating-system crash may leave corrupt is set aside and rebuilt, whether the damage shows
        when the file is opened or later, in a read or a write (:meth:`_fail`)."""
        conn = sqlite3.connect(self.path, timeout=10, check_same_thread=False)
        try:
            conn.executescript(SCHEMA)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=OFF")
            row = conn.execute("SELECT value FROM meta WHERE key='signature'").fetchone()
            if row is None or row[0] != signature:
                with conn:
                    conn.execute("DELETE FROM files")
                    conn.execute("DELETE FROM meta WHERE key IN ('snapshot', 'snapshot_digest', 'manifest') "
                                 "OR key LIKE 'derived:%'")
                    conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('signature', ?)", (signature,))
        except BaseException:
            conn.close()
            raise
        return conn

    @property
    def enabled(self) -> bool:
        return self._conn is not None

    def load(self) -> dict[str, tuple[int, int, str, dict[str, Any]]]:
        """Every cached file: path -> (size, mtime_ns, sha1, facts)."""
        if self._conn is None:
            return {}
        out: dict[str, tuple[int, int, str, dict[str, Any]]] = {}
        try:
            with self._lock:
                rows = self._conn.execute("SELECT path, size, mtime_ns, sha1, facts FROM files").fetchall()
        except sqlite3.Error as exc:
            self._fail(exc)
            return {}
        loads = json.loads
        for path, size, mtime, sha, facts in rows:
            try:
                out[path] = (size, mtime, sha, loads(facts))
            except ValueError:
                continue
        return out

    def load_stats(self) -> dict[str, tuple[int, int, str]]:
        """Every cached file: path -> (size, mtime_ns, sha1), without the facts."""
        if self._conn is None:
            return {}
        try:
            with self._lock:
                rows = self._conn.execute("SELECT path, size, mtime_ns, sha1 FROM files").fetchall()
        except sqlite3.Error as exc:
            self._fail(exc)
            return {}
        return {p: (size, mtime, sha) for p, size, mtime, sha in rows}

    def load_snapshot(self, digest: str) -> dict[str, Any] | None:
        """The linked-index snapshot stored for ``digest`` (None when absent or for another state)."""
        if self._conn is None:
            return None
        try:
            with self._lock:
                row = self._conn.execute("SELECT value FROM meta WHERE key='snapshot_digest'").fetchone()
                if row is None or row[0] != digest:
                    return None
                data = self._conn.execute("SELECT value FROM meta WHERE key='snapshot'").fetchone()
            return json.loads(data[0]) if data else None
        except (sqlite3.Error, ValueError) as exc:
            log.warning("ignoring the index snapshot: %s", exc)
            return None

    def snapshot_digest(self) -> str | None:
        """The digest the stored snapshot was written for (None: no snapshot)."""
        return self._meta("snapshot_digest")

    def load_manifest(self) -> dict[str, Any] | None:
        """The stat table of the last build (see :mod:`tools.mesh_index.manifest`), or None."""
        text = self._meta("manifest")
        try:
            return json.loads(text) if text else None
        except ValueError:
            return None

    def store_manifest(self, text: str) -> None:
        self._put_meta("manifest", text)

    def replace_manifest(self, old: str, new: str) -> None:
        """Store ``new`` only if the manifest is still ``old`` (another process may have written a newer one)."""
        if self._conn is None:
            return
        try:
            with self._lock, self._conn:
                self._conn.execute("UPDATE meta SET value=? WHERE key='manifest' AND value=?", (new, old))
        except sqlite3.Error as exc:
            self._fail(exc)

    def _meta(self, key: str) -> str | None:
        if self._conn is None:
            return None
        try:
            with self._lock:
                row = self._conn.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        except sqlite3.Error as exc:
            log.warning("ignoring the cached %s: %s", key, exc)
            return None
        return row[0] if row else None

    def _put_meta(self, key: str, text: str) -> None:
        if self._conn is None:
            return
        try:
            with self._lock, self._conn:
                self._conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, text))
        except sqlite3.Error as exc:
            self._fail(exc)

    def store_snapshot(self, digest: str, data: dict[str, Any]) -> None:
        if self._conn is None:
            return
        text = json.dumps(data, separators=(",", ":"))
        try:
            with self._lock, self._conn:
                self._conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('snapshot', ?)", (text,))
                self._conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('snapshot_digest', ?)", (digest,))
        except sqlite3.Error as exc:
            self._fail(exc)

    def load_derived(self, name: str, key: str) -> Any | None:
        """A value computed from one build of the index (``name``: ``checks``, ``summary``), stored for
        ``key`` (the build's digest and the code version); None when absent or stored for another key."""
        if self._conn is None:
            return None
        try:
            with self._lock:
                row = self._conn.execute("SELECT value FROM meta WHERE key=?", (f"derived:{name}",)).fetchone()
            if row is None:
                return None
            stored_key, value = json.loads(row[0])
            return value if stored_key == key else None
        except (sqlite3.Error, ValueError, TypeError) as exc:
            log.warning("ignoring the cached %s: %s", name, exc)
            return None

    def store_derived(self, name: str, key: str, value: Any) -> None:
        """Keep one ``name`` value, for ``key`` (replaces the previous one)."""
        if self._conn is None:
            return
        text = json.dumps([key, value], separators=(",", ":"))
        try:
            with self._lock, self._conn:
                self._conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (f"derived:{name}", text))
        except sqlite3.Error as exc:
            self._fail(exc)

    def store(self, rows: Iterable[tuple[str, int, int, str, dict[str, Any]]]) -> None:
        if self._conn is None:
            return
        dumps = json.dumps
        encoded: dict[str, str] = getattr(rows, "encoded", None) or {}  # texts the parse workers made
        data = [(p, size, mtime, sha, encoded.get(p) or dumps(facts, separators=(",", ":")))
                for p, size, mtime, sha, facts in rows]
        if not data:
            return
        try:
            with self._lock, self._conn:
                self._conn.executemany(
                    "INSERT OR REPLACE INTO files(path, size, mtime_ns, sha1, facts) VALUES (?, ?, ?, ?, ?)", data)
        except sqlite3.Error as exc:
            self._fail(exc)

    def touch(self, rows: Iterable[tuple[str, int, int]]) -> None:
        """Record a new size/mtime for files whose content hash did not change."""
        if self._conn is None:
            return
        try:
            with self._lock, self._conn:
                self._conn.executemany("UPDATE files SET size=?, mtime_ns=? WHERE path=?",
                                       [(s, m, p) for p, s, m in rows])
        except sqlite3.Error as exc:
            self._fail(exc)

    def delete(self, paths: Iterable[str]) -> None:
        if self._conn is None:
            return
        try:
            with self._lock, self._conn:
                self._conn.executemany("DELETE FROM files WHERE path=?", [(p,) for p in paths])
        except sqlite3.Error as exc:
            self._fail(exc)

    def clear(self) -> None:
        if self._conn is None:
            return
        try:
            with self._lock, self._conn:
                self._conn.execute("DELETE FROM files")
                self._conn.execute("DELETE FROM meta WHERE key = 'manifest' OR key LIKE 'derived:%'")
        except sqlite3.Error as exc:
            self._fail(exc)

    def _fail(self, exc: Exception) -> None:
        self.error = f"cache disabled after an error ({self.path}: {exc})"
        log.warning("%s", self.error)
        self.close()
        if isinstance(exc, sqlite3.DatabaseError) and _is_corrupt(exc):  # the next open starts a new one
            with contextlib.suppress(OSError):
                self.set_aside = _set_aside(self.path, self._inode)

    def close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(sqlite3.Error):
                self._conn.close()
            self._conn = None


def _is_corrupt(exc: sqlite3.DatabaseError) -> bool:
    """A file that is not (or no longer) a database; not a locked or read-only one."""
    text = str(exc).lower()
    return not isinstance(exc, sqlite3.OperationalError) and ("not a database" in text or "malformed" in text)


def _inode(path: Path) -> int | None:
    try:
        return os.lstat(path).st_ino
    except OSError:
        return None


def _set_aside(path: Path, inode: int | None) -> Path | None:
    """Move the corrupt cache that was opened (``inode``) and its WAL files to ``<name>.corrupt`` (one
    kept: the previous one replaced), under a lock shared by every process of this state folder. None
    when another process replaced it meanwhile (its new cache is left alone)."""
    from filelock import FileLock

    aside = path.with_name(path.name + ".corrupt")
    with FileLock(str(path.with_name(path.name + ".lock")), timeout=10):
        if inode is None or _inode(path) != inode:
            return None
        for suffix in ("-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"{path}{suffix}")
        os.replace(path, aside)
    return aside
