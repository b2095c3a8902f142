"""completion/complete for prompt and resource-template arguments, through a real MCP client session."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from mcp.types import PromptReference, ResourceTemplateReference

from resources.completions import MAX_VALUES, rank
from resources.skills import load_skills
from server.config import Settings
from server.demo.command import sample_workspace_dir
from tests.helpers import in_process_client

pytestmark = pytest.mark.anyio

SERVICES = {name: {"postgres": f"postgresql://postgres@127.0.0.1:5432/{name}_not_contacted"}
            for name in ("event", "billing", "event-archive")}


def prompt(name: str) -> PromptReference:
    return PromptReference(type="ref/prompt", name=name)


def template(uri: str) -> ResourceTemplateReference:
    return ResourceTemplateReference(type="ref/resource", uri=uri)


def _workspace(tmp_path: Path) -> Path:
    workspace = tmp_path / "workspace"
    shutil.copytree(sample_workspace_dir(), workspace)
    return workspace


async def test_prompt_and_template_arguments_complete_from_the_index(
    make_settings: Callable[..., Settings], tmp_path: Path
) -> None:
    workspace = _workspace(tmp_path)
    # a job type added to the copy completes too: the names come from the index, not from a list
    jobs = workspace / "npm-packages/packages/messaging/src/jobs/events/payloads.ts"
    text = jobs.read_text(encoding="utf-8")
    jobs.write_text(text.replace("  GEOCODE_EVENT =", "  ARCHIVE_EVENT = 'events.archive_event',\n  GEOCODE_EVENT ="))
    async with in_process_client(make_settings(workspace=str(workspace), services=SERVICES)) as client:
        catalogue = (await client.call_tool("list_catalogue", {})).structured_content
        by_kind: dict[str, set[str]] = {}
        for entry in catalogue["entries"]:
            by_kind.setdefault(entry["kind"], set()).update({entry["value"], entry["name"]})

        jobs_done = (await client.complete(prompt("diagnose_job"), {"name": "job", "value": ""})).completion
        assert set(jobs_done.values) == by_kind["job"] and jobs_done.total == len(by_kind["job"])
        assert "events.archive_event" in jobs_done.values

        typed = (await client.complete(prompt("diagnose_job"), {"name": "job", "value": "EVENTS.GEO"})).completion
        assert typed.values[0] == "events.geocode_event"  # starts with what was typed (case-insensitive) first
        assert all("events.geo" in v.lower() for v in typed.values)

        events = (await client.complete(prompt("diagnose_event"), {"name": "event", "value": ""})).completion
        assert set(events.values) == by_kind["event"]

        streams = (await client.complete(prompt("remediate_dlq"), {"name": "stream", "value": "created"})).completion
        assert streams.values and set(streams.values) <= by_kind["stream"]
        assert all("created" in v.lower() for v in streams.values)

        targets = (await client.complete(template("mesh://flow/{target}"), {"name": "target", "value": "geocode"}))
        assert {"events.geocode_event", "EventsJobType.GEOCODE_EVENT"} <= set(targets.completion.values)
        assert set(targets.completion.values) <= set().union(*by_kind.values())

        skills = (await client.complete(template("skill://{name}"), {"name": "name", "value": ""})).completion
        assert set(skills.values) == {s.name for s in load_skills(strict=False)}

        services = (await client.complete(prompt("diagnose_job"), {"name": "service", "value": "EVENT"})).completion
        assert services.values == ["event", "event-archive"]

        unknown = (await client.complete(prompt("diagnose_job"), {"name": "colour", "value": "r"})).completion
        assert unknown.values == []


async def test_without_a_workspace_index_arguments_complete_to_nothing(make_settings: Callable[..., Settings]) -> None:
    async with in_process_client(make_settings(services=SERVICES)) as client:
        jobs = (await client.complete(prompt("diagnose_job"), {"name": "job", "value": ""})).completion
        assert jobs.values == [] and jobs.total == 0
        services = (await client.complete(prompt("diagnose_event"), {"name": "service", "value": ""})).completion
        assert sorted(services.values) == sorted(SERVICES)


def test_rank_caps_at_the_protocol_limit() -> None:
    many = [f"stream:s{i:03d}" for i in range(250)] + ["other:s001"]
    every = rank(many, "stream:")
    assert len(every.values) == MAX_VALUES and every.total == 250 and every.has_more
    some = rank(many, "S00")
    assert some.values == [f"stream:s{i:03d}" for i in range(10)] + ["other:s001"] or some.values[0] == "other:s001"
    assert some.total == 11 and not some.has_more
    assert rank(many, "other").values == ["other:s001"]


async def test_workspace_skill_uris_complete_their_repo_and_slug(
    make_settings: Callable[..., Settings], tmp_path: Path
) -> None:
    """skill://workspace/{repo}/{slug}: completing repo gave [] (no handler); now the repos holding a SKILL.md,
    and the slugs of the chosen repo, as resources/list names them."""
    workspace = tmp_path / "ws"
    shutil.copytree(Path(__file__).parents[1] / "fixtures" / "trace_skills", workspace)
    ref = template("skill://workspace/{repo}/{slug}")
    async with in_process_client(make_settings(workspace=str(workspace))) as client:
        listed = [r.uri for r in (await client.list_resources()).resources if r.uri.startswith("skill://workspace/")]
        repos = (await client.complete(ref, {"name": "repo", "value": ""})).completion
        typed = (await client.complete(ref, {"name": "repo", "value": "ms-"})).completion
        slugs = (await client.complete(ref, {"name": "slug", "value": ""},
                                       context_arguments={"repo": "meta"})).completion
    assert sorted(repos.values) == sorted({uri.split("/")[3] for uri in listed}) and "meta" in repos.values
    assert typed.values == ["ms-user"]
    assert sorted(slugs.values) == sorted(uri.split("/")[4] for uri in listed if uri.split("/")[3] == "meta")
