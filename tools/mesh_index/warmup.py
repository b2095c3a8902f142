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
    if child is not None:  # whichever refresh comes first (this thread's or a call's) takes the child's walk
        service.walk_coming(lambda: receive_walk(service, *child))

    def run() -> None:
        # The walk makes tens of thousands of system calls, each releasing the GIL; while the main
        # thread imports (CPU-bound), getting it back takes up to the switch interval (5 ms) each
        # time. A shorter interval while the warm-up runs lets it finish during the start-up.
        interval = sys.getswitchinterval()
        sys.setswitchinterval(min(interval, WARM_UP_SWITCH_INTERVAL_S))
        try:
            service.refresh()
        except Exception as exc:  # the first call refreshes again and reports the error itself
            log.warning("background refresh of the static index at start-up failed: %s", exc)
        finally:
            sys.setswitchinterval(interval)

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
                       "dirs": found.dirs, "skipped": found.skipped, "watched": watched, "broken": broken}
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
                          {str(k): int(v) for k, v in data["dirs"].items()}, list(data["skipped"]))
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
    """Hand the warmed-up service to the server's runtime (nothing when there was none)."""
    if service is not None:
        from tools.mesh_index.service import adopt_index_service

        adopt_index_service(runtime, service)
