"""IndexService: the static index of one workspace, built lazily, refreshed incrementally.

:meth:`IndexService.refresh` discovers the files, reuses the facts of every file whose
size and mtime (or, failing that, content hash) did not change — from memory, or from the
SQLite cache (``<workspace>/.mesh/static-index.sqlite`` or ``cache_dir``) on the first
refresh of a process — parses the others (in parallel when many), and relinks the index
when anything changed. Queries (:meth:`analyze_impact`, :meth:`catalogue`) use the last
built index and report the files changed since as ``stale_files`` (checked at most every
``stale_check_interval_s``). All methods are thread-safe (one lock); the MCP adapters call
them from a worker thread. Change detection lives in :mod:`tools.mesh_index.freshness`, the
snapshot and derived-results bookkeeping in :mod:`tools.mesh_index.build_cache` (both mixed
into :class:`IndexService`).

Other capabilities use :func:`get_index_service` and the resolved facts through
:meth:`IndexService.linked` (declarations, handlers, workers, post-processors, mappings,
fallback wrappers) and :meth:`IndexService.package_dir_of`.
"""

from __future__ import annotations

import gc
import hashlib
import itertools
import json
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from server.config import Conventions, StaticConventions
from server.errors import InvalidArgument, MeshError
from tools.mesh_index.build_cache import BuildCacheMixin
from tools.mesh_index.build_steps import gc_paused, import_linker, link
from tools.mesh_index.cache import FactCache
from tools.mesh_index.catalogue import build_catalogue
from tools.mesh_index.facts_access import FactsAccessMixin
from tools.mesh_index.freshness import FreshnessMixin
from tools.mesh_index.impact import ImpactEngine
from tools.mesh_index.linked import LinkedIndex
from tools.mesh_index.literal_facts import FACTS_VERSION
from tools.mesh_index.model import Catalogue, ImpactResult, IndexInfo
from tools.mesh_index.paging import validate_page
from tools.mesh_index.ts_queries import ExtractConfig, extract_config  # noqa: F401 - extract_config: its old home
from tools.mesh_index.warm_start import WarmStartMixin
from tools.mesh_index.workspace import Discovery, Layout, Package, TsConfig, discover

if TYPE_CHECKING:
    from tools.mesh_index.watch import FolderWatch


Progress = Callable[[int, int, str], None]
MAX_TARGET = 512
MAX_DEPTH = 5
SNAPSHOT_AT_ONCE = 200  # a refresh that parsed this many files writes the snapshot at once (else on close)


