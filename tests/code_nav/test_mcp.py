"""The code-navigation tools through real MCP sessions: in-process and a stdio subprocess."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import in_process_client, render_toml, stdio_client

NAV_TOOLS = ("smart_search", "find_dependents", "analyze_grpc", "search_docs")


@pytest.mark.anyio
async def test_listed_read_only_with_the_teams_argument_names(nav_settings):
    async with in_process_client(nav_settings) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        for name in NAV_TOOLS:
            ann = tools[name].annotations
            assert (ann.read_only_hint, ann.destructive_hint, ann.idempotent_hint, ann.open_world_hint) == (
                True, False, True, False)
            assert tools[name].title and len(tools[name].description or "") < 400
        assert set(tools["smart_search"].input_schema["properties"]) == {
            "query", "scope", "include_body", "fuzzy", "limit", "offset"}
        assert set(tools["find_dependents"].input_schema["properties"]) == {
            "target", "granularity", "include_tests", "limit", "offset"}
        assert set(tools["analyze_grpc"].input_schema["properties"]) == {"target", "base", "include_tests"}
        assert set(tools["search_docs"].input_schema["properties"]) == {"query", "max_sections"}
        bad = await client.call_tool("smart_search", {"query": "x", "regex": True})
        assert bad.is_error and "'regex' is not a parameter of smart_search" in bad.content[0].text


@pytest.mark.anyio
async def test_each_tool_in_process(nav_settings):
    async with in_process_client(nav_settings) as client:
        r = await client.call_tool("smart_search", {"query": "EventServiceClient", "limit": 1})
        assert not r.is_error and r.structured_content["hits"][0]["kind"] == "interface"
        assert "EventServiceClient" in r.content[0].text
        r = await client.call_tool("find_dependents", {"target": "@volontariapp/contracts-nest",
                                                       "granularity": "package"})
        assert [d["satisfied"] for d in r.structured_content["declaring"]] == [True, False]
        assert "EXCLUDES 2.3.0" in r.content[0].text
        r = await client.call_tool("analyze_grpc", {"target": "EventService.CreateEvent"})
        rpc = r.structured_content["rpcs"][0]
        assert rpc["handlers"][0]["at"]["symbol"] == "EventCommandController.createEvent"
        assert "writes fallback events.fallback_create_event" in r.content[0].text
        r = await client.call_tool("search_docs", {"query": "fallback", "max_sections": 1})
        assert r.structured_content["sections"][0]["file"] == "docs/runbooks/fallback-jobs.md"
        r = await client.call_tool("analyze_impact", {"target": "POST /api/v1/events"})  # summary shape
        hops = r.structured_content["request_map"]["hops"]
        assert hops[0]["kind"] == "http_route" and any(h["kind"] == "ws_message" for h in hops)
        assert "grpc_handler EventService.CreateEvent" in r.content[0].text
        r = await client.call_tool("flow_map", {"target": "POST /api/v1/events", "detail": "full"})
        assert not r.is_error and "http_route" in {n["kind"] for n in r.structured_content["nodes"]}
        r = await client.call_tool("analyze_grpc", {"target": "EventService", "base": "--exec=x"})
        assert r.is_error and "not a git revision" in r.content[0].text


@pytest.mark.anyio
async def test_each_tool_over_stdio(nav_root: Path, tmp_path: Path):
    config = tmp_path / "mesh.toml"
    config.write_text(render_toml({"workspace": str(nav_root), "state_dir": str(tmp_path / "state")}))
    async with stdio_client(config) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert set(NAV_TOOLS) <= names
        r = await client.call_tool("smart_search", {"query": "NotificationController", "scope": "ms-notification"})
        assert r.structured_content["hits"][0]["file"] == "ms-notification/src/controllers/notification.controller.ts"
        r = await client.call_tool("find_dependents", {"target": "EventServiceClient"})
        assert len(r.structured_content["importers"]) == 2
        r = await client.call_tool("analyze_grpc", {"target": "NotificationService"})
        assert {h["method"] for h in r.structured_content["rpcs"][0]["handlers"]} == {"sendDigest", "SendDigest"}
        r = await client.call_tool("search_docs", {"query": "gateway"})
        assert r.structured_content["sections"][0]["file"] == "api-gateway/docs/README.md"
