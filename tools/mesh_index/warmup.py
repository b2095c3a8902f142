"""``mesh-mcp serve`` loads the static index in the background from its first moment.

A new server process on a built index pays, on its first ``analyze_impact``, the freshness
walk of the workspace and the snapshot load (0.3 s at 20,000 files, most of it the walk's
20,000 ``stat`` calls). ``serve`` builds the index service before it imports the MCP SDK and
starts that refresh in a daemon thread (:func:`start_warm_up`); once the server is built the
service becomes the runtime's shared one (:func:`adopt`). The first call finds the refresh done
or underway: it waits for it on the service's lock and never answers from a half-loaded or
unchecked index. Skipped when no workspace is configured, when ``limits.index_warm_at_start``
is false, and when the workspace has never been indexed (the first call then builds the index
itself, with progress).

The walk runs in a forked child process when the process has a single thread (as ``serve``
has at that moment), so that it does not share the interpreter's lock with the SDK import
running meanwhile: the child inherits the service's inotify descriptor, sets each folder's
watch on that same inotify instance right before reading the folder, and sends the files
found and the watches back through a pipe (JSON). Anything going wrong there (no ``fork``, a
crash, a bad answer) leaves the thread to walk itself, as it does when the process has threads.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import threading
import weakref
from typing import Any

from tools.mesh_index.cache import FILE_NAME

log = logging.getLogger("mesh.index")

WARM_UP_SWITCH_INTERVAL_S = 0.0002


def start_warm_up(settings: Any) -> Any | None:
    """The IndexService of ``settings`` with its refresh started in a daemon thread (or None)."""
    if settings.workspace is None or not settings.limits.index_warm_at_start:
        return None
    if not (settings.resolved_state_dir / FILE_NAME).is_file():
        return None
    from tools.mesh_index.service import service_for_settings

    service = service_for_settings(settings, watch=settings.limits.index_watch)
    child = walk_in_child(service) if threading.active_count() == 1 else None
    seed = _SEEDS[service] = SkillSeed()
    if child is not None:  # whichever refresh comes first (this thread's or a call's) takes the child's walk

        def receive() -> Any | None:
            found = receive_walk(service, *child)
            if found is not None:  # copied now: later refreshes update the folders' mtimes in place
                seed.walk = (list(found.skill_files), dict(found.dirs), found.started_ns)
            return found

        service.walk_coming(receive)

    def run() -> None:
        # The walk makes tens of thousands of system calls, each releasing the GIL; while the main
        # thread imports (CPU-bound), getting it back takes up to the switch interval (5 ms) each
        # time. A shorter interval while the warm-up runs lets it finish during the start-up.
        interval = sys.getswitchinterval()
        sys.setswitchinterval(min(interval, WARM_UP_SWITCH_INTERVAL_S))
        try:
            service.refresh()
            service.info()  # loads the snapshot now if the refresh answered from the manifest (no watches)
        except Exception as exc:  # the first call refreshes again and reports the error itself
            log.warning("background refresh of the static index at start-up failed: %s", exc)
        finally:
            sys.setswitchinterval(interval)
        seed.made(service.workspace, service.conventions.skip_dirs)

    threading.Thread(target=run, name="mesh-index-warm-up", daemon=True).start()
    return service


def walk_in_child(service: Any) -> tuple[int, int] | None:
    """Fork a child that walks ``service``'s workspace (watching each folder first); (pid, pipe) or None.

    Call it only while the process has one thread: a forked child gets copies of the locks other
    threads hold, and would wait on them forever."""
    watch = service.folder_watch()
    if watch is None or not hasattr(os, "fork"):
        return None
    from tools.mesh_index.workspace import discover

    read_fd, write_fd = os.pipe()
    try:
        pid = os.fork()
    except OSError as exc:
        log.debug("cannot fork the start-up walk: %s", exc)
        os.close(read_fd)
        os.close(write_fd)
        return None
    if pid == 0:  # the child: walk, answer, and leave without running anything of the parent's
        status = 1
        try:
            os.close(read_fd)
            found = discover(service.workspace, service.conventions.skip_dirs, before_scan=watch.add)
            watched, broken = watch.snapshot()
            payload = {"files": [[f.rel, f.kind, f.size, f.mtime_ns] for f in found.files],
                       "packages": found.packages, "tsconfigs": found.tsconfigs, "git_roots": found.git_roots,
                       "dirs": found.dirs, "skipped": found.skipped, "skill_files": found.skill_files,
                       "started_ns": found.started_ns, "watched": watched, "broken": broken}
            data = json.dumps(payload).encode()
            view = memoryview(data)
            while view:
                view = view[os.write(write_fd, view):]
            status = 0
        finally:
            os._exit(status)
    os.close(write_fd)
    return pid, read_fd


def receive_walk(service: Any, pid: int, read_fd: int) -> Any | None:
    """The child's walk (a :class:`~tools.mesh_index.workspace.Discovery`), its watches adopted; None on failure."""
    from tools.mesh_index.workspace import Discovery, SourceFile

    chunks = []
    status: int | None = None
    try:
        with os.fdopen(read_fd, "rb") as pipe:
            while chunk := pipe.read(1 << 20):
                chunks.append(chunk)
    except OSError as exc:
        log.info("reading the start-up walk failed (%s): walking in this process", exc)
        chunks = []
    finally:
        with contextlib.suppress(ChildProcessError):
            _pid, status = os.waitpid(pid, 0)
    if status is not None and os.waitstatus_to_exitcode(status) != 0:  # (None: reaped elsewhere; the JSON tells)
        log.info("the start-up walk's child process failed: walking in this process")
        return None
    try:
        data = json.loads(b"".join(chunks))
        found = Discovery([SourceFile(rel, kind, int(size), int(mtime)) for rel, kind, size, mtime in data["files"]],
                          list(data["packages"]), list(data["tsconfigs"]), list(data["git_roots"]),
                          {str(k): int(v) for k, v in data["dirs"].items()}, list(data["skipped"]),
                          [str(rel) for rel in data["skill_files"]], int(data["started_ns"]))
        watched = {str(k): int(v) for k, v in data["watched"].items()}
    except (ValueError, KeyError, TypeError) as exc:
        log.info("bad answer from the start-up walk's child process (%s): walking in this process", exc)
        return None
    watch = service.folder_watch()
    if watch is None:
        return None
    watch.adopt(watched, bool(data["broken"]))
    return found


