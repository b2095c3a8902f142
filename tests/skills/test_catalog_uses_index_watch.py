"""In the server, the workspace-skills catalogue asks the static index's folder watches whether
anything changed before it checks the folders itself: nothing changed, nothing is stat'ed; a
SKILL.md added, edited or removed is still seen at once.

(It used to stat every folder of the workspace on each call: 10 ms of every analyze_impact at
20,000 files.) Real inotify watches (Linux), a real index, a copy of the skills fixture dated an
hour back (mtimes younger than two seconds prove nothing and make the catalogue walk).
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

import pytest

import resources.skill_catalog as skill_catalog
from resources.skill_catalog import get_skill_catalog
from server.config import load_settings
from server.runtime import Runtime
from tests.helpers import FIXTURES
from tests.skills.test_live_skills import age_tree
from tools.mesh_index.service import get_index_service

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="inotify folder watches are Linux-only")


@pytest.fixture
def runtime(tmp_path: Path):
    ws = tmp_path / "ws"
    shutil.copytree(FIXTURES / "skills_workspace", ws)
    age_tree(ws)
    settings = load_settings(environ={}, overrides={"workspace": str(ws), "state_dir": str(tmp_path / "state")})
    rt = Runtime(settings)
    yield rt
    get_index_service(rt).close()


@pytest.fixture
def stats(monkeypatch) -> list[str]:
    """Every os.stat / Path.stat the catalogue makes (its folder check and its SKILL.md check)."""
    seen: list[str] = []
    real_stat = os.stat

    def counting_stat(path, *args, **kwargs):
        seen.append(str(path))
        return real_stat(path, *args, **kwargs)

    monkeypatch.setattr(skill_catalog.os, "stat", counting_stat)
    real_file_stat = skill_catalog.file_stat
    monkeypatch.setattr(skill_catalog, "file_stat", lambda p: seen.append(str(p)) or real_file_stat(p))
    return seen


def _uris(runtime: Runtime) -> list[str]:
    return [s.uri for s in get_skill_catalog(runtime).current().skills]


def test_nothing_changed_nothing_is_checked(runtime: Runtime, stats: list[str]):
    get_index_service(runtime).refresh()  # the server's index, watching every folder
    first = _uris(runtime)
    stats.clear()
    assert _uris(runtime) == first and _uris(runtime) == first
    assert stats == [] and get_skill_catalog(runtime).walks == 1


def test_a_skill_added_edited_or_removed_is_seen_at_once(runtime: Runtime, stats: list[str]):
    get_index_service(runtime).refresh()
    ws = runtime.settings.workspace
    before = _uris(runtime)
    new = ws / "ms-user" / ".agents" / "skills" / "late" / "SKILL.md"
    new.parent.mkdir(parents=True)
    new.write_text("---\nname: late\ndescription: added while the server runs\n---\nbody\n")
    added = _uris(runtime)
    assert set(added) - set(before) == {"skill://workspace/ms-user/late"}

    age_tree(ws)  # then an edit in place, dated after the check
    edited_file = ws / "meta" / ".agents" / "skills" / "trace-flow" / "SKILL.md"
    edited_file.write_text(edited_file.read_text().replace("description:", "description: edited,", 1))
    descriptions = {s.uri: s.description for s in get_skill_catalog(runtime).current().skills}
    assert descriptions["skill://workspace/meta/trace-flow"].startswith("edited,")

    new.unlink()
    assert "skill://workspace/ms-user/late" not in _uris(runtime)


def test_without_the_index_the_catalogue_checks_the_folders_itself(runtime: Runtime, stats: list[str]):
    first = _uris(runtime)  # no index service was made: the catalogue must not build one
    stats.clear()
    assert _uris(runtime) == first
    assert stats and runtime.existing("mesh_index") is None


def test_a_skipped_skill_folder_is_checked_by_the_catalogue(tmp_path: Path, stats: list[str]):
    ws = tmp_path / "ws"
    shutil.copytree(FIXTURES / "skills_workspace", ws)
    age_tree(ws)
    settings = load_settings(environ={}, overrides={
        "workspace": str(ws), "state_dir": str(tmp_path / "state"),
        "conventions": {"static": {"skip_dirs": ["node_modules", ".git", ".claude"]}}})
    rt = Runtime(settings)
    try:
        get_index_service(rt).refresh()  # the index does not watch .claude folders: the catalogue walks them
        first = _uris(rt)
        stats.clear()
        assert _uris(rt) == first and stats
    finally:
        get_index_service(rt).close()


def test_a_skill_that_is_a_link_is_read_again_when_its_target_changes(runtime: Runtime, stats: list[str]):
    """A SKILL.md linking into a skipped folder (node_modules): the index does not watch the target's
    folder, so the catalogue stats the links themselves on every call."""
    ws = runtime.settings.workspace
    target = ws / "node_modules" / "pkg" / "SKILL.md"
    target.parent.mkdir(parents=True)
    target.write_text("---\nname: linked\ndescription: old text\n---\nbody\n")
    link = ws / "ms-user" / ".agents" / "skills" / "linked" / "SKILL.md"
    link.parent.mkdir(parents=True)
    link.symlink_to(target)
    age_tree(ws)
    os.utime(target, ns=(time.time_ns() - 3600 * 10**9,) * 2)
    get_index_service(runtime).refresh()

    def description() -> str:
        return next(s.description for s in get_skill_catalog(runtime).current().skills
                    if s.uri == "skill://workspace/ms-user/linked")

    assert description() == "old text" and description() == "old text"
    target.write_text("---\nname: linked\ndescription: new text\n---\nbody\n")
    assert description() == "new text"
