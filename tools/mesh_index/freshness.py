"""What changed on disk since the last build of an :class:`~tools.mesh_index.service.IndexService`.

:class:`FreshnessMixin` holds the change detection of the service, which mixes it in:

- folder watches (a long-running server only, see :mod:`tools.mesh_index.watch`): the walk
  sets a watch on each folder right before reading it, so that a change made during the walk
  is queued; from then on a refresh does not walk: it reads the events and looks only at what
  they name (:meth:`FreshnessMixin._apply_delta`: each file named is stat'ed and hashed, each
  folder created, removed or renamed is walked again alone). It walks the whole workspace
  again when the events cannot say what changed (the kernel's queue overflowed, a watch could
  not be set, the workspace folder itself moved) and on ``full``;
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
import stat
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from server import workspace_files
from server.config import StaticConventions
from tools.mesh_index.cache import FactCache
from tools.mesh_index.linked import LinkedIndex
from tools.mesh_index.model import IndexInfo
from tools.mesh_index.workspace import (
    MAX_FILE_BYTES,
    Discovery,
    Package,
    SourceFile,
    TsConfig,
    discover,
    find_stale,
    indexed_kind,
    read_package,
    read_tsconfig,
)

if TYPE_CHECKING:
    from tools.mesh_index.watch import Delta, FolderWatch


def _lstat(path: str) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except OSError:
        return None


def _regular(path: str) -> os.stat_result | None:
    """The stat of ``path`` when it is a regular file (not a symlink: the walk does not follow them)."""
    st = _lstat(path)
    return st if st is not None and stat.S_ISREG(st.st_mode) else None


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
    _found: Discovery | None
    _racy: set[str]

    if TYPE_CHECKING:  # provided by the service
        _facts_loaded: bool

        def refresh(self, progress: Callable[[int, int, str], None] | None = None, full: bool = False) -> IndexInfo: ...

        def _open_cache(self) -> FactCache | None: ...
        def _load_facts(self, cache: FactCache | None) -> None: ...
        def _make_info(self, reparsed: int, started: float, cache: FactCache | None) -> IndexInfo: ...
        def _update(self, to_parse: list[tuple[str, str]], touched: list[tuple[str, int, int]], removed: list[str],
                    configs_changed: bool, progress: Callable[[int, int, str], None] | None, started: float,
                    full: bool) -> IndexInfo: ...

    # -- folder watches (long-running server only) -----------------------------------------------
    _watch_generation = 0  # bumped by each refresh that walked or applied events (see watch_generation)

    def watch_generation(self) -> int | None:
        """A number that changes whenever the folder watches see anything change in the workspace:
        the same number from two calls means no watched file or folder changed in between (other
        readers of the workspace, such as the skills catalog, can then skip their own checks).

        It refreshes the index first (the watches' events are drained there; microseconds when
        nothing changed). None when the index holds no clean folder watch (not built yet, a one-shot
        command, no inotify, an overflowed queue): then the caller checks for itself."""
        if self._watch is None or not self._watch_clean or self._index is None:
            return None
        try:
            self.refresh()
        except Exception:  # the workspace is gone, a refresh failed: nothing can be vouched for
            return None
        return self._watch_generation if self._watch_clean else None

    def _watched_delta(self) -> Delta | None:
        """What the folder watches saw since the last refresh, or None when the caller must walk."""
        if (self._watch is None or not self._watch_clean or self._info is None or self._index is None
                or self._found is None):
            return None
        delta = self._watch.changes()
        if delta.full:
            self._watch_clean = False
            return None
        return delta

    def _watch_for_walk(self) -> Callable[[str], object] | None:
        """The hook that watches each folder right before the walk reads it (None: no watches)."""
        self._watch_clean = False
        watch = self.folder_watch()
        if watch is None:
            return None
        watch.changes()  # drain: the walk that follows reads whatever was queued
        return watch.add

    def folder_watch(self) -> FolderWatch | None:
        """The service's folder watches, made on first use (None: not wanted, or no inotify here)."""
        if self._watch is None and self._watch_wanted:
            from tools.mesh_index.watch import FolderWatch

            self._watch = FolderWatch.create(str(self.workspace))
            self._watch_wanted = self._watch is not None
        return self._watch

    def _watch_after_walk(self) -> None:
        """After a walk (or a delta) that succeeded: the next refresh may trust the events."""
        self._watch_clean = self._watch is not None and not self._watch.broken

    def _apply_delta(self, delta: Delta) -> tuple[list[SourceFile], list[str], bool] | None:
        """The files ``delta`` names as they are now, the indexed files gone, and whether the layout
        (package.json, tsconfig.json, git roots) changed; None when the caller must walk instead.

        Each folder named walks again alone (its watches dropped and set anew as it is read); each
        file named is stat'ed. ``self._found`` and ``self._dirs`` follow (except ``found.files``:
        the files are ``self._files``)."""
        assert self._found is not None and self._watch is not None
        found = self._found
        root = str(self.workspace)
        cut = len(root) + 1
        skip = set(self.conventions.skip_dirs)
        present: dict[str, SourceFile] = {}
        gone: set[str] = set()
        git_roots = list(found.git_roots)
        configs = False  # a package.json or tsconfig.json may have come, gone or changed
        walked: list[str] = []  # folders walked again (relative): files under them are done
        for path in sorted(delta.folders):
            if not path.startswith(root + "/"):
                return None
            rel = path[cut:]
            if any(rel.startswith(w + "/") for w in walked):
                continue
            parent, _, name = rel.rpartition("/")
            self._restat_dir(parent)
            if name == ".git":
                self._git_marker(parent)
                continue
            if name in skip:
                continue
            walked.append(rel)
            self._watch.forget(path)
            prefix = rel + "/"
            gone.update(r for r in self._files if r.startswith(prefix))
            for d in [d for d in self._dirs if d == rel or d.startswith(prefix)]:
                del self._dirs[d]
            lists = (found.packages, found.tsconfigs, found.git_roots, found.skipped)
            kept = [[r for r in lst if not (r == rel or r.startswith(prefix))] for lst in lists]
            configs = configs or any(len(k) != len(lst) for k, lst in zip(kept[:2], lists[:2], strict=True))
            if os.path.isdir(path) and not os.path.islink(path):
                sub = discover(self.workspace, skip, rel, before_scan=self._watch.add)
                present.update((f.rel, f) for f in sub.files)
                self._dirs.update(sub.dirs)
                for k, more in zip(kept, (sub.packages, sub.tsconfigs, sub.git_roots, sub.skipped), strict=True):
                    k.extend(more)
                configs = configs or bool(sub.packages or sub.tsconfigs)
            found.packages, found.tsconfigs, found.git_roots, found.skipped = (sorted(set(k)) for k in kept)
        for path in delta.files:
            rel = path[cut:]
            if not path.startswith(root + "/") or any(rel.startswith(w + "/") for w in walked):
                continue
            folder, _, name = rel.rpartition("/")
            self._restat_dir(folder)
            if name == ".git":
                self._git_marker(folder)
            elif name in ("package.json", "tsconfig.json"):
                configs = True
                listed = found.packages if name == "package.json" else found.tsconfigs
                if _regular(path) is None:
                    if rel in listed:
                        listed.remove(rel)
                elif rel not in listed:
                    listed.append(rel)
                    listed.sort()
            elif (kind := indexed_kind(rel)) is not None:
                st = _regular(path)
                if rel in found.skipped:
                    found.skipped.remove(rel)
                if st is None or st.st_size > MAX_FILE_BYTES:
                    gone.add(rel)
                    if st is not None:
                        found.skipped.append(rel)
                        found.skipped.sort()
                else:
                    present[rel] = SourceFile(rel, kind, st.st_size, st.st_mtime_ns)
        layout = found.git_roots != git_roots
        if configs:
            layout = self._read_configs(found.packages, found.tsconfigs) or layout
        gone = {rel for rel in gone if rel in self._files and rel not in present}
        return sorted(present.values(), key=lambda f: f.rel), sorted(gone), layout

    def _refresh_delta(self, files: list[SourceFile], removed: list[str], layout_changed: bool,
                       progress: Callable[[int, int, str], None] | None, started: float) -> IndexInfo:
        """The refresh of the files an event named (see :meth:`_apply_delta`)."""
        cache = self._open_cache()
        to_parse, touched = self._changed(files, verify=True)
        if not self._facts_loaded:  # loaded from the snapshot: the facts are needed only to relink
            if not (to_parse or removed or layout_changed):
                if cache is not None:
                    cache.touch(touched)
                self._info = self._make_info(0, started, cache)
                self._watch_after_walk()
                return self._info
            if cache is not None:
                cache.touch(touched)
            self._load_facts(cache)
            to_parse, touched = self._changed(files, verify=True)
        return self._update(to_parse, touched, removed, layout_changed, progress, started, False)

    def _restat_dir(self, rel_dir: str) -> None:
        """Record a known folder's new mtime (an entry was added or removed: see ``find_stale``)."""
        if rel_dir in self._dirs:
            st = _lstat(os.path.join(self.workspace, rel_dir))
            if st is not None:
                self._dirs[rel_dir] = st.st_mtime_ns

    def _git_marker(self, rel_dir: str) -> None:
        """A ``.git`` entry came or went in ``rel_dir``: update the git roots."""
        assert self._found is not None
        st = _lstat(os.path.join(self.workspace, rel_dir, ".git"))
        is_root = st is not None and (stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode))
        roots = set(self._found.git_roots)
        if is_root != (rel_dir in roots):
            roots.symmetric_difference_update({rel_dir})
            self._found.git_roots = sorted(roots)

    # -- files and config files to read again ----------------------------------------------------
    def _changed(self, files: list[SourceFile], verify: bool = False
                 ) -> tuple[list[tuple[str, str]], list[tuple[str, int, int]]]:
        """Files to parse, and files whose mtime changed but content did not (rel, size, mtime).

        ``verify``: hash even the files whose size and mtime did not change (those an event named:
        two writes within the file system's timestamp granularity leave the same mtime); the files in
        ``_racy`` (stats too recent for the last manifest to vouch for) are hashed likewise."""
        to_parse: list[tuple[str, str]] = []
        touched: list[tuple[str, int, int]] = []
        for f in files:
            known = self._files.get(f.rel)
            if known is None:
                to_parse.append((f.rel, f.kind))
                continue
            same_stat = known[0] == f.size and known[1] == f.mtime_ns
            if same_stat and not verify and f.rel not in self._racy:
                continue
            try:
                data = workspace_files.read_bytes(self.workspace, f.rel)
            except OSError:
                continue
            if hashlib.sha1(data, usedforsecurity=False).hexdigest() == known[2]:
                if not same_stat:
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
