"""Skills and names as the workspace is now, with a running server: nothing needs a restart.

- resources/list shows a SKILL.md added (in an existing skills folder, or in a new ``.agents``
  folder deep in a repository), edited or removed while the session runs; a read of an unknown
  workspace skill is a clear error;
- the catalogue does not walk again while nothing changed (its ``walks`` counter), and
  check_skills reuses its vocabulary until a file, a folder or a setting changes.

The fixture is a copy of tests/fixtures/skills_workspace whose files are dated an hour back: the
freshness checks trust only mtimes older than two seconds (a coarse clock tick), as a workspace
nobody touched in the last seconds.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from resources.skill_catalog import SkillCatalog, get_skill_catalog
from server.app import build_server
from server.config import load_settings
from tests.helpers import FIXTURES
from tools.skills.check import check_skills
from tools.skills.vocab_cache import VocabularyCache

pytestmark = pytest.mark.anyio

LATE = "skill://workspace/ms-user/late-comer"
DEEP = "skill://workspace/npm-packages/deep-one"


def age_tree(root: Path, seconds: float = 3600) -> None:
    """Date every file and folder under ``root`` ``seconds`` back (folders last: touching a file does not
    change its folder's mtime, but be explicit)."""
    past = time.time() - seconds
    for dirpath, _dirnames, filenames in os.walk(root):
        for name in filenames:
            os.utime(os.path.join(dirpath, name), (past, past))
    for dirpath, _dirnames, _filenames in os.walk(root, topdown=False):
        os.utime(dirpath, (past, past))


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    shutil.copytree(FIXTURES / "skills_workspace", root)
    age_tree(root)
    return root


def _settings(root: Path, tmp_path: Path):
    return load_settings(workspace=root, environ={}, overrides={"state_dir": str(tmp_path / "state")})


def _skill(name: str, description: str, body: str = "Nothing to see.\n") -> str:
    return f"---\nname: {name}\ndescription: {description}\n---\n# {name}\n\n{body}"


async def _listed(client: Client) -> dict[str, object]:
    return {str(r.uri): r for r in (await client.list_resources()).resources}


async def test_skills_added_edited_and_removed_while_the_session_runs(workspace: Path, tmp_path: Path) -> None:
    server = build_server(_settings(workspace, tmp_path))
    async with Client(server, cache=None) as client:
        before = await _listed(client)
        catalog = get_skill_catalog(server.runtime)  # type: ignore[attr-defined]
        assert isinstance(catalog, SkillCatalog) and catalog.walks == 1
        assert LATE not in before and "skill://workspace/meta/trace-flow" in before
        await _listed(client)
        assert catalog.walks == 1, "nothing changed: the second listing did not walk the workspace"

        late = workspace / "ms-user/.claude/skills/Late Comer/SKILL.md"  # a new folder in an existing one
        late.parent.mkdir(parents=True)
        late.write_text(_skill("Late Comer", "Added while the server ran."))
        deep = workspace / "npm-packages/packages/shared/.agents/skills/Deep One/SKILL.md"  # a new .agents folder
        deep.parent.mkdir(parents=True)
        deep.write_text(_skill("deep-one", "Deep in a repository."))
        after = await _listed(client)
        assert after[LATE].description == "Added while the server ran."  # type: ignore[attr-defined]
        assert after[DEEP].description == "Deep in a repository."  # type: ignore[attr-defined]
        assert set(after) - set(before) == {LATE, DEEP}
        read = await client.read_resource(LATE)
        assert read.contents[0].text == late.read_text()

        age_tree(workspace)
        await _listed(client)
        walks, reads = catalog.walks, catalog.reads
        late.write_text(_skill("Late Comer", "Edited in place."))  # same folder entries: no folder mtime moves
        edited = await _listed(client)
        assert edited[LATE].description == "Edited in place."  # type: ignore[attr-defined]
        assert (catalog.walks, catalog.reads) == (walks, reads + 1), "an edit re-reads that file, no walk"
        assert (await client.read_resource(LATE)).contents[0].text.endswith("Nothing to see.\n")

        shutil.rmtree(late.parent)
        gone = await _listed(client)
        assert LATE not in gone and DEEP in gone
        with pytest.raises(MCPError, match="no workspace skill skill://workspace/ms-user/late-comer"):
            await client.read_resource(LATE)


async def test_a_new_skill_is_linked_without_a_restart(workspace: Path, tmp_path: Path) -> None:
    server = build_server(_settings(workspace, tmp_path))
    async with Client(server, cache=None) as client:
        first = await client.call_tool("analyze_impact", {"target": "user.sync_calendar"})
        assert not first.is_error, first.content[0].text
        assert LATE not in {r["uri"] for r in first.structured_content["related_skills"]}
        late = workspace / "ms-user/.claude/skills/Late Comer/SKILL.md"
        late.parent.mkdir(parents=True)
        late.write_text(_skill("Late Comer", "Calendar sync.", "Re-run `user.sync_calendar` after the fix.\n"))
        second = await client.call_tool("analyze_impact", {"target": "user.sync_calendar"})
        related = {r["uri"]: r["why"] for r in second.structured_content["related_skills"]}
        assert related.get(LATE) == "it names `user.sync_calendar` (ms-user/.claude/skills/Late Comer/SKILL.md:7)"


def test_a_change_within_the_clock_tick_is_not_trusted(workspace: Path) -> None:
    """A folder changed just before the walk proves nothing: the next call walks again until it is older."""
    catalog = SkillCatalog(workspace, ["node_modules", ".git"])
    catalog.current()
    catalog.current()
    assert catalog.walks == 1
    late = workspace / "meta/.agents/skills/late/SKILL.md"
    late.parent.mkdir()
    late.write_text(_skill("late", "d"))
    assert "skill://workspace/meta/late" in {s.uri for s in catalog.current().skills}
    walks = catalog.walks
    catalog.current()
    assert catalog.walks == walks + 1, "the folder changed less than 2 s ago: walked again"
    age_tree(workspace)
    catalog.current()
    walks = catalog.walks
    catalog.current()
    assert catalog.walks == walks, "once older, its mtime is trusted"


# --- check_skills' vocabulary -------------------------------------------------------------------


def test_the_vocabulary_is_reused_until_the_code_or_the_config_changes(workspace: Path, tmp_path: Path) -> None:
    settings = _settings(workspace, tmp_path)
    cache = VocabularyCache()
    first = check_skills(settings, "trace-flow", vocabulary=cache)
    second = check_skills(settings, "trace-flow", vocabulary=cache)
    assert (cache.builds, cache.reuses) == (1, 1)
    assert not first.vocabulary_reused and second.vocabulary_reused
    assert second.skills == first.skills
    assert "names as read by an earlier call" in second.summary_text()

    # a source file edited in place: rebuilt, and the new declaration counts
    enum = workspace / "npm-packages/packages/shared/src/enums/streams.enum.ts"
    added = "EVENT = 'stream:event',\n  EVNT = 'stream:evnt',"
    enum.write_text(enum.read_text().replace("EVENT = 'stream:event',", added))
    third = check_skills(settings, "trace-flow", vocabulary=cache)
    assert cache.builds == 2 and not third.vocabulary_reused
    assert "stream:evnt" in {f.name for f in first.skills[0].findings}
    assert "stream:evnt" not in {f.name for f in third.skills[0].findings}

    # a file added (its folder's mtime moves): rebuilt
    age_tree(workspace)
    check_skills(settings, "trace-flow", vocabulary=cache)
    builds = cache.builds
    (workspace / "ms-user/src/outbox.ts").write_text("export const EVENT_OUTBOX = 'event_outbox';\n")
    fourth = check_skills(settings, "trace-flow", vocabulary=cache)
    assert cache.builds == builds + 1
    assert "event_outbox" not in {f.name for f in fourth.skills[0].findings}, "now declared in the code"

    # another setting (the tables' names): rebuilt, even with no file changed
    age_tree(workspace)
    check_skills(settings, "trace-flow", vocabulary=cache)
    builds = cache.builds
    renamed = load_settings(workspace=workspace, environ={}, overrides={
        "state_dir": str(tmp_path / "state"), "conventions": {"tables": {"job_audit": "job_audit_log"}}})
    fifth = check_skills(renamed, "trace-flow", vocabulary=cache)
    assert cache.builds == builds + 1 and not fifth.vocabulary_reused


async def test_check_skills_over_mcp_keeps_its_vocabulary(workspace: Path, tmp_path: Path) -> None:
    async with Client(build_server(_settings(workspace, tmp_path)), cache=None) as client:
        first = await client.call_tool("check_skills", {"name": "trace-flow"})
        second = await client.call_tool("check_skills", {"name": "trace-flow"})
        assert first.structured_content["vocabulary_reused"] is False
        assert second.structured_content["vocabulary_reused"] is True
        assert second.structured_content["skills"] == first.structured_content["skills"]
        (workspace / "ms-user/src/outbox.ts").write_text("export const T = 'event_outbox';\n")
        third = await client.call_tool("check_skills", {"name": "trace-flow"})
        assert third.structured_content["vocabulary_reused"] is False
        assert "event_outbox" not in {f["name"] for f in third.structured_content["skills"][0]["findings"]}
