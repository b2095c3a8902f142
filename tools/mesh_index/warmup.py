"""``mesh-mcp serve`` loads the static index in the background from its first moment.

A new server process on a built index pays, on its first ``analyze_impact``, the freshness
walk of the workspace and the snapshot load (0.3 s at 20,000 files, most of it the walk's
20,000 ``stat`` calls), and the walk that finds the workspace's skills (which every
``analyze_impact`` links: 0.45 s at 20,000 files). ``serve`` builds the index service before it
imports the MCP SDK and starts that refresh, then the skills' walk, in a daemon thread
(:func:`start_warm_up`); once the server is built the service and the skill catalog become the
runtime's shared ones (:func:`adopt`). The first call finds the refresh done
or underway: it waits for it on the service's lock and never answers from a half-loaded or
unchecked index. Skipped when no workspace is configured, when ``limits.index_warm_at_start``
is false, and when the workspace has never been indexed (the first call then builds the index
itself, with progress).

The walk runs in a forked child process when the process has a single thread (as ``serve``
has at that moment), so that it does not share the interpreter's lock with the SDK import
running meanwhile: the child inherits the service's inotify descriptor, sets each folder's
watch on that same inotify instance right before reading the folder, and sends the files
found and the watches back through a pipe (pickle: from this process's own child, never from a
file). Then, at a lower priority (niceness 10: on a quiet machine it has a core of its own, on a
busy one the server's start-up goes first), it finds the workspace skills and sends them too;
the thread seeds the runtime's skill catalog with them (a first call that comes earlier walks
for them itself).
Anything going wrong there (no ``fork``, a crash, a bad answer) leaves the thread to walk
itself, as it does when the process has threads.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import sys
import threading
import weakref
from typing import Any

from tools.mesh_index.cache import FILE_NAME

log = logging.getLogger("mesh.index")

WARM_UP_SWITCH_INTERVAL_S = 0.0002
CHILD_NICENESS = 10

_warm_skills: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()  # service -> SkillCatalog
_child_rest: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()  # service -> (pid, pipe) of the child


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
        catalog = None
        try:
            from resources.skill_catalog import SkillCatalog

            catalog = SkillCatalog(settings.workspace, settings.conventions.static.skip_dirs)
            _warm_skills[service] = catalog  # adopt() hands it to the runtime
            service.refresh()
        except Exception as exc:  # the first call refreshes again and reports the error itself
            log.warning("background refresh of the static index at start-up failed: %s", exc)
        finally:
            sys.setswitchinterval(interval)
        try:  # the skills the first analyze_impact / verify_flow links (a walk of their own): found here too
            rest = _child_rest.pop(service, None)
            if rest is not None:  # the child walks for them next, at a low priority
                found_skills = _finish_child(*rest)
                if catalog is not None and found_skills is not None:  # the first call checks them (a stat per folder)
                    catalog.seed(found_skills)
            elif catalog is not None:  # at the normal switch interval: this walk must not slow the start-up down
                catalog.current()
        except Exception as exc:  # the first call walks for them itself
            log.warning("background discovery of the workspace skills at start-up failed: %s", exc)

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
            _send(write_fd, (found, *watch.snapshot()))
            with contextlib.suppress(OSError):  # the start-up itself comes first where the cores are busy
                os.nice(CHILD_NICENESS)
            skills = None
            with contextlib.suppress(Exception):  # the parent's catalog walks for them itself
                from resources.workspace_skills import discover_workspace_skills

                skills = discover_workspace_skills(service.workspace, service.conventions.skip_dirs)
            _send(write_fd, skills)
            status = 0
        finally:
            os._exit(status)
    os.close(write_fd)
    return pid, read_fd


def _send(fd: int, value: Any) -> None:
    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    view = memoryview(len(data).to_bytes(8, "little") + data)
    while view:
        view = view[os.write(fd, view):]


def _receive(pipe: Any) -> Any:
    """The next value the child sent (pickle: the bytes come from this process's own forked child,
    through a pipe, never from a file); raises EOFError when it sent nothing more."""
    head = pipe.read(8)
    if len(head) != 8:
        raise EOFError("the child sent nothing")
    size = int.from_bytes(head, "little")
    data = pipe.read(size)
    if len(data) != size:
        raise EOFError("the child's answer was cut")
    return pickle.loads(data)


def _finish_child(pid: int, pipe: Any) -> Any | None:
    """The child's second answer (the workspace skills, or None), then the child reaped."""
    try:
        return _receive(pipe)
    except (OSError, EOFError, pickle.UnpicklingError, ValueError, TypeError, AttributeError) as exc:
        log.info("no workspace skills from the start-up walk's child process (%s)", exc)
        return None
    finally:
        pipe.close()
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)


def receive_walk(service: Any, pid: int, read_fd: int) -> Any | None:
    """The child's walk (a :class:`~tools.mesh_index.workspace.Discovery`), its watches adopted; None on failure."""
    from tools.mesh_index.workspace import Discovery

    pipe = os.fdopen(read_fd, "rb")
    try:
        found, watched, broken = _receive(pipe)
        if not isinstance(found, Discovery) or not isinstance(watched, dict):
            raise TypeError(f"unexpected {type(found).__name__}")
    except (OSError, EOFError, pickle.UnpicklingError, ValueError, TypeError, AttributeError) as exc:
        log.info("bad answer from the start-up walk's child process (%s): walking in this process", exc)
        _finish_child(pid, pipe)
        return None
    watch = service.folder_watch()
    if watch is None:
        _finish_child(pid, pipe)
        return None
    watch.adopt(watched, bool(broken))
    _child_rest[service] = (pid, pipe)  # the skills come next (read by the warm-up thread)
    return found


def adopt(runtime: Any, service: Any | None) -> None:
    """Hand the warmed-up service (and the skill catalog the warm-up fills) to the server's runtime."""
    if service is not None:
        from tools.mesh_index.service import adopt_index_service

        adopt_index_service(runtime, service)
        catalog = _warm_skills.pop(service, None)
        if catalog is not None:  # the catalog's lock makes a first call wait for the walk underway
            runtime.service("workspace_skills", lambda: catalog)
