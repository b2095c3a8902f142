"""Folder watches replace the freshness walk of a long-running server, and never hide a change.

- A service with ``watch=True`` walks the workspace once (setting a watch on each folder right
  before reading it) and never again while the events say what changed (the walk is counted
  through ``discover``); every kind of change is still seen by the very next call: a file
  edited in place, a file added, a folder made with files in it, a folder removed and made
  again, a file renamed.
- The answers after each change are those of a service that walks (``watch=False``); the
  whole state is compared with a cold build in ``test_incremental_equals_cold.py``.
- The server's shared service watches; one-shot commands do not.
- ``serve`` starts the refresh at start-up (``warmup.py``: the walk in a forked child) and hands
  that service to the runtime.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import tools.mesh_index.service as service_module
from server.runtime import Runtime
from tools.mesh_index.service import get_index_service, service_for_settings
from tools.mesh_index.warmup import adopt, start_warm_up
from tools.mesh_index.watch import FolderWatch

EVENT_SERVICE = "ms-event/src/modules/event/event.service.ts"

pytestmark = pytest.mark.skipif(FolderWatch.create() is None, reason="inotify is not available here")


@pytest.fixture
def walks(monkeypatch) -> list[str]:
    """The folders ``discover`` was asked to walk, in order."""
    seen: list[str] = []
    real = service_module.discover

    def counting(workspace: Path, skip_dirs, start: str = "", before_scan=None):
        seen.append(start)
        return real(workspace, skip_dirs, start, before_scan)

    monkeypatch.setattr(service_module, "discover", counting)
    return seen


def producers_of(svc, target: str) -> set[tuple[str, int]]:
    """What the analyze_impact tool answers: a refresh, then the query."""
    svc.refresh()
    return {(p.file, p.line) for p in svc.analyze_impact(target).producers}


def test_folder_watch_reports_writes_and_nothing_else(tmp_path: Path):
    (tmp_path / "a").mkdir()
    watch = FolderWatch.create()
    assert watch is not None
    try:
        assert watch.add([str(tmp_path), str(tmp_path / "a")]) == 2
        assert watch.add([str(tmp_path / "a")]) == 0  # already watched
        assert watch.changed() is False
        (tmp_path / "a" / "x.ts").write_text("export const A = 1;\n")
        assert watch.changed() is True
        assert watch.changed() is False  # drained
        shutil.rmtree(tmp_path / "a")
        assert watch.changed() is True
        (tmp_path / "a").mkdir()  # made again: a new folder to watch
        assert watch.changed() is True
        assert watch.add([str(tmp_path / "a")]) == 1
        (tmp_path / "a" / "y.ts").write_text("export const B = 2;\n")
        assert watch.changed() is True
    finally:
        watch.close()
    assert watch.changed() is True  # closed: the caller walks


def test_unchanged_workspace_is_not_walked_again(workspace: Path, make_service, walks):
    svc = make_service(workspace, watch=True)
    first = svc.refresh()  # cold: each folder is watched right before the walk reads it
    again = svc.refresh()
    assert walks == [""], "nothing changed: the watches prove it without a walk"
    assert again.reparsed == 0 and again.files == first.files
    r = svc.analyze_impact("GEOCODE_EVENT")
    assert r.index.stale_files == []
    assert walks == [""]
    svc.close()

    # a new process on the built index (its snapshot) walks once too
    walks.clear()
    new = make_service(workspace, watch=True)
    new.refresh()
    new.refresh()
    assert walks == [""]


def test_every_change_is_seen_by_the_next_call(workspace: Path, make_service, walks):
    svc = make_service(workspace, watch=True)
    svc.refresh()
    assert producers_of(svc, "GEOCODE_EVENT") == {(EVENT_SERVICE, 14)}

    # edited in place: the createJob moves down two lines
    path = workspace / EVENT_SERVICE
    original = path.read_text()
    path.write_text(original.replace("export class EventService {", "export class EventService {\n\n", 1))
    assert producers_of(svc, "GEOCODE_EVENT") == {(EVENT_SERVICE, 16)}
    assert svc.info().reparsed == 1

    # a new folder with a producer in it
    new_dir = workspace / "ms-event" / "src" / "modules" / "extra"
    new_dir.mkdir()
    (new_dir / "extra.service.ts").write_text(original.replace("class EventService", "class ExtraService"))
    assert ("ms-event/src/modules/extra/extra.service.ts", 14) in producers_of(svc, "GEOCODE_EVENT")
    svc.refresh()
    svc.refresh()
    assert walks == [""], "the events named each change: the workspace was walked once"

    # a second file in the new folder (watched now)
    (new_dir / "more.service.ts").write_text(original.replace("class EventService", "class MoreService"))
    assert ("ms-event/src/modules/extra/more.service.ts", 14) in producers_of(svc, "GEOCODE_EVENT")

    # renamed
    (new_dir / "more.service.ts").rename(new_dir / "renamed.service.ts")
    found = producers_of(svc, "GEOCODE_EVENT")
    assert ("ms-event/src/modules/extra/renamed.service.ts", 14) in found
    assert all(not f.endswith("more.service.ts") for f, _ in found)

    # the folder removed, then made again with one file
    shutil.rmtree(new_dir)
    assert producers_of(svc, "GEOCODE_EVENT") == {(EVENT_SERVICE, 16)}
    new_dir.mkdir()
    svc.refresh()
    (new_dir / "back.service.ts").write_text(original.replace("class EventService", "class BackService"))
    assert ("ms-event/src/modules/extra/back.service.ts", 14) in producers_of(svc, "GEOCODE_EVENT")

    # and the answers are those of a service that walks every time
    plain = make_service(workspace, cache_dir=workspace.parent / "plain-state")
    plain.refresh()
    assert producers_of(plain, "GEOCODE_EVENT") == producers_of(svc, "GEOCODE_EVENT")
    assert plain.info().files == svc.info().files


def test_the_server_service_watches_and_one_shot_commands_do_not(make_settings, workspace: Path):
    settings = make_settings(workspace=str(workspace))
    runtime = Runtime(settings)
    shared = get_index_service(runtime)
    one_shot = service_for_settings(settings)
    try:
        assert shared._watch_wanted is True and one_shot._watch_wanted is False
        off = Runtime(make_settings(workspace=str(workspace), limits={"index_watch": False}))
        assert get_index_service(off)._watch_wanted is False
    finally:
        shared.close()
        one_shot.close()


def test_warm_up_refreshes_at_start_and_becomes_the_runtime_service(make_settings, workspace: Path):
    settings = make_settings(workspace=str(workspace))
    assert start_warm_up(settings) is None  # never indexed: the first call builds it, with progress
    built = service_for_settings(settings)
    built.refresh()
    built.close()
    warm = start_warm_up(settings)
    assert warm is not None
    runtime = Runtime(settings)
    adopt(runtime, warm)
    try:
        assert get_index_service(runtime) is warm
        r = warm.analyze_impact("GEOCODE_EVENT")
        assert r.index.files == 66 and r.index.reparsed == 0
    finally:
        warm.close()
    assert start_warm_up(make_settings(workspace=str(workspace), limits={"index_warm_at_start": False})) is None


CHILD_WALK_SCRIPT = r"""
import json, sys, threading
from pathlib import Path
import tools.mesh_index.service as service_module
import tools.mesh_index.warmup as warmup
from server.config import load_settings

