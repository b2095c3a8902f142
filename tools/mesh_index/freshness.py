"""What changed on disk since the last build of an :class:`~tools.mesh_index.service.IndexService`.

:class:`FreshnessMixin` holds the change detection of the service, which mixes it in:

- folder watches (a long-running server only, see :mod:`tools.mesh_index.watch`): every
  folder known so far is watched *before* the walk, so that a change made during the walk is
  queued; when the last walk ran with every folder already watched and no event came since,
  the next refresh skips the walk;
- per file, whether it must be parsed again: a new file, or a file whose size or mtime
  changed and whose content hash differs (same content: only its stat is updated, reported as
  ``touched`` so the cache records it);
- the package.json and tsconfig.json files, read again when their mtime changed;
- the ``stale_files`` of a query: the files changed since the last build, looked for at most
  every ``stale_check_interval_s``.

The methods read and write the service's state (declared below) and run under its lock.
"""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

from server.config import StaticConventions
from tools.mesh_index.cache import FactCache
from tools.mesh_index.linked import LinkedIndex
from tools.mesh_index.model import IndexInfo
from tools.mesh_index.workspace import Discovery, Package, SourceFile, TsConfig, find_stale, read_package, read_tsconfig

if TYPE_CHECKING:
    from tools.mesh_index.watch import FolderWatch


class FreshnessMixin:
    """Change detection of :class:`~tools.mesh_index.service.IndexService` (see the module docstring)."""

    # state of the host service (set by IndexService.__init__)
    workspace: Path
    conventions: StaticConventions
    stale_check_interval_s: float
    _files: dict[str, tuple[int, int, str]]
    _packages: dict[str, tuple[int, Package | TsConfig | None]]
    _dirs: dict[str, int]
    _index: LinkedIndex | None
    _info: IndexInfo | None
    _stale: list[str]
    _stale_checked: float
    _watch_wanted: bool
    _watch: FolderWatch | None
    _watch_clean: bool
    _preloaded_stats: dict[str, tuple[int, int, str]]

    if TYPE_CHECKING:  # provided by the service
        def _open_cache(self) -> FactCache | None: ...

    # -- folder watches (long-running server only) -----------------------------------------------
    def _unchanged_since_last_walk(self) -> bool:
        """True when folder watches prove that nothing changed since the last walk (no walk needed)."""
        if self._watch is None or not self._watch_clean or self._info is None or self._index is None:
            return False
        if self._watch.changed():
            self._watch_clean = False
            return False
        return True

    def _watch_before_walk(self) -> None:
        """Watch every folder known so far before walking, so that a change during the walk is queued."""
        self._watch_clean = False
        if not self._watch_wanted:
            return
        if self._watch is None:
            from tools.mesh_index.watch import FolderWatch

            self._watch = FolderWatch.create()
            if self._watch is None:
                self._watch_wanted = False
                return
            if not self._files and (cache := self._open_cache()) is not None:
                self._preloaded_stats = cache.load_stats()  # a new process: the folders indexed before
        self._watch.changed()  # drain: the walk that follows sees whatever was queued
        root = str(self.workspace)
        folders = {root, *(root + "/" + d for d in self._dirs if d)}
        for rel in self._files or self._preloaded_stats:
            head = rel.rpartition("/")[0]
            while head and (root + "/" + head) not in folders:
                folders.add(root + "/" + head)
                head = head.rpartition("/")[0]
        self._watch.add(sorted(folders))

    def _watch_after_walk(self, found: Discovery) -> None:
        """Watch the folders the walk found; the next call skips the walk only if none was new."""
        if self._watch is None:
            return
        root = str(self.workspace)
        added = self._watch.add([root + "/" + d if d else root for d in found.dirs])
        self._watch_clean = added == 0

    # -- files and config files to read again ----------------------------------------------------
    def _changed(self, files: list[SourceFile]) -> tuple[list[tuple[str, str]], list[tuple[str, int, int]]]:
        """Files to parse, and files whose mtime changed but content did not (rel, size, mtime)."""
        to_parse: list[tuple[str, str]] = []
        touched: list[tuple[str, int, int]] = []
        for f in files:
            known = self._files.get(f.rel)
            if known is None:
                to_parse.append((f.rel, f.kind))
                continue
            if known[0] == f.size and known[1] == f.mtime_ns:
                continue
            try:
                data = (self.workspace / f.rel).read_bytes()
            except OSError:
                continue
            if hashlib.sha1(data, usedforsecurity=False).hexdigest() == known[2]:
                self._files[f.rel] = (f.size, f.mtime_ns, known[2])
                touched.append((f.rel, f.size, f.mtime_ns))
            else:
                to_parse.append((f.rel, f.kind))
        return to_parse, touched

    def _read_configs(self, package_files: list[str], tsconfig_files: list[str]) -> bool:
        """Read package.json and tsconfig.json files that changed; True when any did."""
        changed = False
        seen = set(package_files) | set(tsconfig_files)
        for rel in list(self._packages):
            if rel not in seen:
                del self._packages[rel]
                changed = True
        for rel in [*package_files, *tsconfig_files]:
            try:
                mtime = os.stat(self.workspace / rel).st_mtime_ns
            except OSError:
                continue
            known = self._packages.get(rel)
            if known is None or known[0] != mtime:
                reader = read_package if rel.endswith("package.json") else read_tsconfig
                self._packages[rel] = (mtime, reader(self.workspace, rel))
                changed = True
        return changed

    # -- staleness seen by queries --------------------------------------------------------------
    def _current_info(self) -> IndexInfo:
        assert self._info is not None
        now = time.monotonic()
        if now - self._stale_checked >= self.stale_check_interval_s:
            self._stale_checked = now
            self._stale = find_stale(self.workspace, self._files, self._dirs, self.conventions.skip_dirs)
        return self._info.model_copy(update={"stale_files": self._stale[:200]})
