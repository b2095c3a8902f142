"""flow_map, mesh://flow/{target} and the trace pictures through real MCP client sessions."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest
from mcp.shared.exceptions import MCPError

from tests.flow_map.conftest import copy_workspace
from tests.flow_map.mermaid_parser import parse_ok, vertices
from tests.helpers import in_process_client, stdio_client
from tests.outbox import sim
from tests.outbox.conftest import apply_schema

pytestmark = pytest.mark.anyio


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    return copy_workspace("workspace", tmp_path / "ws")


async def test_flow_map_tool_and_resource_in_process(make_settings, workspace: Path) -> None:
    async with in_process_client(make_settings(workspace=str(workspace))) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        tool = tools["flow_map"]
        assert set(tool.input_schema["properties"]) == {"target", "depth", "live", "direction", "detail"}
        assert tool.input_schema["required"] == ["target"]
        assert tool.annotations.read_only_hint is True and tool.annotations.destructive_hint is False
        result = await client.call_tool("flow_map", {"detail": "full", "target": "FALLBACK_CREATE_EVENT", "depth": 2})
        bad = [
            await client.call_tool("flow_map", {"detail": "full", "target": "GEOCODE_EVENT", "colour": "red"}),
            await client.call_tool("flow_map", {"detail": "full", "target": "GEOCODE_EVENT", "depth": 9}),
            await client.call_tool("flow_map", {"detail": "full", "target": "GEOCODE_EVENT", "direction": "UP"}),
            await client.call_tool("flow_map", {"detail": "full", "target": "GEOCODE_EVENTS"}),
            await client.call_tool("flow_map", {"detail": "full"}),
        ]
        templates = (await client.list_resource_templates()).resource_templates
        resource = await client.read_resource("mesh://flow/FALLBACK_CREATE_EVENT")
        stream = await client.read_resource("mesh://flow/stream%3Aws%3Ajobs-outbox")
        with pytest.raises(MCPError) as unknown:
            await client.read_resource("mesh://flow/NOPE_NOTHING")
    assert not result.is_error
    data = result.structured_content
    assert data["depth"] == 2 and data["live"] is False and data["mermaid_bytes"] <= 4096
    assert {m["kind"] for m in data["matches"]} == {"job", "event", "ws_event"}
    text = result.content[0].text
    assert data["mermaid"].strip() in text and "dead end" in text
    assert data["related_skills"] and all(r["uri"].startswith("skill://") for r in data["related_skills"])
    messages = [b.content[0].text for b in bad]
    assert all(b.is_error for b in bad)
    assert "'colour' is not a parameter of flow_map" in messages[0]
    assert "'depth'" in messages[1] and "'direction'" in messages[2]
    assert "closest names" in messages[3] and "GEOCODE_EVENT" in messages[3]
    assert "'target' is required" in messages[4]
    template = next(t for t in templates if t.uri_template == "mesh://flow/{target}")
    assert template.mime_type == "text/vnd.mermaid"
    (content,) = resource.contents
    assert content.mime_type == "text/vnd.mermaid"
    (stream_content,) = stream.contents
    assert "stream stream:ws:jobs-outbox" in stream_content.text
    assert "matches no job" in str(unknown.value)
    parsed = parse_ok([data["mermaid"], content.text, stream_content.text])
    assert {n["id"] for n in data["nodes"]} <= set(vertices(parsed[0]))


async def test_trace_results_carry_a_picture_with_the_verdict_hop_marked(make_settings, make_pg_db, redis_url,
                                                                        redis_client, workspace: Path) -> None:
    r = redis_client
    url = make_pg_db()
    apply_schema(url)
    with psycopg.connect(url, autocommit=True) as db:
        failed = sim.insert_job(db, age_s=100)
        sim.runner_push_job(db, r, failed)
        sim.worker_take(db, r, failed, "user-queue")
        sim.worker_fail(db, r, failed, "user-queue", "boom in handler")
        waiting = sim.insert_job(db, age_s=900)
        sim.runner_push_job(db, r, waiting, pushed_age_s=800)
        event_id = sim.insert_event(db)
        (stream, entry), = sim.runner_push_event(db, r, event_id)
        sim.ensure_group(r, stream, "pp-social")
        sim.consumer_read(r, stream, "pp-social", "social-1")
        sim.consumer_dead_letter(r, stream, "pp-social", entry, "ValidationError: missing userId")
    settings = make_settings(workspace=str(workspace), services={"user": {"postgres": url}}, redis={"url": redis_url})
    async with in_process_client(settings) as client:
        results = [await client.call_tool("trace_job", {"detail": "full", "job_id": failed}),
                   await client.call_tool("trace_job", {"detail": "full", "job_id": waiting}),
                   await client.call_tool("trace_event", {"detail": "full", "event_id": event_id})]
    texts = [res.structured_content["mermaid"] for res in results]
    parsed = parse_ok(texts)
    for res, picture in zip(results, parsed, strict=True):
        data = res.structured_content
        seen = vertices(picture)
        hops = [v for v in seen.values() if not v["id"].startswith("lg")]
        assert len(hops) == len(data["hops"])
        assert [h["label"].split("\n")[0] for h in hops] == [h["name"] for h in data["hops"]]
        code = data["verdict"]["code"]
        assert code != "ok"
        broken = [h for h in hops if "broken" in h["classes"]]
        assert broken and all(h["label"].split("\n")[0] == data["verdict"]["hop"] for h in broken)
        assert all(f"verdict {code}" in h["label"] for h in broken)
        assert "```mermaid" in res.content[0].text
    assert [res.structured_content["verdict"]["code"] for res in results] == [
        "handler_failed", "pushed_not_consumed", "in_dlq"]


async def test_flow_map_over_stdio(mesh_config, workspace: Path) -> None:
    config = mesh_config({"workspace": str(workspace)})
    async with stdio_client(config) as client:
        result = await client.call_tool("flow_map", {"detail": "full", "target": "EVENT_ARCHIVED", "direction": "TB"})
        resource = await client.read_resource("mesh://flow/EVENT_ARCHIVED")
    assert not result.is_error
    data = result.structured_content
    assert data["mermaid"].startswith("flowchart TB")
    dead = [n for n in data["nodes"] if n["kind"] == "event" and n["value"] == "event.archived"]
    assert [t["code"] for t in dead[0]["trouble"]] == ["dead_end"]
    parse_ok([data["mermaid"], resource.contents[0].text])