def adopt(runtime: Any, service: Any | None) -> None:
    """Hand the warmed-up service to the server's runtime (nothing when there was none), and the skills its
    start-up walk met to the runtime's workspace-skills catalog."""
    if service is not None:
        from tools.mesh_index.service import adopt_index_service

        adopt_index_service(runtime, service)
        seed = _SEEDS.get(service)
        if seed is not None:
            from resources.skill_catalog import get_skill_catalog

            seed.catalog(get_skill_catalog(runtime))


class SkillSeed:
    """The workspace skills of the start-up walk, for the runtime's catalog (whichever of the two comes last
    seeds it: the walk's results come from the warm-up thread, the catalog from the server's build).

    The catalog's first answer (every ``analyze_impact`` links the related skills) would otherwise walk
    the workspace once more (0.1-0.4 s at 20,000 files); it checks what it is seeded with as it checks
    its own walk (every folder's mtime, every SKILL.md's stat, mtimes too recent to prove anything)."""

    def __init__(self) -> None:
        self.walk: tuple[list[str], dict[str, int], int] | None = None  # set by the walk's receiver
        self._lock = threading.Lock()
        self._found: Any | None = None
        self._catalog: Any | None = None

    def made(self, workspace: Any, skip_dirs: list[str]) -> None:
        """The warm-up refresh ended: make the skills' discovery from the walk (if it came from the child)."""
        found = None
        if self.walk is not None:
            from resources.workspace_skills import discovery_from_walk

            try:
                found = discovery_from_walk(workspace, skip_dirs, *self.walk)
            except Exception as exc:  # the catalog walks itself, as without a seed
                log.info("skills from the start-up walk: %s", exc)
        with self._lock:
            self._found = found
            catalog = self._catalog
        if catalog is not None and found is not None:
            catalog.seed(found)

    def catalog(self, catalog: Any | None) -> None:
        with self._lock:
            self._catalog = catalog
            found = self._found
        if catalog is not None and found is not None:
            catalog.seed(found)


_SEEDS: weakref.WeakKeyDictionary[Any, SkillSeed] = weakref.WeakKeyDictionary()
