"""What an :class:`~tools.mesh_index.service.IndexService` keeps per build, under the build's digest.

:class:`BuildCacheMixin` holds the bookkeeping of the service, which mixes it in, for the
values stored in the :class:`~tools.mesh_index.cache.FactCache` next to the per-file facts:

- the linked snapshot (:mod:`tools.mesh_index.snapshot`): a new process on an unchanged
  workspace loads it instead of loading every file's facts and linking them again; it is
  written on close (or at once after a large refresh) when the index changed;
- the digest of the state a build was made from (signature of the extraction config and the
  conventions, known emitters, file hashes, config file mtimes, git roots): any change gives
  another digest, so a stale snapshot or derived result is never used;
- derived results (:meth:`BuildCacheMixin.failing_checks`, :meth:`BuildCacheMixin.summary`):
  computed once per build, kept in memory and in the cache under the build digest plus the
  code version.

The methods read and write the service's state (declared below) and take its lock.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from server import __version__
from server.config import Conventions
from tools.mesh_index import snapshot
from tools.mesh_index.cache import FactCache
from tools.mesh_index.impact import ImpactEngine
from tools.mesh_index.linked import LinkedIndex
from tools.mesh_index.model import Catalogue, IndexInfo
from tools.mesh_index.workspace import Discovery, Layout, Package, SourceFile, TsConfig

log = logging.getLogger("mesh.index")


class BuildCacheMixin:
    """Snapshot and derived-results bookkeeping of :class:`~tools.mesh_index.service.IndexService`."""

    # state of the host service (set by IndexService.__init__)
    full_conventions: Conventions
    known_emitters: list[str]
    _signature: str
    _lock: threading.RLock
    _cache: FactCache | None
    _files: dict[str, tuple[int, int, str]]
    _packages: dict[str, tuple[int, Package | TsConfig | None]]
    _found: Discovery | None
    _layout: Layout | None
    _index: LinkedIndex | None
    _engine: ImpactEngine | None
    _info: IndexInfo | None
    _errors: list[str]
    _pending_snapshot: bool
    _snapshot_digest: str | None
    _build_digest: str | None
    _memo: dict[str, tuple[LinkedIndex | None, Any]]
    _lazy: Any
    _built_configs: dict[str, int] | None

    if TYPE_CHECKING:  # provided by the service, FreshnessMixin and WarmStartMixin
        def _changed(self, files: list[SourceFile]) -> tuple[list[tuple[str, str]], list[tuple[str, int, int]]]: ...
        def _make_info(self, reparsed: int, started: float, cache: FactCache | None) -> IndexInfo: ...
        def _ensure(self) -> ImpactEngine: ...
        def _write_manifest(self, cache: FactCache | None) -> None: ...
        def catalogue(self, kind: str | None = None, orphans_only: bool = False, *,
                      with_checks: bool = True) -> Catalogue: ...

    # -- the linked snapshot ----------------------------------------------------------------------
    def _from_snapshot(self, found: Discovery, cache: FactCache, started: float) -> bool:
        """A new process on an unchanged workspace: load the linked snapshot instead of facts + link.

        Also answers the refreshes that follow while nothing changes (facts stay unloaded)."""
        if self._index is None:
            self._files = cache.load_stats()
        to_parse, touched = self._changed(found.files)
        current = {f.rel for f in found.files}
        if to_parse or not all(rel in current for rel in self._files):
            return False
        configs = snapshot.config_mtimes(self.workspace, found)
        digest = self._digest(found, configs)
        if self._index is not None:
            if digest != self._snapshot_digest:
                return False
            self._build_digest = digest
            self._built_configs = configs
            cache.touch(touched)
            self._info = self._make_info(0, started, cache)
            return True
        data = cache.load_snapshot(digest)
        if data is None:
            return False
        try:
            self._index, self._errors = snapshot.load(data)
        except (ValueError, KeyError, TypeError, IndexError) as exc:
            log.warning("ignoring the index snapshot: %s", exc)
            return False
        cache.touch(touched)
        self._snapshot_digest = self._build_digest = digest
        self._built_configs = configs
        self._engine = ImpactEngine(self._index)
        self._layout = None
        self._info = self._make_info(0, started, cache)
        return True

    def _digest(self, found: Discovery, configs: dict[str, int] | None = None) -> str:
        """Digest of the state the index was built from (config mtimes as read by the last refresh)."""
        if configs is None:
            configs = {rel: mtime for rel, (mtime, _parsed) in self._packages.items()}
        return snapshot.digest(self._signature + self.full_conventions.model_dump_json(), self.known_emitters,
                               self._files, configs, found.git_roots)

    def _write_snapshot(self) -> None:
        """Store the snapshot when the index changed, and the manifest of the build (see warm_start.py)."""
        cache = self._cache if self._cache is not None and self._cache.enabled else None
        if cache is not None and self._pending_snapshot and self._index is not None and self._found is not None:
            digest = self._digest(self._found)
            cache.store_snapshot(digest, snapshot.dump(self._index, self._errors))
            self._build_digest = digest
        self._pending_snapshot = False
        self._write_manifest(cache)

    # -- derived results ---------------------------------------------------------------------------
    def failing_checks(self) -> dict[tuple[str, str], list[str]]:
        """(kind, value) -> ids of the verify_flow checks that job or event type fails (see :meth:`catalogue`)."""

        def compute() -> list[list[Any]]:
            # verify_flow is built on this index; imported here to keep the dependency one-way at load time
            from tools.verify.service import failing_checks_by_type

            return [[k, v, ids] for (k, v), ids in sorted(failing_checks_by_type(self).items())]

        rows = self._derived("checks", compute)
        return {(k, v): list(ids) for k, v, ids in rows}

    def summary(self) -> tuple[dict[str, int], int]:
        """The catalogue's counts by kind and its number of orphans (what ``mesh-mcp index`` prints),
        kept in memory and in the cache like :meth:`failing_checks`."""

        def compute() -> list[Any]:
            catalogue = self.catalogue(with_checks=False)
            return [catalogue.counts, catalogue.orphans]

        counts, orphans = self._derived("summary", compute)
        return dict(counts), int(orphans)

    def _derived(self, name: str, compute: Callable[[], Any]) -> Any:
        """``compute()`` for the current build: from memory, else from the cache (same digest), else computed
        (outside the lock: it may query the index) and stored for this build only."""
        with self._lock:
            lazy = self._lazy if self._index is None else None
            cache = self._cache if self._cache is not None and self._cache.enabled else None
            if lazy is not None and cache is not None:  # the manifest held: the snapshot's own results, unloaded
                stored = cache.load_derived(name, f"{lazy.digest}:{__version__}")
                if stored is not None:
                    return stored
            self._ensure()
            index = self._index
            memo = self._memo.get(name)
            if memo is not None and memo[0] is index:
                return memo[1]
            cache = self._cache if self._cache is not None and self._cache.enabled else None
            key = self._build_key() if cache is not None else None
            value = cache.load_derived(name, key) if cache is not None and key is not None else None
        if value is None:
            value = compute()
            with self._lock:
                if cache is not None and key is not None and self._index is index:
                    cache.store_derived(name, key, value)
        with self._lock:
            if self._index is index:
                self._memo[name] = (index, value)
        return value

    def _build_key(self) -> str | None:
        """The digest of the current build (as the snapshot's) plus the code version, or None."""
        if self._found is None:
            return None
        if self._build_digest is None:  # built here: file hashes and config mtimes as this build read them
            self._build_digest = self._digest(self._found)
        return f"{self._build_digest}:{__version__}"
