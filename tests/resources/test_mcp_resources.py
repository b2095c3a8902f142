"""Skills, the catalogue and the prompts through real MCP client sessions."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from mcp.shared.exceptions import MCPError

from resources.skills import load_skills
from server.config import Settings
from tests.helpers import in_process_client, stdio_client

pytestmark = pytest.mark.anyio

JOB_ID = "3f0c2a4e-9b1d-4c55-8e0f-1a2b3c4d5e6f"
ONE_SERVICE = {"event": {"postgres": "postgresql://postgres@127.0.0.1:5432/not_contacted"}}


async def test_skills_and_catalogue_are_listed_with_descriptions(make_settings: Callable[..., Settings]) -> None:
    skills = {s.name: s for s in load_skills()}
    async with in_process_client(make_settings()) as client:
        listed = {str(r.uri): r for r in (await client.list_resources()).resources}
        templates = (await client.list_resource_templates()).resource_templates
    for name, skill in skills.items():
        resource = listed[f"skill://{name}"]
        assert resource.name == name
        assert resource.description == skill.description
        assert resource.mime_type == "text/markdown"
        assert resource.title == skill.title
    catalogue = listed["mesh://catalogue"]
    assert catalogue.mime_type == "application/json"
    assert "list_catalogue" in (catalogue.description or "")
    skill_template = next(t for t in templates if t.uri_template == "skill://{name}")
    assert skill_template.mime_type == "text/markdown"
    for name in skills:
        assert name in (skill_template.description or "")


async def test_every_skill_reads_back_as_its_markdown(make_settings: Callable[..., Settings]) -> None:
    async with in_process_client(make_settings()) as client:
        for skill in load_skills():
            result = await client.read_resource(skill.uri)
            (content,) = result.contents
            assert content.mime_type == "text/markdown"
            assert content.text == skill.path.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("skill://nope", "unknown skill 'nope'; known skills: implement-async-job-flow"),
        ("skill://Not_A_Name", "is not a skill name"),
    ],
)
async def test_unknown_skill_is_a_clear_error(make_settings: Callable[..., Settings], uri: str, expected: str) -> None:
    async with in_process_client(make_settings()) as client:
        with pytest.raises(MCPError) as info:
            await client.read_resource(uri)
    assert expected in str(info.value)
    assert "trace-async-flow" in str(info.value)


async def test_catalogue_without_workspace_says_what_to_do(make_settings: Callable[..., Settings]) -> None:
    async with in_process_client(make_settings()) as client:
        with pytest.raises(MCPError) as info:
            await client.read_resource("mesh://catalogue")
    assert "no workspace is configured" in str(info.value)
    assert "--workspace" in str(info.value)


async def test_prompts_are_listed_with_required_arguments(make_settings: Callable[..., Settings]) -> None:
    async with in_process_client(make_settings()) as client:
        prompts = {p.name: p for p in (await client.list_prompts()).prompts}
    assert set(prompts) >= {"diagnose_job", "diagnose_event", "remediate_dlq"}
    for name, argument in (("diagnose_job", "job"), ("diagnose_event", "event"), ("remediate_dlq", "stream")):
        (arg,) = prompts[name].arguments
        assert arg.name == argument and arg.required and arg.description


def _positions(text: str, markers: list[str]) -> list[int]:
    positions = [text.find(marker) for marker in markers]
    assert -1 not in positions, [m for m, p in zip(markers, positions, strict=True) if p == -1]
    return positions


async def test_diagnose_job_by_id_walks_the_runbook(make_settings: Callable[..., Settings]) -> None:
    async with in_process_client(make_settings(services=ONE_SERVICE)) as client:
        result = await client.get_prompt("diagnose_job", {"job": JOB_ID})
    text = result.messages[0].content.text
    markers = [
        f'query_outbox(service="event", table="jobs_outbox", id="{JOB_ID}")',
        'analyze_impact(target="<type from step 1>")',
        f'trace_job(service="event", job_id="{JOB_ID}")',
        f'propose_remediation(symptom="requeue_stuck_job", service="event", ids=["{JOB_ID}"])',
        "mesh-mcp approve <plan_id>",
    ]
    positions = _positions(text, markers)
    assert positions == sorted(positions)
    assert f'inspect_queue(queue="<target>", job_id="{JOB_ID}")' in text
    attached = result.messages[1].content
    assert attached.type == "resource"
    assert str(attached.resource.uri) == "skill://trace-async-flow"
    assert attached.resource.text.startswith("---\nname: trace-async-flow")


async def test_diagnose_job_by_type_starts_with_the_static_map(make_settings: Callable[..., Settings]) -> None:
    services = {**ONE_SERVICE, "user": {"postgres": "postgresql://postgres@127.0.0.1:5432/not_contacted"}}
    async with in_process_client(make_settings(services=services)) as client:
        text = (await client.get_prompt("diagnose_job", {"job": "GEOCODE_EVENT"})).messages[0].content.text
    positions = _positions(text, ['analyze_impact(target="GEOCODE_EVENT")', 'query_outbox(service="<service>"',
                                  'trace_job(service="<service>", job_id="<job id>")'])
    assert positions == sorted(positions)
    assert "`event`, `user`" in text


async def test_diagnose_event_names_streams_from_the_conventions(make_settings: Callable[..., Settings]) -> None:
    settings = make_settings(services=ONE_SERVICE, conventions={"stream_prefix": "s:", "dlq_suffix": ".dead"})
    async with in_process_client(settings) as client:
        text = (await client.get_prompt("diagnose_event", {"event": JOB_ID})).messages[0].content.text
    markers = [
        f'query_outbox(service="event", table="event_queue", id="{JOB_ID}")',
        f'trace_event(service="event", event_id="{JOB_ID}")',
        'inspect_stream(stream="s:<target>")',
        'list_pending(stream="s:<target>", group="<group>", min_idle_ms=60000)',
        f'dlq_list(stream="s:<target>", contains="{JOB_ID}")',
        'propose_remediation(symptom="claim_dead_consumer"',
    ]
    positions = _positions(text, markers)
    assert positions == sorted(positions)
    assert "`s:<target>.dead`" in text


async def test_remediate_dlq_accepts_the_dead_letter_stream_name(make_settings: Callable[..., Settings]) -> None:
    settings = make_settings(services=ONE_SERVICE)
    async with in_process_client(settings) as client:
        result = await client.get_prompt("remediate_dlq", {"stream": "stream:event:created-dlq"})
    text = result.messages[0].content.text
    markers = [
        'dlq_list(stream="stream:event:created")',
        'analyze_impact(target="<type of the dead letters>")',
        'propose_remediation(symptom="clear_stale_lock", stream="stream:event:created"',
        "Stop until the cause is fixed",
        'propose_remediation(symptom="dlq_replay", stream="stream:event:created"',
        'propose_remediation(symptom="reconcile_outbox", service="event"',
        "mesh-mcp approve <plan_id>",
    ]
    positions = _positions(text, markers)
    assert positions == sorted(positions)
    assert "idempotency:post-processor:<group>:<messageId>" in text
    assert str(result.messages[1].content.resource.uri) == "skill://remediate-async-failures"


@pytest.mark.parametrize(
    ("prompt", "arguments", "expected"),
    [
        ("diagnose_job", {"job": "  "}, "job is empty"),
        ("diagnose_event", {"event": "a b"}, "contains whitespace"),
        ("remediate_dlq", {"stream": "x" * 600}, "at most 512"),
        ("diagnose_job", {"job": 'x"); drop'}, "contains"),
    ],
)
async def test_invalid_prompt_arguments_are_rejected(
    make_settings: Callable[..., Settings], prompt: str, arguments: dict[str, str], expected: str
) -> None:
    async with in_process_client(make_settings()) as client:
        with pytest.raises(MCPError) as info:
            await client.get_prompt(prompt, arguments)
    assert expected in str(info.value)


async def test_resources_and_prompts_over_stdio(mesh_config: Callable[..., Path], tmp_path: Path) -> None:
    config = mesh_config({"state_dir": str(tmp_path / "state"), "services": ONE_SERVICE})
    async with stdio_client(config) as client:
        uris = {str(r.uri) for r in (await client.list_resources()).resources}
        assert {"skill://using-mesh-mcp", "mesh://catalogue"} <= uris
        guide = await client.read_resource("skill://using-mesh-mcp")
        assert guide.contents[0].text.startswith("---\nname: using-mesh-mcp")
        with pytest.raises(MCPError, match="unknown skill 'nope'"):
            await client.read_resource("skill://nope")
        prompt = await client.get_prompt("remediate_dlq", {"stream": "stream:event:created"})
        assert 'dlq_list(stream="stream:event:created")' in prompt.messages[0].content.text


async def test_catalogue_of_the_sample_workspace(make_settings: Callable[..., Settings], tmp_path: Path) -> None:
    """mesh://catalogue is the static index's catalogue; the sample workspace shows each orphan kind once."""
    import json
    import shutil

    from server.demo.command import sample_workspace_dir

    workspace = tmp_path / "workspace"
    shutil.copytree(sample_workspace_dir(), workspace)
    async with in_process_client(make_settings(workspace=str(workspace))) as client:
        result = await client.read_resource("mesh://catalogue")
        # the document follows the workspace on disk, like list_catalogue
        jobs = workspace / "npm-packages/packages/messaging/src/jobs/events/payloads.ts"
        text = jobs.read_text(encoding="utf-8")
        added = "  ARCHIVE_EVENT = 'events.archive_event',\n  GEOCODE_EVENT ="
        jobs.write_text(text.replace("  GEOCODE_EVENT =", added), encoding="utf-8")
        after = json.loads((await client.read_resource("mesh://catalogue")).contents[0].text)
    archived = next(e for e in after["entries"] if e["value"] == "events.archive_event")
    assert archived["kind"] == "job" and archived["orphan"] and "has_producer" in archived["failing_checks"]
    (content,) = result.contents
    assert content.mime_type == "application/json"
    entries = {(e["kind"], e["value"]): e for e in json.loads(content.text)["entries"]}
    geocode = entries[("job", "events.geocode_event")]
    assert geocode["producers"] >= 1 and geocode["consumers"] >= 1 and not geocode["orphan"]
    assert any("not routed" in r for r in entries[("job", "events.notify_followers")]["reasons"])
    assert any("test" in r for r in entries[("job", "users.send_welcome_email")]["reasons"])
    assert entries[("job", "events.sync_external_calendar")]["orphan"]
    assert not entries[("stream", "stream:event:created")]["orphan"]
    assert not entries[("event", "event.created_by_fallback")]["orphan"]  # produced through the mapping table
