"""A new process on an unchanged workspace answers from the manifest; any change sends it the ordinary way.

Real files in a copy of the fixture workspace, real stat calls, real SQLite cache. The workspace's
mtimes are set 10 s in the past before the first build (a workspace copied just now has mtimes too
recent for a manifest to vouch for: see ``RACY_NS``), except where a test checks that case. Walks
are counted (``discover`` of the service); each answer is compared with a cold build's.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import tools.mesh_index.service as service_module
from tests.helpers import REPO_ROOT
from tools.mesh_index import manifest

EVENT_SERVICE = "ms-event/src/modules/event/event.service.ts"
EVENT_MODULE_DIR = "ms-event/src/modules/event"


def age(root: Path, seconds: float = 10.0) -> None:
    """Every file's and folder's mtime ``seconds`` in the past (folders last: utime leaves a parent's mtime)."""
    past = time.time_ns() - int(seconds * 1e9)
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            os.utime(os.path.join(dirpath, name), ns=(past, past))
    for dirpath, _dirs, _files in sorted(os.walk(root), key=lambda w: -len(w[0])):
        os.utime(dirpath, ns=(past, past))


@pytest.fixture
def walks(monkeypatch) -> list[str]:
    seen: list[str] = []
    real = service_module.discover

    def discover(workspace, skip_dirs, start="", before_scan=None):
        seen.append(start)
        return real(workspace, skip_dirs, start, before_scan)

    monkeypatch.setattr(service_module, "discover", discover)
    return seen


def answer(svc) -> dict:
    """What the queries of a service give (JSON-comparable)."""
    impact = svc.analyze_impact("GEOCODE_EVENT").model_dump(mode="json", exclude={"index"})
    catalogue = svc.catalogue(with_checks=False).model_dump(mode="json", exclude={"index"})
    info = svc.info().model_dump(include={"files", "parse_errors", "parse_error_files", "skipped_files"})
    return {"impact": impact, "catalogue": catalogue, "info": info}


def cold(make_service, root: Path, n: int) -> dict:
    svc = make_service(root, cache_dir=root.parent / f"cold-{n}")
    try:
        return answer(svc)
    finally:
        svc.close()


@pytest.fixture
def built(workspace: Path, make_service) -> Path:
    age(workspace)
    first = make_service(workspace)
    first.refresh()
    first.summary()  # as `mesh-mcp index` does: stored for the snapshot's digest
    first.close()
    return workspace


def test_an_unchanged_workspace_is_answered_without_a_walk_and_loads_the_snapshot_on_the_first_query(
        built: Path, make_service, walks):
    svc = make_service(built)
    info = svc.refresh()
    assert walks == [] and info.reparsed == 0 and svc._lazy is not None and svc._index is None
    counts, orphans = svc.summary()  # stored for the snapshot's digest: still not loaded
    assert svc._index is None and orphans > 0
    got = answer(svc)
    assert svc._index is not None and walks == []
    assert got == cold(make_service, built, 1)
    assert (got["catalogue"]["counts"], got["catalogue"]["orphans"]) == (counts, orphans)


@pytest.mark.parametrize("change", ["edit", "add", "add_folder", "remove", "package", "git"])
def test_each_kind_of_change_is_seen_by_a_new_process(built: Path, make_service, walks, change: str):
    path = built / EVENT_SERVICE
    original = path.read_text()
    if change == "edit":
        path.write_text(original.replace("export class EventService {", "export class EventService {\n", 1))
    elif change == "add":
        (built / EVENT_MODULE_DIR / "extra.service.ts").write_text(original.replace("EventService", "Extra"))
    elif change == "add_folder":
        (built / EVENT_MODULE_DIR / "more").mkdir()
        (built / EVENT_MODULE_DIR / "more" / "x.service.ts").write_text(original.replace("EventService", "X"))
    elif change == "remove":
        path.unlink()
    elif change == "package":
        pkg = built / "ms-event" / "package.json"
        pkg.write_text(pkg.read_text().replace('"name"', '"description": "x", "name"', 1))
    else:
        (built / "ms-event" / ".git").mkdir()
    svc = make_service(built)
    svc.refresh()
    assert walks == [""] and svc._lazy is None  # the manifest did not hold: the ordinary path walked
    assert answer(svc) == cold(make_service, built, 2)


def test_same_size_and_mtime_after_a_build_within_the_clock_tick_is_seen(workspace: Path, make_service, walks):
    """The build ran right after the file was written: its mtime is too recent to prove a later write shows."""
    age(workspace)
    path = workspace / EVENT_SERVICE
    original = path.read_text()
    path.write_text(original)  # a fresh mtime, as a file saved just before the build
    first = make_service(workspace)
    first.refresh()
    first.close()
    st = path.stat()
    swapped = original.replace("type: EventsJobType.GEOCODE_EVENT", "type: EventsJobType.GEOCODE_EVENX", 1)
    assert len(swapped) == len(original)
    path.write_text(swapped)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # same size, same mtime: its stat proves nothing
    svc = make_service(workspace)
    info = svc.refresh()
    assert info.reparsed == 1 and svc._files[EVENT_SERVICE][2] == hashlib.sha1(swapped.encode()).hexdigest()
    assert answer(svc) == cold(make_service, workspace, 3)


def test_a_manifest_of_other_conventions_or_of_another_snapshot_is_not_used(
        built: Path, make_service, walks, tmp_path: Path):
    import shutil

    from server.config import Conventions

    cache = make_service(built)._open_cache()
    assert cache is not None
    data = cache.load_manifest()
    digest = cache.snapshot_digest()
    assert manifest.check(str(built), data, data["key"], digest) is not None
    assert manifest.check(str(built), data, data["key"], "another digest") is None
    assert manifest.check(str(built), data, "another key", digest) is None
    shutil.copytree(tmp_path / "state", tmp_path / "other-state")
    other = Conventions.model_validate({"static": {"skip_dirs": ["node_modules", "dist", "ms-user"]}})
    svc = make_service(built, conventions=other, cache_dir=tmp_path / "other-state")
    svc.refresh()
    assert walks == [""] and svc._lazy is None


# -- the command line: `mesh-mcp index` answered without the settings -----------------------------------

PROBE = """
import sys
from server.cli import main
code = main(sys.argv[1:])
print("SETTINGS " + str("server.config" in sys.modules), file=sys.stderr)
sys.exit(code)
"""


def _index(root: Path, env: dict[str, str]) -> tuple[dict, bool]:
    proc = subprocess.run([sys.executable, "-c", PROBE, "index", "--workspace", str(root), "--json"],
                          capture_output=True, text=True, cwd=REPO_ROOT, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    line = next(x for x in proc.stderr.splitlines() if x.startswith("SETTINGS "))
    data = json.loads(proc.stdout)
    for key in ("indexed_at", "duration_s"):
        data["index"].pop(key)
    return data, line == "SETTINGS True"


def test_the_warm_command_loads_no_settings_and_prints_what_the_ordinary_path_prints(workspace: Path, tmp_path: Path):
    age(workspace)
    env = {**os.environ, "MESH_STATE_DIR": str(tmp_path / "state")}
    built, loaded = _index(workspace, env)  # the cold build records what its settings' inputs gave
    assert loaded and built["index"]["reparsed"] > 0
    quick, loaded = _index(workspace, env)
    assert not loaded and quick["index"]["reparsed"] == 0
    ordinary, loaded = _index(workspace, {**env, "MESH_LIMITS__DEFAULT_ROWS": "40"})  # another fingerprint
    assert loaded and quick == ordinary

    (workspace / "mesh.toml").write_text("# a comment\n")  # another config file: its settings are loaded again
    again, loaded = _index(workspace, env)
    assert loaded and again == ordinary
    again, loaded = _index(workspace, {**env, "MESH_LIMITS__MAX_ROWS": "400"})  # another MESH_* variable
    assert loaded and again == ordinary

    path = workspace / EVENT_SERVICE
    path.write_text(path.read_text().replace("GEOCODE_EVENT", "PUBLISH_EVENT"))
    changed, loaded = _index(workspace, env)
    assert loaded and changed["index"]["reparsed"] == 1


def test_the_warm_command_finds_the_cache_in_the_default_state_folder(workspace: Path, tmp_path: Path):
    """No ``MESH_STATE_DIR``: the quick path looks where the settings put the cache by default
    (``$XDG_STATE_HOME/mesh-mcp/<name>-<hash>``), not in the workspace."""
    age(workspace)
    env = {k: v for k, v in os.environ.items() if k != "MESH_STATE_DIR"}
    env.update(XDG_STATE_HOME=str(tmp_path / "xdg-state"), HOME=str(tmp_path / "home"))
    built, loaded = _index(workspace, env)
    assert loaded and built["index"]["cache"].startswith(str(tmp_path / "xdg-state" / "mesh-mcp"))
    quick, loaded = _index(workspace, env)
    assert not loaded and quick["index"]["reparsed"] == 0 and quick["counts"] == built["counts"]
    assert not (workspace / ".mesh").exists()


# -- serve: the start-up walk also gives the workspace skills ------------------------------------------

SEED_SCRIPT = r"""
import json, sys, threading
from pathlib import Path
from resources.skill_catalog import get_skill_catalog
from resources.workspace_skills import discover_workspace_skills
from server.config import load_settings
from server.runtime import Runtime
import tools.mesh_index.warmup as warmup

workspace, state = Path(sys.argv[1]), sys.argv[2]
settings = load_settings(environ={}, overrides={"workspace": str(workspace), "state_dir": state})
assert threading.active_count() == 1
svc = warmup.start_warm_up(settings)
runtime = Runtime(settings)
warmup.adopt(runtime, svc)
for t in threading.enumerate():
    if t.name == "mesh-index-warm-up":
        t.join()
catalog = get_skill_catalog(runtime)
skip = settings.conventions.static.skip_dirs
seeded = [s.uri for s in catalog.current().skills]
out = {"walks": catalog.walks, "seeded": seeded,
       "walked": [s.uri for s in discover_workspace_skills(workspace, skip).skills]}
added = workspace / "ms-user" / ".agents" / "skills" / "late" / "SKILL.md"
added.parent.mkdir(parents=True)
added.write_text("---\nname: late\ndescription: added after the start\n---\nbody\n")
out["after_add"] = [s.uri for s in catalog.current().skills]
out["walks_after_add"] = catalog.walks
svc.close()
print(json.dumps(out))
"""


def test_the_start_up_walk_seeds_the_skills_catalog_and_a_later_skill_is_seen(tmp_path: Path):
    import shutil

    from server.config import load_settings
    from tests.helpers import FIXTURES
    from tools.mesh_index.service import service_for_settings

    ws = tmp_path / "skills-ws"
    shutil.copytree(FIXTURES / "skills_workspace", ws)
    age(ws)
    settings = load_settings(environ={}, overrides={"workspace": str(ws), "state_dir": str(tmp_path / "state")})
    built = service_for_settings(settings)
    built.refresh()
    built.close()
    proc = subprocess.run([sys.executable, "-c", SEED_SCRIPT, str(ws), str(tmp_path / "state")],
                          capture_output=True, text=True, cwd=REPO_ROOT, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["walks"] == 0, "the catalog answered from the start-up walk"
    assert out["seeded"] == out["walked"] and len(out["seeded"]) == 3
    assert out["walks_after_add"] == 1 and len(out["after_add"]) == 4  # a folder's mtime changed: walked again


def test_a_server_closed_with_events_unapplied_leaves_no_manifest_that_hides_a_file(built: Path, make_service, walks):
    """A file created after the watched refresh read the events but before it re-read its folder's mtime: that
    mtime already counts the new file, whose event waits in the queue when the server closes."""
    from tools.mesh_index.watch import FolderWatch

    if FolderWatch.create() is None:
        pytest.skip("inotify is not available here")
    server = make_service(built, watch=True)
    server.refresh()
    folder = built / EVENT_MODULE_DIR
    (folder / "a.service.ts").write_text("export const A = 1;\n")
    real = server._restat_dir
    late = folder / "late.service.ts"

    def restat_after_a_late_write(rel_dir: str) -> None:
        if not late.exists():
            late.write_text("export const LATE = 1;\n")  # a real write, racing the refresh
        real(rel_dir)

    server._restat_dir = restat_after_a_late_write
    server.refresh()
    assert f"{EVENT_MODULE_DIR}/late.service.ts" not in server._files  # its event is still queued
    time.sleep(manifest.RACY_NS / 1e9 + 0.2)  # the server idles: the folder's mtime is no longer too recent
    server.close()
    walks.clear()
    svc = make_service(built)
    svc.refresh()
    assert f"{EVENT_MODULE_DIR}/late.service.ts" in svc._files and walks == [""]


def test_racy_files_seen_unchanged_long_enough_after_their_mtime_are_no_longer_hashed(
        workspace: Path, make_service, walks):
    age(workspace)
    path = workspace / EVENT_SERVICE
    path.write_text(path.read_text())  # saved just before the build
    first = make_service(workspace)
    first.refresh()
    first.close()
    cache = make_service(workspace)._open_cache()
    assert cache is not None and list(cache.load_manifest()["racy"]) == [EVENT_SERVICE]
    time.sleep(manifest.RACY_NS / 1e9 + 0.2)
    walks.clear()
    svc = make_service(workspace)
    assert svc.refresh().reparsed == 0 and svc._lazy is not None and walks == []  # hashed, matched
    assert cache.load_manifest()["racy"] == {}
    again = make_service(workspace)
    assert again.refresh().reparsed == 0 and again._lazy is not None and walks == []


def test_the_warm_command_also_stops_hashing_racy_files_once_they_are_old_enough(workspace: Path, tmp_path: Path):
    import sqlite3

    age(workspace)
    path = workspace / EVENT_SERVICE
    path.write_text(path.read_text())  # saved just before the build
    env = {**os.environ, "MESH_STATE_DIR": str(tmp_path / "state")}
    _index(workspace, env)

    def racy() -> dict:
        conn = sqlite3.connect(tmp_path / "state" / "static-index.sqlite")
        try:
            return json.loads(conn.execute("SELECT value FROM meta WHERE key='manifest'").fetchone()[0])["racy"]
        finally:
            conn.close()

    assert list(racy()) == [EVENT_SERVICE]
    time.sleep(manifest.RACY_NS / 1e9 + 0.2)
    quick, loaded = _index(workspace, env)
    assert not loaded and quick["index"]["reparsed"] == 0 and racy() == {}
