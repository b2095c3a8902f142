"""A new process on an unchanged workspace: answer from the manifest, load the snapshot only when asked.

:class:`WarmStartMixin` holds this part of :class:`~tools.mesh_index.service.IndexService`, which
mixes it in. The first refresh of a process that does not watch folders (``mesh-mcp index``,
``impact``, ``catalogue``: one refresh, then exit) checks the manifest of the last build
(:mod:`tools.mesh_index.manifest`: one ``lstat`` per file, one ``stat`` per folder, no listing,
no SQLite stat table, no digest). When it holds, the refresh answers at once (``reparsed`` 0)
and the service stays *lazy*: the linked snapshot is loaded by the first query that needs the
index (:meth:`_load_lazy`); the counts ``mesh-mcp index`` prints come from the derived results
stored for that snapshot's digest, without loading it. When it does not hold, the ordinary path
runs (walk, compare stats, hash, rebuild what changed), hashing the files the manifest could not
vouch for (their mtimes were too recent). The manifest is written with the snapshot (on close,
or at once after a large refresh), and again on close whenever the walk found other stats.
The server's service (folder watches) walks at start-up to set its watches, so it does not use it.
"""

from __future__ import annotations

import gc
import hashlib
import json
import logging
import os
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from server import __version__
from tools.mesh_index import manifest
from tools.mesh_index.cache import FactCache
from tools.mesh_index.model import IndexInfo
from tools.mesh_index.workspace import MAX_FILE_BYTES, Discovery, SourceFile, indexed_kind

if TYPE_CHECKING:
    from server.config import Conventions
    from tools.mesh_index.linked import LinkedIndex

log = logging.getLogger("mesh.index")


