"""analyze_impact and list_catalogue through real MCP client sessions (in-process and stdio subprocess)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import in_process_client, stdio_client


@pytest.fixture
def settings(make_settings, workspace: Path):
    return make_settings(workspace=str(workspace))


@pytest.mark.anyio
async def test_tools_are_listed_read_only(settings):
    async with in_process_client(settings) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    for name in ("analyze_impact", "list_catalogue"):
        ann = tools[name].annotations
        assert (ann.read_only_hint, ann.destructive_hint, ann.idempotent_hint, ann.open_world_hint) == (
            True, False, True, False)
    schema = tools["analyze_impact"].input_schema
    assert schema["required"] == ["target"]
    assert set(schema["properties"]) == {"target", "depth", "include_tests", "detail", "direction", "limit", "offset"}


@pytest.mark.anyio
async def test_analyze_impact_structured_result_and_progress(settings):
    progress: list[tuple[float, float | None]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total))

    async with in_process_client(settings) as client:
        result = await client.call_tool("analyze_impact",
            {"detail": "full", "target": "FALLBACK_CREATE_EVENT", "depth": 2},
                                        progress_callback=on_progress)
        assert not result.is_error
        data = result.structured_content
        assert [(m["kind"], m["value"]) for m in data["matches"]] == [
            ("job", "events.fallback_create_event"), ("event", "event.fallback_create_event_feedback"),
            ("ws_event", "ws.event.fallback_create_event")]
        assert {c["kind"] for c in data["consumers"]} == {"handler", "worker", "post_processor"}
        assert max(f["depth"] for f in data["followups"]) == 2
        assert data["index"]["files"] == 66
        assert "FALLBACK_CREATE_EVENT: 3 match(es)" in result.content[0].text
        assert progress and progress[-1] == (66.0, 66.0)

        again = await client.call_tool("analyze_impact", {"detail": "full", "target": "GEOCODE_EVENTS"})
        assert not again.is_error
        assert again.structured_content["matches"] == []
        assert "GEOCODE_EVENT" in again.structured_content["suggestions"]
        assert again.structured_content["index"]["reparsed"] == 0  # refreshed, nothing changed


@pytest.mark.anyio
async def test_list_catalogue_orphans(settings):
    async with in_process_client(settings) as client:
        result = await client.call_tool("list_catalogue", {"kind": "job", "orphans_only": True})
    assert not result.is_error
    entries = {e["value"]: e["reasons"] for e in result.structured_content["entries"]}
    assert entries["events.sync_calendar"] == ["no producer", "handler SyncCalendarHandler not routed by any worker"]
    assert set(result.structured_content["counts"]) == {"job"}
    assert "orphan" in result.content[0].text


@pytest.mark.anyio
@pytest.mark.parametrize("args", [{"target": ""}, {"target": "X", "depth": 7}, {"target": "X", "depth": "two"}])
async def test_invalid_arguments_are_tool_errors(settings, args):
    async with in_process_client(settings) as client:
        result = await client.call_tool("analyze_impact", args)
    assert result.is_error


@pytest.mark.anyio
async def test_no_workspace_is_a_clear_error(make_settings):
    async with in_process_client(make_settings()) as client:
        result = await client.call_tool("analyze_impact", {"detail": "full", "target": "GEOCODE_EVENT"})
        catalogue = await client.call_tool("list_catalogue", {})
    assert result.is_error and catalogue.is_error
    assert "no workspace is configured" in result.content[0].text and "--workspace" in result.content[0].text


@pytest.mark.anyio
async def test_analyze_impact_over_stdio(mesh_config, workspace: Path, tmp_path: Path):
    config = mesh_config({"workspace": str(workspace), "state_dir": str(tmp_path / "state")})
    async with stdio_client(config) as client:
        result = await client.call_tool("analyze_impact",
            {"detail": "full", "target": "JobMessagingType.GEOCODE_EVENT"})
        assert not result.is_error
        data = result.structured_content
        assert [(m["kind"], m["value"]) for m in data["matches"]] == [("job", "events.geocode_event")]
        assert {(p["kind"], p["file"], p["line"]) for p in data["producers"]} == {
            ("create_job", "ms-event/src/modules/event/event.service.ts", 14)}
        catalogue = await client.call_tool("list_catalogue", {"orphans_only": True})
        assert catalogue.structured_content["orphans"] == 26
    assert (tmp_path / "state" / "static-index.sqlite").is_file()