workspace, state = sys.argv[1], sys.argv[2]
walks = []
real = service_module.discover
def counting(*args, **kwargs):
    walks.append(args[2] if len(args) > 2 else kwargs.get("start", ""))
    return real(*args, **kwargs)
service_module.discover = counting
children = []
real_walk = warmup.walk_in_child
def recording(service):
    child = real_walk(service)
    children.append(child)
    return child
warmup.walk_in_child = recording

settings = load_settings(environ={}, overrides={"workspace": workspace, "state_dir": state})
assert threading.active_count() == 1
svc = warmup.start_warm_up(settings)
first = svc.analyze_impact("GEOCODE_EVENT")  # waits for the warm-up on the service's lock
out = {"child": children[0] is not None, "walks_after_start": list(walks), "clean": svc._watch_clean,
       "watched": svc._watch.watched, "files": first.index.files, "reparsed": first.index.reparsed,
       "producers": sorted([p.file, p.line] for p in first.producers)}
path = Path(workspace) / "ms-event/src/modules/event/event.service.ts"
path.write_text(path.read_text().replace("export class EventService {", "export class EventService {\n", 1))
(Path(workspace) / "ms-event/src/late").mkdir()
(Path(workspace) / "ms-event/src/late/late.ts").write_text("export const LATE = 1;\n")
info = svc.refresh()
out.update(walks_after_edit=list(walks), reparsed_after_edit=info.reparsed, files_after_edit=info.files,
           producers_after_edit=sorted([p.file, p.line] for p in svc.analyze_impact("GEOCODE_EVENT").producers))
svc.close()
print(json.dumps(out))
"""


def test_the_start_up_walk_runs_in_a_child_process_and_its_watches_serve_the_parent(make_settings, workspace: Path,
                                                                                    tmp_path: Path):
    """``serve`` has one thread when the warm-up starts: the walk is forked off (the parent never walks), and the
    watches the child set on the inherited inotify instance report the next edits to the parent."""
    import json
    import subprocess
    import sys

    settings = make_settings(workspace=str(workspace))
    built = service_for_settings(settings)
    built.refresh()
    built.close()
    repo = Path(__file__).resolve().parents[2]
    proc = subprocess.run([sys.executable, "-c", CHILD_WALK_SCRIPT, str(workspace), str(settings.resolved_state_dir)],
                          capture_output=True, text=True, cwd=repo, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["child"] is True
    assert out["walks_after_start"] == [], "the parent did not walk: the child did"
    assert out["clean"] is True and out["watched"] > 10
    assert out["files"] == 66 and out["reparsed"] == 0
    assert out["producers"] == [[EVENT_SERVICE, 14]]
    assert out["walks_after_edit"] == [], "the child's watches named the edits: still no walk"
    assert out["reparsed_after_edit"] == 2 and out["files_after_edit"] == 67
    assert out["producers_after_edit"] == [[EVENT_SERVICE, 15]]