class WarmStartMixin:
    """Manifest check, lazy snapshot load and manifest writing (see the module docstring)."""

    # state of the host service (set by IndexService.__init__)
    workspace: Path
    full_conventions: Conventions
    known_emitters: list[str]
    _signature: str
    _lock: threading.RLock
    _files: dict[str, tuple[int, int, str]]
    _dirs: dict[str, int]
    _found: Discovery | None
    _index: LinkedIndex | None
    _engine: Any
    _layout: Any
    _info: IndexInfo | None
    _errors: list[str]
    _stale: list[str]
    _stale_checked: float
    _snapshot_digest: str | None
    _build_digest: str | None
    _lazy: manifest.Manifest | None
    _manifest_seen: dict[str, Any] | None
    _manifest_usable: bool
    _racy: set[str]
    _built_configs: dict[str, int] | None
    _index_unvouched: bool
    _packages: dict[str, tuple[int, Any]]
    _facts_loaded: bool
    _walk_coming: Any
    _watch_wanted: bool

    if TYPE_CHECKING:  # provided by the service and BuildCacheMixin
        def _open_cache(self) -> FactCache | None: ...
        def _digest(self, found: Discovery, configs: dict[str, int] | None = None) -> str: ...

    def _init_warm_start(self) -> None:
        self._lazy = None  # the manifest held: the snapshot is loaded on the first query
        self._manifest_seen = None  # the manifest read or written last
        self._manifest_usable = True  # False once loading what a manifest vouched for failed
        self._racy = set()  # files to hash even when their stat did not change (see manifest.py)
        self._built_configs = None  # config mtimes of a build loaded from the snapshot
        self._index_unvouched = False  # events were left unapplied at close: write no manifest of this state

    def manifest_key(self) -> str:
        """What a build depends on besides the files: extraction signature, conventions, emitters, code version."""
        text = json.dumps([manifest.FORMAT, __version__, self._signature, self.full_conventions.model_dump_json(),
                           sorted(self.known_emitters)])
        return hashlib.sha1(text.encode(), usedforsecurity=False).hexdigest()

    def _from_manifest(self, cache: FactCache, started: float) -> IndexInfo | None:
        """The refresh's answer when the manifest of the last build holds (the service then stays lazy); None
        when it does not, or does not apply: the index or the facts are in memory, the server's start-up walk
        is coming, the service keeps folder watches (they are set by a walk), or loading what it vouched for
        failed once."""
        if (self._index is not None or self._facts_loaded or self._walk_coming is not None or self._watch_wanted
                or not self._manifest_usable):
            return None
        key = self.manifest_key()
        data = self._manifest_seen if self._lazy is not None else cache.load_manifest()
        self._manifest_seen = data
        found = manifest.check(str(self.workspace), data, key, cache.snapshot_digest())
        if found is None:
            self._lazy = None
            self._racy = manifest.racy_files(data, key)
            return None
        self._lazy = found
        fresher = manifest.aged(data) if data is not None else None
        if fresher is not None:  # its racy files matched their hashes long enough after their mtimes
            cache.replace_manifest(manifest.dumps(data), manifest.dumps(fresher))
            self._manifest_seen = fresher
        self._stale, self._stale_checked = [], time.monotonic()
        self._info = IndexInfo(
            workspace=str(self.workspace), files=len(found.files), parse_errors=len(found.errors),
            parse_error_files=found.errors[:50], indexed_at=datetime.now(UTC).isoformat(timespec="seconds"),
            stale_files=[], reparsed=0, duration_s=round(time.perf_counter() - started, 3), cache=str(cache.path),
            skipped_files=found.skipped[:50])
        return self._info

    def _load_lazy(self) -> bool:
        """Load the snapshot the manifest vouched for (and the stat table); False: the caller refreshes."""
        lazy, self._lazy = self._lazy, None
        self._manifest_usable = False  # whatever happens next, this process does not use the manifest again
        cache = self._open_cache()
        if lazy is None or cache is None:
            return False
        from tools.mesh_index import snapshot
        from tools.mesh_index.impact import ImpactEngine

        stats = cache.load_stats()
        same = len(stats) == len(lazy.files) and all(
            (known := stats.get(rel)) is not None and known[0] == size and known[1] == mtime
            for rel, size, mtime in zip(lazy.files, lazy.sizes, lazy.mtimes, strict=True))
        data = cache.load_snapshot(lazy.digest) if same else None
        if data is None:
            return False
        try:
            index, errors = snapshot.load(data)
        except (ValueError, KeyError, TypeError, IndexError) as exc:
            log.warning("ignoring the index snapshot: %s", exc)
            return False
        files = [SourceFile(rel, indexed_kind(rel) or "ts", size, mtime)
                 for rel, size, mtime in zip(lazy.files, lazy.sizes, lazy.mtimes, strict=True)]
        self._found = Discovery(files, list(lazy.packages), list(lazy.tsconfigs), list(lazy.git_roots),
                                dict(lazy.dirs), list(lazy.skipped))
        self._dirs = self._found.dirs
        self._files = stats
        self._index, self._errors = index, errors
        self._engine = ImpactEngine(index)
        self._layout = None
        self._snapshot_digest = self._build_digest = lazy.digest
        self._built_configs = dict(lazy.configs)
        gc.freeze()
        return True

    def _write_manifest(self, cache: FactCache | None) -> None:
        """Store the manifest of the current build when its snapshot is in the cache and it says something new."""
        if (cache is None or self._index is None or self._found is None or self._lazy is not None
                or self._index_unvouched):
            return
        configs = self._built_configs
        if configs is None:
            configs = {rel: mtime for rel, (mtime, _parsed) in self._packages.items()}
        digest = self._build_digest or self._digest(self._found, configs)
        if cache.snapshot_digest() != digest:
            return
        skipped: dict[str, tuple[int, int]] = {}
        for rel in self._found.skipped:
            try:
                st = os.lstat(self.workspace / rel)
            except OSError:
                return
            if st.st_size <= MAX_FILE_BYTES:  # it shrank since the walk: the next refresh must read it
                return
            skipped[rel] = (st.st_size, st.st_mtime_ns)
        data = manifest.make(self.manifest_key(), digest, self._files, self._dirs, configs, self._found,
                             self._errors, skipped)
        seen = self._manifest_seen
        if seen is not None and {**seen, "written_ns": 0} == {**data, "written_ns": 0}:
            return
        cache.store_manifest(manifest.dumps(data))
        self._manifest_seen = data
