"""visualize_mesh and `mesh-mcp graph` over the sample workspace, the app resource, and hosts without MCP Apps.

Real MCP sessions (in-process) and the real command line; pictures parsed by the real Mermaid parser.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client

from server.app import build_server
from server.cli import main
from tests.flow_map.mermaid_parser import decode, edges, parse_ok, vertices
from tests.helpers import REPO_ROOT, copy_workspace, in_process_client, stdio_client
from tests.pictures.apps_client import apps_client
from tools.pictures.app import APP_TOOLS, APP_URI
from tools.pictures.view import VIEW_META_KEY

pytestmark = pytest.mark.anyio
SAMPLE = REPO_ROOT / "resources" / "sample_workspace"
SERVICES = {"ms-event", "npm-packages", "post-processors-runner", "workers-runners", "ws-service"}


@pytest.fixture
def sample(tmp_path: Path) -> Path:
    return copy_workspace(SAMPLE, tmp_path / "sample")


def _by_label(graph: dict) -> dict[str, dict]:
    return {n["label"]: n for n in graph["nodes"]}


def _edge_set(graph: dict) -> set[tuple[str, str]]:
    label = {n["id"]: n["label"] for n in graph["nodes"]}
    return {(label[e["source"]], label[e["target"]]) for e in graph["edges"]}


async def test_the_whole_mesh_of_the_sample_workspace(make_settings, sample: Path) -> None:
    async with in_process_client(make_settings(workspace=str(sample))) as client:
        tool = next(t for t in (await client.list_tools()).tools if t.name == "visualize_mesh")
        whole = await client.call_tool("visualize_mesh", {})
        zoom = await client.call_tool("visualize_mesh", {"service": "ws-service", "format": "json"})
        folded = await client.call_tool("visualize_mesh", {"max_services": 2, "format": "json"})
        bad = [await client.call_tool("visualize_mesh", args) for args in (
            {"service": "nope-service"}, {"max_services": 0}, {"format": "svg"}, {"colour": "red"})]
    assert set(tool.input_schema["properties"]) == {"format", "service", "max_services"}
    assert tool.annotations.read_only_hint is True and tool.meta["ui"]["resourceUri"] == APP_URI
    graph = whole.structured_content
    assert set(graph["services"]) == SERVICES and graph["counts"]["services"] == 5
    nodes = _by_label(graph)
    assert {"queue event-queue", "queue fallback-event-queue", "queue user-queue", "stream stream:event:created",
            "websocket clients"} <= set(nodes)
    assert _edge_set(graph) >= {
        ("ms-event", "queue event-queue"), ("post-processors-runner", "queue event-queue"),
        ("queue event-queue", "workers-runners"), ("ms-event", "stream stream:event:created"),
        ("stream stream:event:created", "ws-service"), ("stream stream:event:created", "post-processors-runner"),
        ("npm-packages", "websocket clients")}
    assert "no worker listens" in nodes["queue user-queue"]["trouble"]
    assert any("no consumer group" in t for t in nodes["stream stream:event:job:outbox:failure"]["trouble"])
    assert not nodes["queue event-queue"]["trouble"]
    assert "no gRPC" in graph["grpc"]
    text = whole.content[0].text
    assert "```mermaid" in text and graph["mermaid"].strip() in text and "gRPC" in text
    assert VIEW_META_KEY not in (whole.meta or {})  # this client did not negotiate MCP Apps
    (picture,) = parse_ok([graph["mermaid"]])
    drawn = vertices(picture)
    assert {n["id"] for n in graph["nodes"]} == set(drawn)
    assert {(e["source"], e["target"]) for e in graph["edges"]} == set(edges(picture))
    broken = {v for v, d in drawn.items() if "broken" in d["classes"]}
    assert {n["id"] for n in graph["nodes"] if n["trouble"]} == broken
    # zoom: the service, its routes, the services on them; the rest counted in a note
    z = zoom.structured_content
    assert z["service"] == "ws-service" and z["mermaid"] is None and z["html"] is None
    assert {n["label"] for n in z["nodes"] if n["kind"] != "service"} == {"stream stream:event:created"}
    assert {n["label"] for n in z["nodes"] if n["kind"] == "service"} == {
        "ws-service", "post-processors-runner", "ms-event", "workers-runners"}
    assert any(e["types"] == ["event.created"] or "event.created" in e["label"] for e in z["edges"])
    assert next(n for n in z["nodes"] if n["label"] == "ws-service")["sites"]
    assert "left out" in z["notes"][0]
    # folding: the busiest two services kept, the other three in one node with their edges
    f = folded.structured_content
    fold = next(n for n in f["nodes"] if n["kind"] == "folded" and n["name"] == "services")
    kept = {n["label"] for n in f["nodes"] if n["kind"] == "service"}
    assert len(kept) == 2 and set(fold["members"]) == SERVICES - kept
    # routes beyond 2 * max_services fold too (troubled ones kept first); nothing disappears from the counts
    route_folds = [n for n in f["nodes"] if n["kind"] == "folded" and n["name"] != "services"]
    routes = [n for n in f["nodes"] if n["kind"] in ("queue", "stream", "websocket")]
    assert len(routes) == 4 and f["folded"] == 3 + sum(len(n["members"]) for n in route_folds)
    assert len(routes) + sum(len(n["members"]) for n in route_folds) == len(graph["nodes"]) - 5
    assert fold["label"] == "+3 more services" and any(fold["id"] in (e["source"], e["target"]) for e in f["edges"])
    messages = [b.content[0].text for b in bad]
    assert all(b.is_error for b in bad)
    assert "'nope-service' is not a service of the workspace" in messages[0] and "ws-service" in messages[0]
    assert "'max_services'" in messages[1] and "'format'" in messages[2]
    assert "'colour' is not a parameter of visualize_mesh" in messages[3]


async def test_hostile_names_stay_labels(make_settings, tmp_path: Path) -> None:
    ws = copy_workspace(SAMPLE, tmp_path / "sample")
    hostile = 'ws"]-->x <img src=x onerror=alert(1)>|#%`'
    (ws / "ws-service").rename(ws / hostile)
    async with in_process_client(make_settings(workspace=str(ws))) as client:
        mesh = await client.call_tool("visualize_mesh", {})
        page = await client.call_tool("visualize_mesh", {"format": "html", "service": hostile})
    graph = mesh.structured_content
    assert hostile in graph["services"]
    (picture,) = parse_ok([graph["mermaid"]])
    node = next(n for n in graph["nodes"] if n["name"] == hostile)
    assert decode(vertices(picture)[node["id"]]["label"]) == hostile
    html = page.structured_content["html"]
    assert "<img" not in html.split('id="mesh-data">', 1)[1] and "onerror=alert(1)" in html  # inside JSON only
    data = json.loads(re.search(r'id="mesh-data">(.*?)</script>', html, re.S).group(1))
    assert hostile in {n["label"] for n in data["nodes"]}


async def test_the_app_resource_and_hosts_without_apps(make_settings, sample: Path) -> None:
    settings = make_settings(workspace=str(sample))
    server = build_server(settings)  # one server, two clients: the same index for both
    async with apps_client(settings, server) as client:
        listed = {r.uri: r for r in (await client.list_resources()).resources}
        tools = {t.name: t for t in (await client.list_tools()).tools}
        (content,) = (await client.read_resource(APP_URI)).contents
        with_app = await client.call_tool("flow_map", {"target": "event.created"})
        assert client.server_capabilities.extensions["io.modelcontextprotocol/ui"] == {}
    async with Client(server, cache=None) as client:
        without = await client.call_tool("flow_map", {"target": "event.created"})
    assert APP_URI in listed and listed[APP_URI].mime_type == "text/html;profile=mcp-app"
    assert {name for name, t in tools.items() if (t.meta or {}).get("ui", {}).get("resourceUri") == APP_URI} == set(
        APP_TOOLS)
    assert content.mime_type == "text/html;profile=mcp-app"
    html = content.text
    size = len(html.encode())
    assert size < 60_000, size  # measured: about 12 KB
    csp = content.meta["ui"]["csp"]
    assert all(v == [] for v in csp.values()) and set(csp) >= {"connectDomains", "resourceDomains"}
    meta_csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', html).group(1)
    assert "default-src 'none'" in meta_csp and "connect-src 'none'" in meta_csp and "http" not in meta_csp
    # it only reads: no tool call, no remediation, no approval token, nothing fetched
    lowered = html.lower()
    for word in ("apply_remediation", "propose_remediation", "tools/call", "token", "approve", "fetch(",
                 "xmlhttprequest", "websocket(", "src=\"http", "href=\"http"):
        assert word not in lowered, word
    # hosts without MCP Apps: the same text and structured content, no view
    assert without.content == with_app.content and without.structured_content == with_app.structured_content
    assert VIEW_META_KEY in with_app.meta and VIEW_META_KEY not in (without.meta or {})
    view = with_app.meta[VIEW_META_KEY]
    assert view["kind"] == "flow" and view["nodes"] and view["edges"]


def test_graph_command(tmp_path: Path, capsys, mesh_config, sample: Path) -> None:
    config = mesh_config({"workspace": str(sample), "state_dir": str(tmp_path / "state")})
    assert main(["graph", "--config", str(config)]) == 0
    plain = capsys.readouterr().out
    assert plain.startswith("flowchart LR\n") and "%% gRPC: no gRPC edges" in plain
    parse_ok([plain])
    assert main(["graph", "--config", str(config), "--format", "json", "--service", "ms-event"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["service"] == "ms-event" and data["nodes"]
    assert main(["graph", "--config", str(config), "--service", "nope"]) == 1
    assert "is not a service" in capsys.readouterr().out
    assert main(["graph", "--config", str(config), "--max-services", "0"]) == 2
    marker = tmp_path / "opened"
    browser = tmp_path / "browser.sh"
    browser.write_text(f'#!/bin/sh\necho "$1" > {marker}\n', encoding="utf-8")
    browser.chmod(browser.stat().st_mode | stat.S_IEXEC)
    out = tmp_path / "mesh.html"
    # a process each: webbrowser reads BROWSER once per process; no DISPLAY and an empty PATH: no other browser
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    graph = [sys.executable, "-m", "server.cli", "graph", "--config", str(config), "--open"]
    opened = subprocess.run([*graph, "--out", str(out)], capture_output=True, text=True, timeout=120, check=False,
                            cwd=REPO_ROOT, env={**env, "BROWSER": f"{browser} %s"})
    assert opened.returncode == 0 and opened.stdout.strip() == str(out), opened.stderr
    assert marker.read_text().strip() == out.resolve().as_uri() and "mesh-data" in out.read_text()
    none = subprocess.run(graph, capture_output=True, text=True, timeout=120, check=False, cwd=REPO_ROOT,
                          env={**env, "BROWSER": f"{tmp_path / 'no-such-browser'} %s", "PATH": str(tmp_path)})
    assert none.returncode == 0, none.stderr
    assert "no browser could be opened" in none.stdout and (tmp_path / "state" / "mesh.html").is_file()


async def test_the_app_over_stdio(mesh_config, tmp_path: Path, sample: Path) -> None:
    config = mesh_config({"workspace": str(sample), "state_dir": str(tmp_path / "state")})
    async with stdio_client(config) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        (content,) = (await client.read_resource(APP_URI)).contents
        mesh = await client.call_tool("visualize_mesh", {"format": "json"})
    assert all(tools[name].meta["ui"]["resourceUri"] == APP_URI for name in APP_TOOLS)
    assert content.mime_type == "text/html;profile=mcp-app" and "ui/initialize" in content.text
    assert not mesh.is_error and set(mesh.structured_content["services"]) == SERVICES