class IndexService(FreshnessMixin, BuildCacheMixin, WarmStartMixin, FactsAccessMixin):
    """The static index of ``workspace`` (see the module docstring).

    Change detection (folder watches, files to parse again, stale files) comes from
    :class:`~tools.mesh_index.freshness.FreshnessMixin`; the linked snapshot and the derived
    results (:meth:`failing_checks`, :meth:`summary`) from
    :class:`~tools.mesh_index.build_cache.BuildCacheMixin`; the warm start of a new process (answer from
    the manifest, load the snapshot on the first query) from :class:`~tools.mesh_index.warm_start.WarmStartMixin`.
    """

    def __init__(self, workspace: Path, conventions: Conventions | StaticConventions,
                 cache_dir: Path | None = None, *, known_emitters: list[str] | None = None,
                 workers: int | None = None, stale_check_interval_s: float = 2.0, use_cache: bool = True,
                 watch: bool = False):
        self.workspace = Path(workspace).resolve()
        self.full_conventions = conventions if isinstance(conventions, Conventions) else Conventions(static=conventions)
        self.conventions: StaticConventions = self.full_conventions.static
        self.known_emitters = list(known_emitters or [])
        self.cache_dir = Path(cache_dir) if cache_dir is not None else self.workspace / ".mesh"
        self.workers = workers
        self.stale_check_interval_s = stale_check_interval_s
        self._cfg = extract_config(self.full_conventions)
        self._signature = hashlib.sha1(json.dumps([FACTS_VERSION, repr(self._cfg)]).encode()).hexdigest()
        self._use_cache = use_cache
        self._cache: FactCache | None = None
        self._lock = threading.RLock()
        self._files: dict[str, tuple[int, int, str]] = {}  # rel -> (size, mtime_ns, sha1)
        self._facts: dict[str, dict[str, Any]] = {}
        self._packages: dict[str, tuple[int, Package | TsConfig | None]] = {}  # package.json, tsconfig.json
        self._layout: Layout | None = None
        self._linked_roots: list[str] | None = None  # the git roots of the layout the index was linked with
        self._index: LinkedIndex | None = None
        self._engine: ImpactEngine | None = None
        self._info: IndexInfo | None = None
        self._stale: list[str] = []
        self._stale_checked = 0.0
        self._dirs: dict[str, int] = {}
        self._found: Discovery | None = None
        self._facts_loaded = False
        self._errors: list[str] = []
        self._pending_snapshot = False
        self._snapshot_digest: str | None = None  # digest of the snapshot this process loaded
        self._build_digest: str | None = None  # digest of the state the current index was built from
        self._memo: dict[str, tuple[LinkedIndex | None, Any]] = {}  # values derived from one build (see _derived)
        self._watch_wanted = watch  # a long-running server: folder watches replace the walk (see watch.py)
        self._watch: FolderWatch | None = None
        self._watch_clean = False  # the last walk ran with every folder watched: the events name what changes
        self._walk_coming: Callable[[], Discovery | None] | None = None  # the first refresh's walk (walk_coming)
        self._init_warm_start()

    # -- building ------------------------------------------------------------------------------
    def _open_cache(self) -> FactCache | None:
        if self._use_cache and self._cache is None:
            self._cache = FactCache(self.cache_dir, self._signature)
        return self._cache if self._cache is not None and self._cache.enabled else None

    def walk_coming(self, receive: Callable[[], Discovery | None]) -> None:
        """The first refresh takes its walk from ``receive()`` (the start-up's child process, see warmup.py:
        each folder's watch was set on :meth:`folder_watch` before the folder was read); None: it walks."""
        with self._lock:
            self._walk_coming = receive

    def refresh(self, progress: Progress | None = None, full: bool = False) -> IndexInfo:
        """Bring the index up to date with the files on disk; returns its state.

        The cyclic garbage collector is paused while facts are loaded and linked (they are
        millions of small acyclic containers: collecting during the build only costs time),
        and the result is moved to the permanent generation (``gc.freeze``) so that later
        collections do not traverse the index on every query.
        """
        with self._lock, gc_paused():
            return self._refresh(progress, full)

    def _refresh(self, progress: Progress | None, full: bool) -> IndexInfo:
        started = time.perf_counter()
        if full:
            self._lazy = None
        delta = None if full else self._watched_delta()
        if delta is None or not delta.empty:
            self._watch_generation += 1  # something may have changed (see watch_generation)
        if delta is not None:  # the folder watches name what changed: no walk
            if delta.empty:
                assert self._info is not None
                self._stale, self._stale_checked = [], time.monotonic()
                self._info = self._info.model_copy(update={
                    "indexed_at": datetime.now(UTC).isoformat(timespec="seconds"), "reparsed": 0,
                    "stale_files": [], "duration_s": round(time.perf_counter() - started, 3)})
                return self._info
            applied = self._apply_delta(delta)
            if applied is not None:
                return self._refresh_delta(*applied, progress, started)
        if not self.workspace.is_dir():
            raise MeshError(f"workspace {self.workspace} is not a directory (check --workspace or mesh.toml)")
        cache = self._open_cache()
        info = None if full or cache is None else self._from_manifest(cache, started)  # no walk when it holds
        if info is not None:
            return info
        receive, self._walk_coming = self._walk_coming, None
        found = receive() if receive is not None else None
        if found is None:
            found = discover(self.workspace, self.conventions.skip_dirs, before_scan=self._watch_for_walk())
        self._found = found
        self._dirs = found.dirs
        if full:
            self._files.clear()
            self._facts.clear()
            self._facts_loaded = True
            if cache is not None:
                cache.clear()
        elif not self._facts_loaded:
            if cache is not None and self._from_snapshot(found, cache, started):
                assert self._info is not None
                self._watch_after_walk()
                return self._info
            self._load_facts(cache)
        to_parse, touched = self._changed(found.files)
        current = {f.rel for f in found.files}
        removed = [rel for rel in self._files if rel not in current]
        configs_changed = self._read_configs(found.packages, found.tsconfigs)
        configs_changed = configs_changed or (self._linked_roots is not None and self._linked_roots != found.git_roots)
        return self._update(to_parse, touched, removed, configs_changed, progress, started, full)

    def _update(self, to_parse: list[tuple[str, str]], touched: list[tuple[str, int, int]], removed: list[str],
                configs_changed: bool, progress: Progress | None, started: float, full: bool) -> IndexInfo:
        """Parse ``to_parse``, drop ``removed``, relink when any file's facts or the layout changed."""
        cache = self._open_cache()
        if not self._packages and self._found is not None:  # loaded from the snapshot: read the configs now
            self._read_configs(self._found.packages, self._found.tsconfigs)
        self._built_configs = None  # self._packages holds the config mtimes of this build
        new_files = bool(removed) or any(rel not in self._files for rel, _kind in to_parse)
        for rel in removed:
            self._files.pop(rel, None)
            self._facts.pop(rel, None)
        results = []
        if to_parse:  # the parser (and tree-sitter) is imported only when something must be parsed
            from tools.mesh_index.indexer import parse_files

            results = parse_files(str(self.workspace), to_parse, self._cfg, progress, self.workers,
                                  while_waiting=import_linker)
        facts_changed = False
        for rel, size, mtime, sha, facts in results:
            self._files[rel] = (size, mtime, sha)
            facts_changed = facts_changed or self._facts.get(rel) != facts
            self._facts[rel] = facts
        if cache is not None:
            cache.store(results)
            cache.touch(touched)
            cache.delete(removed)
        # an edit that leaves every file's facts as they were (a comment, a method body) needs no relink
        changed = bool(facts_changed or removed or configs_changed or self._index is None)
        if results or removed:
            self._pending_snapshot = True  # file hashes changed: the snapshot digest must follow
            self._build_digest = None
        if changed:
            if new_files or configs_changed or self._layout is None:  # else the same files: its memos hold
                self._layout = self._make_layout()
            self._build_digest = None
            keys = list(self._facts)
            if any(a > b for a, b in itertools.pairwise(keys)):  # the linker's order is the files'
                self._facts = dict(sorted(self._facts.items()))  # so that any build of a state gives one index
            self._index = link(self._facts, self._layout, self.full_conventions, self.known_emitters)
            self._engine = ImpactEngine(self._index)
            self._errors = sorted(rel for rel, f in self._facts.items() if f.get("error"))
            self._pending_snapshot = True  # its digest is computed when written (on close, or now if large)
            if cache is not None and (len(results) >= SNAPSHOT_AT_ONCE or full):
                self._write_snapshot()
        self._info = self._make_info(len(results), started, cache)
        self._watch_after_walk()
        if changed:
            gc.freeze()
        return self._info

    def _make_info(self, reparsed: int, started: float, cache: FactCache | None) -> IndexInfo:
        self._stale, self._stale_checked = [], time.monotonic()
        self._racy = set()  # hashed by this refresh's comparison
        return IndexInfo(
            workspace=str(self.workspace), files=len(self._files), parse_errors=len(self._errors),
            parse_error_files=self._errors[:50], indexed_at=datetime.now(UTC).isoformat(timespec="seconds"),
            stale_files=[], reparsed=reparsed, duration_s=round(time.perf_counter() - started, 3),
            cache=str(cache.path) if cache is not None else (self._cache.error if self._cache else None),
            skipped_files=self._found.skipped[:50] if self._found is not None else [],
        )

    def _load_facts(self, cache: FactCache | None) -> None:
        self._files.clear()
        self._facts.clear()
        if cache is not None:
            for rel, (size, mtime, sha, facts) in cache.load().items():
                if facts.get("v") == FACTS_VERSION:
                    self._files[rel] = (size, mtime, sha)
                    self._facts[rel] = facts
        self._facts_loaded = True

    def _make_layout(self) -> Layout:
        if self._found is not None and not self._packages:
            self._read_configs(self._found.packages, self._found.tsconfigs)
        self._linked_roots = list(self._found.git_roots) if self._found is not None else None
        return Layout(
            self.workspace, self._files.keys(),
            [p for _m, p in self._packages.values() if isinstance(p, Package)],
            self._found.git_roots if self._found is not None else [],
            [t for _m, t in self._packages.values() if isinstance(t, TsConfig)])

    def _ensure(self) -> ImpactEngine:
        if self._engine is None and self._lazy is None:
            self.refresh()
        if self._engine is None and self._lazy is not None:  # the manifest held: load its snapshot now
            with gc_paused():
                self._load_lazy()
        if self._engine is None:  # that failed: the ordinary refresh
            self.refresh()
        assert self._engine is not None
        return self._engine

    # -- queries -------------------------------------------------------------------------------
    def analyze_impact(self, target: str, depth: int = 1, include_tests: bool = False, direction: str = "downstream",
                       limit: int | None = None, offset: int = 0) -> ImpactResult:
        """Producers, consumers, routes and follow-ups of ``target`` (see :mod:`tools.mesh_index.impact`); a class or
        config key as target (:mod:`tools.mesh_index.node_targets`); ``direction``; ``limit``/``offset`` paging."""
        if not isinstance(target, str) or not target.strip():
            raise InvalidArgument("target is empty: give a member name, qualified name, string value, queue or stream")
        if len(target) > MAX_TARGET:
            raise InvalidArgument(f"target is {len(target)} characters long (max {MAX_TARGET})")
        if not isinstance(depth, int) or depth < 0 or depth > MAX_DEPTH:
            raise InvalidArgument(f"depth must be between 0 and {MAX_DEPTH} (got {depth!r})")
        validate_page(direction, limit, offset)
        with self._lock:
            engine = self._ensure()
            result = engine.analyze(target.strip(), depth, bool(include_tests), self._current_info(), direction,
                                    limit, offset)
        # -- request-map hook (issue 34): an HTTP route or gRPC method is followed by tools.code_nav --
        from tools.code_nav.request_map import attach_request_map

        return attach_request_map(self, result, bool(include_tests))

    def catalogue(self, kind: str | None = None, orphans_only: bool = False, *, with_checks: bool = True) -> Catalogue:
        """Every job/event/ws_event/queue/stream with counts and orphan reasons.

        With ``with_checks`` each job and event entry also carries the ids of the
        ``verify_flow`` checks it fails: computed on the first such call of an index build,
        then kept in memory and in the cache next to the snapshot, under the same digest
        (any changed file, config file or convention gives another digest: they are
        computed again).
        """
        if kind is not None:
            from tools.mesh_index.sites import KINDS

            if kind not in KINDS:
                raise InvalidArgument(f"kind must be one of {', '.join(KINDS)} (got {kind!r})")
        with self._lock:
            engine = self._ensure()
            catalogue = build_catalogue(engine, self._current_info(), kind, bool(orphans_only))
        if with_checks:
            table = self.failing_checks()
            for entry in catalogue.entries:
                entry.failing_checks = list(table.get((entry.kind, entry.value), []))
        return catalogue

    def info(self) -> IndexInfo:
        with self._lock:
            self._ensure()
            return self._current_info()

    # -- resolved facts for other capabilities ------------------------------------------------------
    def linked(self) -> LinkedIndex:
        """The resolved facts (declared types, sites by value, handlers, workers, post-processors, ...)."""
        with self._lock:
            self._ensure()
            assert self._index is not None
            return self._index

    def package_dir_of(self, rel: str) -> str:
        """Folder (relative) of the nearest package.json above ``rel`` ("" when none)."""
        with self._lock:
            self._ensure()
            if self._layout is None:
                self._layout = self._make_layout()
            return self._layout.package_dir_of(rel)

    def facts_of(self, rel: str) -> dict[str, Any] | None:
        """The raw per-file facts of ``rel`` (see :mod:`tools.mesh_index.parser`)."""
        with self._lock, gc_paused():
            self._ensure()
            if not self._facts_loaded:
                self._load_facts(self._open_cache())
            return self._facts.get(rel)

    def sql_texts(self) -> list[tuple[str, int, str]]:
        """``(path, line, text)`` of every plain SQL string of the workspace (migrations' ``query(`...`)``)."""
        from tools.mesh_index.outcome_shape import sql_texts

        with self._lock, gc_paused():
            self._ensure()
            if not self._facts_loaded:
                self._load_facts(self._open_cache())
            return sql_texts(self._facts)

    def close(self) -> None:
        """Write the pending snapshot (if any), close the cache and the folder watches."""
        with self._lock:
            receive, self._walk_coming = self._walk_coming, None
            if receive is not None:  # never refreshed: reap the start-up's child process
                receive()
            if self._watch is not None:
                if not self._watch.changes().empty:  # events not applied: folder mtimes may be newer than the files
                    self._index_unvouched = True
                self._watch.close()
                self._watch, self._watch_clean = None, False
            self._write_snapshot()
            if self._cache is not None:
                self._cache.close()
                self._cache = None

    async def aclose(self) -> None:
        """Called by the runtime when the server stops."""
        self.close()


SERVICE_KEY = "mesh_index"


def get_index_service(runtime: Any) -> IndexService:
    """The runtime's shared IndexService; raises MeshError when no workspace is configured."""
    settings = runtime.settings
    if settings.workspace is None:
        raise MeshError("no workspace is configured: start the server with --workspace DIR (a folder of "
                        "repositories) or set workspace = \"...\" in mesh.toml")
    return runtime.service(SERVICE_KEY, lambda: service_for_settings(settings, watch=settings.limits.index_watch))


def adopt_index_service(runtime: Any, service: IndexService) -> IndexService:
    """Make ``service`` (built before the runtime, see warmup.py) the runtime's shared one, unless it has one."""
    return runtime.service(SERVICE_KEY, lambda: service)


def service_for_settings(settings: Any, *, watch: bool = False) -> IndexService:
    """An IndexService of ``settings.workspace`` (which must be set): its conventions, its state
    folder for the cache, and the emitters of the configured services. ``watch``: keep folder
    watches between refreshes (the server's shared service; a one-shot command walks once anyway)."""
    emitters = [settings.emitter_of(name) for name in settings.services]
    return IndexService(settings.workspace, settings.conventions, settings.resolved_state_dir,
                        known_emitters=emitters, watch=watch)
