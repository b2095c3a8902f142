"""The team's own skills: listed and read as resources, linked to flows, checked against the code.

The fixture workspace (tests/fixtures/skills_workspace) holds skills in both folder
conventions: a stale one (a renamed table, a moved folder, a missing source, a changed source
with a recorded verification, a repository that is not there, unknown commands), a clean one
whose title has spaces, and one whose front matter is not YAML. Each test works on a copy in a
temporary folder made into a git repository with dated commits, so "changed since" has history.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from resources.workspace_skills import discover_workspace_skills, parse_workspace_skill
from server.config import load_settings
from server.errors import InvalidArgument
from tests.helpers import FIXTURES, REPO_ROOT, in_process_client
from tools.skills.check import check_bundled, check_skills
from tools.skills.sources import sources_digest, sources_of

pytestmark = pytest.mark.anyio

STALE = "skill://workspace/meta/trace-flow"
CLEAN = "skill://workspace/meta/clean-skill"
BROKEN = "skill://workspace/ms-user/broken"


def _git(cwd: Path, *args: str, date: str | None = None) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.org"}
    if date:
        env |= {"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
    subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """The fixture, committed on 2026-01-01; the consumer source changed and committed after the skill's
    last verification (2026-01-10)."""
    root = tmp_path / "ws"
    shutil.copytree(FIXTURES / "skills_workspace", root)
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "initial", date="2026-01-01T00:00:00+00:00")
    consumer = root / "npm-packages/packages/database/src/outbox/consumers/outbox.consumer.ts"
    consumer.write_text(consumer.read_text() + "\n// claims in batches of 100\n")
    _git(root, "commit", "-q", "-am", "consumer: batch size", date="2026-02-01T00:00:00+00:00")
    return root


def _settings(root: Path, tmp_path: Path):
    return load_settings(workspace=root, environ={}, overrides={"state_dir": str(tmp_path / "state")})


# --- listing and reading ------------------------------------------------------------------------


def test_both_folder_conventions_are_found_and_nothing_is_dropped(workspace: Path) -> None:
    skills = {s.uri: s for s in discover_workspace_skills(workspace, ["node_modules", ".git"]).skills}
    assert set(skills) == {STALE, CLEAN, BROKEN}
    assert skills[STALE].rel_path == "meta/.agents/skills/trace-flow/SKILL.md"
    assert skills[CLEAN].rel_path == "meta/.claude/skills/Clean Skill/SKILL.md"
    assert skills[CLEAN].name == "Clean Skill With Spaces", "a name with spaces is kept; the URI uses the folder"
    assert skills[CLEAN].description == "A runbook that names only what exists."
    assert skills[STALE].front_matter["custom_key"] == "kept as is", "unknown keys are kept"
    assert skills[STALE].front_matter["mesh_keys"] == ["jobs_outbox", "event_queue"]
    assert skills[BROKEN].error and "not valid YAML" in skills[BROKEN].error


def test_skipped_folders_are_not_walked(workspace: Path) -> None:
    hidden = workspace / "node_modules/pkg/.agents/skills/x"
    hidden.mkdir(parents=True)
    (hidden / "SKILL.md").write_text("---\nname: x\ndescription: y\n---\nbody\n")
    uris = {s.uri for s in discover_workspace_skills(workspace, ["node_modules"]).skills}
    assert not any(u.rsplit("/", 1)[-1] == "x" for u in uris)


def test_front_matter_shapes() -> None:
    no_fm = parse_workspace_skill("# Just a title\n", rel_path="r/.claude/skills/a b/SKILL.md", repo="r", slug="a-b")
    assert no_fm.name == "a b" and no_fm.error and "no front matter" in no_fm.error
    scalar = parse_workspace_skill("---\njust text\n---\nbody", rel_path="r/.agents/skills/s/SKILL.md", repo="r",
                                   slug="s")
    assert scalar.error and "expected 'key: value'" in scalar.error
    flow = parse_workspace_skill(
        '---\nname: f\npaths: [ "ms-*/src/**", "x/**" ]\nsources: [ { "id": "a", "resource": "x/y.ts" } ]\n---\nb',
        rel_path="r/.agents/skills/f/SKILL.md", repo="r", slug="f",
    )
    assert flow.error is None and flow.paths == ["ms-*/src/**", "x/**"]
    assert [s.resource for s in sources_of(flow.front_matter)] == ["x/y.ts"]


async def test_served_as_resources_beside_the_bundled_ones(workspace: Path, tmp_path: Path) -> None:
    async with in_process_client(_settings(workspace, tmp_path)) as client:
        listed = {str(r.uri): r for r in (await client.list_resources()).resources}
        assert {STALE, CLEAN, BROKEN} <= set(listed)
        assert "skill://trace-async-flow" in listed, "bundled skills are still listed"
        assert listed[CLEAN].description == "A runbook that names only what exists."
        assert "listed with a problem" in (listed[BROKEN].description or "")
        read = await client.read_resource(STALE)
        text = read.contents[0].text
        assert text == (workspace / "meta/.agents/skills/trace-flow/SKILL.md").read_text()
        assert read.contents[0].mime_type == "text/markdown"


# --- checking -----------------------------------------------------------------------------------


def _by_uri(report) -> dict:
    return {c.uri: c for c in report.skills}


def test_the_stale_skill_is_flagged_where_it_is_stale(workspace: Path, tmp_path: Path) -> None:
    report = check_skills(_settings(workspace, tmp_path))
    findings = _by_uri(report)[STALE].findings
    got: dict = {}
    for f in findings:
        got.setdefault((f.code, f.name), f)

    table = got[("unknown_name", "event_outbox")]
    assert table.severity == "error" and table.suggestion == "event_queue"
    assert table.line == 22 and table.file == "meta/.agents/skills/trace-flow/SKILL.md"
    assert [f.line for f in findings if f.name == "event_outbox"] == [22, 25], "in prose and in the SQL block"
    assert got[("unknown_name", "stream:evnt")].suggestion == "stream:event"
    assert got[("unknown_name", "user.sync_calender")].suggestion == "user.sync_calendar"

    moved = got[("path_unmatched", "npm-packages/packages/database/src/consumers/outbox.consumer.ts")]
    assert moved.suggestion == "npm-packages/packages/database/src/outbox/consumers/outbox.consumer.ts"
    assert got[("path_unmatched", "npm-packages/packages/database/src/outbox-old/**")].suggestion == (
        "npm-packages/packages/database/src/outbox"
    )
    assert "not in this workspace" in got[("repo_missing", "ms-ghost/src/**")].message

    missing = got[("source_missing", "npm-packages/packages/database/src/outbox/dispatchers/outbox.dispatcher.ts")]
    assert missing.severity == "error"
    unverified = [f for f in findings if f.code == "source_unverified"]
    assert len(unverified) == 1 and "outbox.consumer.ts" in unverified[0].name
    assert "0123456789abcdef" in unverified[0].message and "git history is not consulted" in unverified[0].message

    commands = {f.name for f in findings if f.code == "unknown_command"}
    assert commands == {"npm run deploy:all", "mesh-mcp tracejob X"}


def test_nothing_is_flagged_in_clean_passages(workspace: Path, tmp_path: Path) -> None:
    report = check_skills(_settings(workspace, tmp_path))
    assert _by_uri(report)[CLEAN].findings == []
    stale = _by_uri(report)[STALE].findings
    flagged = {f.name for f in stale}
    for fine in ("jobs_outbox", "event_queue", "OutboxConsumer", "claimMinIdleTimeMs", "stream:event",
                 "stream:event-dlq", "user.sync_calendar", "job.data.payload", "npm run build:contracts",
                 "yarn migration:run", "mesh-mcp verify user.sync_calendar"):
        assert fine not in flagged, fine


def test_unreadable_skill_is_an_error_not_a_silence(workspace: Path, tmp_path: Path) -> None:
    report = check_skills(_settings(workspace, tmp_path))
    assert [f.code for f in _by_uri(report)[BROKEN].findings] == ["unreadable"]
    assert report.errors == 4


def test_a_recorded_digest_that_matches_means_unchanged_without_git(workspace: Path, tmp_path: Path) -> None:
    shutil.rmtree(workspace / ".git")
    skill = workspace / "meta/.agents/skills/trace-flow/SKILL.md"
    parsed = parse_workspace_skill(skill.read_text(), rel_path="x", repo="meta", slug="trace-flow")
    present = [s for s in sources_of(parsed.front_matter) if (workspace / s.resource).exists()]
    digest = sources_digest(workspace, present)
    skill.write_text(skill.read_text().replace('"0123456789abcdef"', f'"{digest}"'))
    findings = _by_uri(check_skills(_settings(workspace, tmp_path)))[STALE].findings
    assert not [f for f in findings if f.code in ("source_changed", "source_unverified")]

    consumer = workspace / present[1].resource
    consumer.write_text(consumer.read_text() + "// edited\n")
    findings = _by_uri(check_skills(_settings(workspace, tmp_path)))[STALE].findings
    unknown = [f for f in findings if f.code == "source_unverified"]
    assert unknown and unknown[0].severity == "info", "no git and another digest: unknown, said so"
    assert "sha256" in unknown[0].message


def test_one_skill_by_name_slug_or_uri(workspace: Path, tmp_path: Path) -> None:
    settings = _settings(workspace, tmp_path)
    for key in ("Clean Skill With Spaces", "clean-skill", CLEAN):
        assert [c.uri for c in check_skills(settings, key).skills] == [CLEAN]
    with pytest.raises(InvalidArgument, match="no workspace skill named"):
        check_skills(settings, "nope")


def test_cli_exit_codes_and_json(workspace: Path, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "MESH_STATE_DIR": str(tmp_path / "state")}
    base = [sys.executable, "-m", "server.cli", "skills", "check"]
    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([*base, *args], capture_output=True, text=True, env=env, cwd=REPO_ROOT, check=False)

    every = run("--workspace", str(workspace), "--json")
    assert every.returncode == 1, every.stderr
    assert json.loads(every.stdout)["errors"] == 4
    clean = run("clean-skill", "--workspace", str(workspace))
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "clean" in clean.stdout


async def test_check_skills_tool_over_mcp(workspace: Path, tmp_path: Path) -> None:
    async with in_process_client(_settings(workspace, tmp_path)) as client:
        result = await client.call_tool("check_skills", {"name": "trace-flow"})
        assert not result.is_error
        assert result.structured_content["errors"] == 3
        assert "event_outbox" in result.content[0].text and "event_queue" in result.content[0].text
        bad = await client.call_tool("check_skills", {"name": "nope"})
        assert bad.is_error and "no workspace skill named 'nope'" in bad.content[0].text


# --- linking ------------------------------------------------------------------------------------


async def test_analyze_impact_and_verify_flow_return_related_skills(workspace: Path, tmp_path: Path) -> None:
    async with in_process_client(_settings(workspace, tmp_path)) as client:
        impact = await client.call_tool("analyze_impact", {"detail": "full", "target": "user.send_welcome"})
        assert not impact.is_error, impact.content[0].text
        related = {r["uri"]: r["why"] for r in impact.structured_content["related_skills"]}
        assert CLEAN in related and "user.send_welcome" in related[CLEAN]
        assert STALE in related and "jobs_outbox" in related[STALE], "linked by its mesh_keys"
        assert "skill://trace-async-flow" in related, "bundled skills are linked too"
        assert BROKEN not in related
        assert f"Related skills: {next(iter(related))}" in impact.content[0].text

        flow = await client.call_tool("verify_flow", {"target": "user.send_welcome"})
        assert not flow.is_error, flow.content[0].text
        assert CLEAN in {r["uri"] for r in flow.structured_content["related_skills"]}


def test_our_own_skills_name_nothing_that_does_not_exist() -> None:
    checks = check_bundled(REPO_ROOT, load_settings(environ={}))
    assert len(checks) >= 4
    problems = [(c.uri, f.line, f.name, f.message) for c in checks for f in c.findings]
    assert problems == []


def test_a_renamed_table_in_our_own_skill_would_be_caught(tmp_path: Path) -> None:
    """The bundled-skill check can fail: a copy of our tree with a stale name in a skill is flagged."""
    root = tmp_path / "copy"
    for part in ("server", "tools", "resources", "skills"):
        shutil.copytree(REPO_ROOT / part, root / part, ignore=shutil.ignore_patterns("__pycache__", "sample_workspace"))
    skill = root / "skills" / "trace-async-flow.md"
    skill.write_text(skill.read_text() + "\nThen look at `job_audit_log` and run `mesh-mcp tracejob`.\n")
    checks = check_bundled(root, load_settings(environ={}), root / "skills")
    names = {f.name for c in checks for f in c.findings}
    assert "job_audit_log" in names and "mesh-mcp tracejob" in names


def test_a_source_changed_after_our_recorded_digest_is_unverified_without_running_git(
        workspace: Path, tmp_path: Path) -> None:
    """The skill records mesh-mcp's own digest: unchanged until a source's bytes change, then unknown
    (a change, or a record computed another way), with the digest now; git is not asked."""
    skill = workspace / "meta/.agents/skills/trace-flow/SKILL.md"
    parsed = parse_workspace_skill(skill.read_text(), rel_path="x", repo="meta", slug="trace-flow")
    present = [s for s in sources_of(parsed.front_matter) if (workspace / s.resource).exists()]
    text = skill.read_text().replace('"2026-01-10T10:00:00Z"', '"2026-03-01T00:00:00Z"')
    skill.write_text(text.replace('"0123456789abcdef"', f'"{sources_digest(workspace, present)}"'))
    findings = _by_uri(check_skills(_settings(workspace, tmp_path)))[STALE].findings
    assert not [f for f in findings if f.code == "source_unverified"], "digest matches"

    migration = workspace / "ms-user/src/migrations/common/1700000000000-outbox.ts"
    migration.write_text(migration.read_text() + "// index on status\n")
    unverified = [f for f in _by_uri(check_skills(_settings(workspace, tmp_path)))[STALE].findings
                  if f.code == "source_unverified"]
    assert len(unverified) == 1 and "ms-user/src/migrations/common" in unverified[0].name
    assert sources_digest(workspace, present) in unverified[0].message and "2026-03-01" in unverified[0].message
