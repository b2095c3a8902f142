"""A watched service's incremental refresh gives the index a cold build gives, after every kind of change.

Real files in a temporary copy of the fixture workspace, real inotify watches (the server's
shared service: ``watch=True``). After each change the long-running service refreshes from the
events alone (no walk of the workspace: the walks are counted), and its whole state is compared
with a new service that builds the same workspace from nothing: every file and its content
hash, every file's facts, the linked index (its snapshot), the package.json / tsconfig.json /
git-root layout, the skipped files and the folders known. Where the events cannot say what
changed (the kernel's queue overflowed), the service walks, and the result is the same.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
from pathlib import Path

import pytest

import tools.mesh_index.freshness as freshness_module
import tools.mesh_index.indexer as indexer_module
import tools.mesh_index.service as service_module
from tools.mesh_index import snapshot
from tools.mesh_index.watch import FolderWatch
from tools.mesh_index.workspace import MAX_FILE_BYTES

pytestmark = pytest.mark.skipif(FolderWatch.create() is None, reason="inotify is not available here")

EVENT_SERVICE = "ms-event/src/modules/event/event.service.ts"
EVENT_MODULE_DIR = "ms-event/src/modules/event"


@pytest.fixture
def walks(monkeypatch) -> dict[str, list[str]]:
    """The walks made: ``full`` (the whole workspace, by the service) and ``folders`` (one folder again)."""
    seen: dict[str, list[str]] = {"full": [], "folders": []}

    def counting(module, key):
        real = module.discover

        def discover(workspace, skip_dirs, start="", before_scan=None):
            seen[key].append(start)
            return real(workspace, skip_dirs, start, before_scan)

        monkeypatch.setattr(module, "discover", discover)

    counting(service_module, "full")
    counting(freshness_module, "folders")
    return seen


def state(svc) -> dict:
    """Everything a refresh leaves that an answer depends on (JSON-comparable)."""
    svc.refresh()
    facts = {rel: svc.facts_of(rel) for rel in sorted(svc._files)}
    found = svc._found
    index = snapshot.dump(svc.linked(), svc._errors)
    return {
        "files": {rel: sha for rel, (_size, _mtime, sha) in sorted(svc._files.items())},
        "facts": json.loads(json.dumps(facts, sort_keys=True)),
        "index": json.loads(json.dumps(index, sort_keys=True)),
        "packages": found.packages, "tsconfigs": found.tsconfigs, "git_roots": found.git_roots,
        "skipped": found.skipped, "dirs": sorted(svc._dirs),
        "info": svc.info().model_dump(include={"files", "parse_errors", "parse_error_files", "skipped_files"}),
        "producers": sorted((p.file, p.line) for p in svc.analyze_impact("GEOCODE_EVENT").producers),
    }


class Workspace:
    """A watched service on ``root`` and a cold build to compare it with after each change."""

    def __init__(self, root: Path, make_service, walks) -> None:
        self.root = root
        self.make_service = make_service
        self.walks = walks
        self.svc = make_service(root, watch=True)
        self.svc.refresh()
        self.colds = 0
        assert walks["full"] == [""]

    def check(self, *, walked: int | None = 0) -> dict:
        """The watched service's state after its refresh equals a cold build's; ``walked``: whole walks expected."""
        before = len(self.walks["full"])
        inc = state(self.svc)
        if walked is not None:
            assert len(self.walks["full"]) - before == walked, "the events named the change: no walk of the workspace"
        self.colds += 1
        cold_svc = self.make_service(self.root, cache_dir=self.root.parent / f"cold-{self.colds}")
        cold = state(cold_svc)
        cold_svc.close()
        for key in cold:
            assert inc[key] == cold[key], key
        return inc


@pytest.fixture
def ws(workspace: Path, make_service, walks) -> Workspace:
    return Workspace(workspace, make_service, walks)


def test_a_file_edited_in_place(ws: Workspace):
    path = ws.root / EVENT_SERVICE
    original = path.read_text()
    path.write_text(original.replace("export class EventService {", "export class EventService {\n\n", 1))
    assert (EVENT_SERVICE, 16) in ws.check()["producers"]
    assert ws.svc.info().reparsed == 1
    path.write_text(original)
    assert (EVENT_SERVICE, 14) in ws.check()["producers"]
    assert ws.walks["folders"] == []


def test_two_writes_with_the_same_size_and_mtime_are_both_seen(ws: Workspace):
    path = ws.root / EVENT_SERVICE
    original = path.read_text()
    st = path.stat()
    swapped = original.replace("type: EventsJobType.GEOCODE_EVENT", "type: EventsJobType.GEOCODE_EVENX", 1)
    assert len(swapped) == len(original)
    path.write_text(swapped)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # same size, same mtime: a walk would trust the stat
    assert ws.check()["files"][EVENT_SERVICE] == hashlib.sha1(swapped.encode()).hexdigest()


def test_a_file_added_deleted_and_renamed(ws: Workspace):
    original = (ws.root / EVENT_SERVICE).read_text()
    added = ws.root / EVENT_MODULE_DIR / "extra.service.ts"
    added.write_text(original.replace("class EventService", "class ExtraService"))
    assert (f"{EVENT_MODULE_DIR}/extra.service.ts", 14) in ws.check()["producers"]
    added.rename(added.with_name("renamed.service.ts"))
    found = ws.check()["producers"]
    assert (f"{EVENT_MODULE_DIR}/renamed.service.ts", 14) in found
    assert all(not f.endswith("extra.service.ts") for f, _ in found)
    added.with_name("renamed.service.ts").unlink()
    (ws.root / EVENT_SERVICE).unlink()
    assert ws.check()["producers"] == []
    assert ws.walks["folders"] == []


def test_a_file_replaced_by_rename_over_it(ws: Workspace):
    """What editors do when they save: write a temporary file, rename it over the original."""
    path = ws.root / EVENT_SERVICE
    tmp = path.with_name(".event.service.ts.swp")
    tmp.write_text(path.read_text().replace("export class EventService {", "export class EventService {\n", 1))
    tmp.replace(path)
    assert (EVENT_SERVICE, 15) in ws.check()["producers"]


def test_a_folder_renamed_made_and_removed(ws: Workspace):
    original = (ws.root / EVENT_SERVICE).read_text()
    module = ws.root / EVENT_MODULE_DIR
    module.rename(module.with_name("events"))  # the folder of the producer, with its sub-folders
    moved = ws.check()["producers"]
    assert moved and all(f.startswith("ms-event/src/modules/events/") for f, _ in moved)
    # a file written in the renamed folder: its watch was set anew under the new name
    (module.with_name("events") / "late.service.ts").write_text(original.replace("class EventService", "class Late"))
    assert ("ms-event/src/modules/events/late.service.ts", 14) in ws.check()["producers"]

    nested = ws.root / "ms-event" / "src" / "modules" / "extra" / "deep"
    nested.mkdir(parents=True)
    (nested / "deep.service.ts").write_text(original.replace("class EventService", "class Deep"))
    assert ("ms-event/src/modules/extra/deep/deep.service.ts", 14) in ws.check()["producers"]
    (nested / "more.service.ts").write_text(original.replace("class EventService", "class More"))
    assert ("ms-event/src/modules/extra/deep/more.service.ts", 14) in ws.check()["producers"]

    shutil.rmtree(ws.root / "ms-event" / "src" / "modules" / "extra")
    after = ws.check()["producers"]
    assert all("/extra/" not in f for f, _ in after)
    (ws.root / "ms-event" / "src" / "modules" / "extra").mkdir()  # made again under the same name
    ws.check()
    (ws.root / "ms-event" / "src" / "modules" / "extra" / "back.service.ts").write_text(original)
    assert ("ms-event/src/modules/extra/back.service.ts", 14) in ws.check()["producers"]
    assert ws.walks["folders"], "each folder event walked that folder again, alone"
    assert "" not in ws.walks["folders"]


def test_a_folder_moved_out_of_the_workspace_and_back(ws: Workspace, tmp_path: Path):
    module = ws.root / EVENT_MODULE_DIR
    original = (module / "event.service.ts").read_text()
    outside = tmp_path / "outside"
    shutil.move(module, outside)
    assert ws.check()["producers"] == []
    (outside / "event.service.ts").write_text("export const nothing = 1;\n")  # no longer in the workspace
    ws.check()
    module.mkdir()  # another folder under the old name (the moved one is still watched by inode: dropped)
    (module / "other.service.ts").write_text(original.replace("class EventService", "class Other"))
    assert (f"{EVENT_MODULE_DIR}/other.service.ts", 14) in ws.check()["producers"]
    (module / "second.service.ts").write_text(original.replace("class EventService", "class Second"))
    assert (f"{EVENT_MODULE_DIR}/second.service.ts", 14) in ws.check()["producers"]  # the new folder is watched
    shutil.rmtree(module)
    shutil.move(outside, module)
    assert ws.check()["producers"] == []  # it came back with the edit made outside
    (module / "event.service.ts").write_text(original)
    assert (EVENT_SERVICE, 14) in ws.check()["producers"]


def test_folders_swapped_by_renames(ws: Workspace):
    a, b = ws.root / "ms-event", ws.root / "ms-user"
    a.rename(ws.root / "swap")
    b.rename(a)
    (ws.root / "swap").rename(b)
    ws.check()
    (a / "src" / "late.ts").write_text("export const LATE = 'late';\n")  # watched under its new name
    (b / "src" / "late.ts").write_text("export const LATE = 'late';\n")
    ws.check()


def test_package_tsconfig_and_git_layout(ws: Workspace):
    pkg = ws.root / "ms-event" / "package.json"
    data = json.loads(pkg.read_text())
    data["name"] = "ms-event-renamed"
    pkg.write_text(json.dumps(data))
    ws.check()
    (ws.root / "ms-event" / "tsconfig.json").write_text(
        json.dumps({"compilerOptions": {"baseUrl": ".", "paths": {"@app/*": ["src/*"]}}}))
    ws.check()
    (ws.root / "ms-event" / ".git").mkdir()  # a repository root appears
    ws.check()
    (ws.root / "ms-user" / ".git").write_text("gitdir: ../.git/worktrees/ms-user\n")  # a worktree marker
    ws.check()
    shutil.rmtree(ws.root / "ms-event" / ".git")
    pkg.unlink()
    (ws.root / "ms-event" / "tsconfig.json").unlink()
    ws.check()


def test_files_the_walk_skips(ws: Workspace):
    module = ws.root / EVENT_MODULE_DIR
    (module / "node_modules" / "dep").mkdir(parents=True)  # a skipped folder: never indexed, never watched
    (module / "node_modules" / "dep" / "index.ts").write_text("export const DEP = 1;\n")
    (module / "link.ts").symlink_to(module / "event.service.ts")  # symlinked files are not indexed
    (module / "notes.md").write_text("not indexed\n")
    ws.check()
    big = module / "big.ts"
    big.write_text("export const X = 1;\n")
    ws.check()
    big.write_text("// " + "x" * MAX_FILE_BYTES + "\n")  # grows over the limit: skipped, listed
    assert ws.check()["skipped"] == [f"{EVENT_MODULE_DIR}/big.ts"]
    big.write_text("export const X = 2;\n")
    assert ws.check()["skipped"] == []


def test_an_edit_while_the_refresh_parses(ws: Workspace, monkeypatch):
    """A file written while the refresh parses is queued by its watch: the next refresh reads it."""
    path = ws.root / EVENT_SERVICE
    original = path.read_text()
    real = indexer_module.parse_one
    edits = iter([original.replace("export class EventService {", "export class EventService {\n\n\n", 1)])

    def parse_then_edit(root, rel, kind, cfg):
        result = real(root, rel, kind, cfg)
        edit = next(edits, None)
        if edit is not None:
            path.write_text(edit)  # after this file was read: the refresh indexed the older content
        return result

    monkeypatch.setattr(indexer_module, "parse_one", parse_then_edit)
    path.write_text(original.replace("export class EventService {", "export class EventService {\n", 1))
    ws.svc.refresh()
    assert (EVENT_SERVICE, 15) in {(p.file, p.line) for p in ws.svc.analyze_impact("GEOCODE_EVENT").producers}
    monkeypatch.setattr(indexer_module, "parse_one", real)
    assert (EVENT_SERVICE, 17) in ws.check()["producers"]


def test_edits_racing_the_refreshes_settle_on_the_cold_index(ws: Workspace):
    """Another process keeps writing, creating and removing files while the service refreshes."""
    module = ws.root / EVENT_MODULE_DIR
    original = (module / "event.service.ts").read_text()
    stop = threading.Event()

    def writer() -> None:
        n = 0
        while not stop.is_set():
            n += 1
            target = module / f"churn{n % 5}.service.ts"
            if n % 7 == 0:
                target.unlink(missing_ok=True)
            else:
                target.write_text(original.replace("class EventService", f"class Churn{n}") + "\n" * (n % 3))
            sub = module / f"dir{n % 3}"
            if n % 11 == 0:
                shutil.rmtree(sub, ignore_errors=True)
            else:
                sub.mkdir(exist_ok=True)
                (sub / "inner.ts").write_text(f"export const N = {n};\n")

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        for _ in range(25):
            ws.svc.refresh()
    finally:
        stop.set()
        thread.join()
    ws.check(walked=None)  # a burst of events may overflow the kernel's queue: then it walked


def test_an_overflowed_event_queue_walks_the_workspace(ws: Workspace):
    """More events than the kernel queues (16,384 by default): the service cannot know what changed."""
    limit = int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())
    path = ws.root / EVENT_SERVICE
    other = ws.root / "ms-user" / "package.json"
    path.write_text(path.read_text().replace("export class EventService {", "export class EventService {\n", 1))
    for n in range(limit // 2 + 10):  # alternating files: the kernel merges only identical consecutive events
        os.utime(path, ns=(n, n))
        os.utime(other, ns=(n, n))
    assert (EVENT_SERVICE, 15) in ws.check(walked=1)["producers"]
    path.write_text(path.read_text().replace("export class EventService {", "export class EventService {\n", 1))
    assert (EVENT_SERVICE, 16) in ws.check(walked=0)["producers"]  # the walk set the watches again


def test_an_overflow_that_hid_a_folder_replaced_and_renamed(ws: Workspace, tmp_path: Path):
    """The events of the replacement are lost: the walk that follows must watch the folders now at those paths."""
    limit = int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())
    module = ws.root / EVENT_MODULE_DIR
    original = (module / "event.service.ts").read_text()
    shutil.move(module, tmp_path / "away")  # the old folder keeps its watch, under the old name
    module.mkdir()  # another folder at that path
    (ws.root / "ms-user").rename(ws.root / "ms-user-renamed")
    a, b = ws.root / "ms-event" / "package.json", ws.root / "ws-service" / "package.json"
    for n in range(limit // 2 + 10):
        os.utime(a, ns=(n, n))
        os.utime(b, ns=(n, n))
    ws.check(walked=1)
    (module / "new.service.ts").write_text(original.replace("class EventService", "class New"))
    (tmp_path / "away" / "event.service.ts").write_text("export {};\n")  # outside now: no effect
    (ws.root / "ms-user-renamed" / "late.ts").write_text("export const LATE = 1;\n")
    assert (f"{EVENT_MODULE_DIR}/new.service.ts", 14) in ws.check(walked=0)["producers"]


def test_the_workspace_folder_moved_away(ws: Workspace, tmp_path: Path):
    from server.errors import MeshError

    ws.root.rename(tmp_path / "elsewhere")
    with pytest.raises(MeshError, match="not a directory"):
        ws.svc.refresh()
    (tmp_path / "elsewhere").rename(ws.root)
    ws.check(walked=1)


def test_without_inotify_every_refresh_walks(workspace: Path, make_service, walks, monkeypatch):
    """Where inotify_init1 is missing (not Linux) or fails, the watched service walks each time, as before."""
    monkeypatch.setattr(FolderWatch, "create", classmethod(lambda cls, root="": None))
    svc = make_service(workspace, watch=True)
    svc.refresh()
    path = workspace / EVENT_SERVICE
    path.write_text(path.read_text().replace("export class EventService {", "export class EventService {\n", 1))
    inc = state(svc)
    assert svc._watch is None and svc._watch_wanted is False
    assert walks["full"] == ["", ""]  # the first refresh and state()'s: each walked
    svc.refresh()
    assert walks["full"] == ["", "", ""]
    cold_svc = make_service(workspace, cache_dir=workspace.parent / "cold")
    assert state(cold_svc) == inc
    assert (EVENT_SERVICE, 15) in inc["producers"]
