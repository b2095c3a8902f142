"""The MCP App and the --format html page in Debian's headless Chromium, fed real tool results.

One test, one browser: a harness page plays the host (tests/js/apps/run.mjs: ui/initialize,
ui/notifications/initialized, then ui/notifications/tool-result with the result exactly as the MCP
client received it), and the app must draw every node, mark the broken hop or dead end, show a
node's file:line, state and next step on a click, expand a folded group, load nothing and call no
tool. Screenshots go to tmp/artifacts/mcp-app/.
"""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from tests.helpers import REPO_ROOT, copy_workspace
from tests.outbox import sim
from tests.outbox.conftest import apply_schema
from tests.pictures.apps_client import ARTIFACTS, apps_client, run_browser, wire
from tools.pictures.view import VIEW_META_KEY

pytestmark = pytest.mark.anyio
HOSTILE = 'ws"]-->x <img src=x onerror=alert(1)>|#%`'


def _seed_failed_job(url: str, r) -> str:
    apply_schema(url)
    with psycopg.connect(url, autocommit=True) as db:
        failed = sim.insert_job(db, age_s=100)
        sim.runner_push_job(db, r, failed)
        sim.worker_take(db, r, failed, "user-queue")
        sim.worker_fail(db, r, failed, "user-queue", "boom in handler")
    return failed


async def test_the_app_draws_real_results_in_chromium(make_settings, make_pg_db, redis_url, redis_client,
                                                      tmp_path: Path) -> None:
    failed = _seed_failed_job(url := make_pg_db(), redis_client)
    flows = copy_workspace(REPO_ROOT / "tests" / "fixtures" / "workspace", tmp_path / "ws")
    sample = copy_workspace(REPO_ROOT / "resources" / "sample_workspace", tmp_path / "sample")
    settings = make_settings(workspace=str(flows), services={"user": {"postgres": url}}, redis={"url": redis_url})
    async with apps_client(settings) as client:
        app = (await client.read_resource("ui://mesh/graph.html")).contents[0].text
        flow = await client.call_tool("flow_map", {"target": "FALLBACK_CREATE_EVENT", "depth": 2})
        flow_full = await client.call_tool("flow_map", {"target": "FALLBACK_CREATE_EVENT", "depth": 2,
                                                        "detail": "full"})
        live = await client.call_tool("flow_map", {"target": "users.send_welcome_email", "depth": 1, "live": True})
        trace = await client.call_tool("trace_job", {"job_id": failed})
        trace_full = await client.call_tool("trace_job", {"job_id": failed, "detail": "full"})
        request = await client.call_tool("trace_request", {"start": f"user:jobs_outbox:{failed}"})
    hostile_ws = copy_workspace(REPO_ROOT / "resources" / "sample_workspace", tmp_path / "hostile")
    (hostile_ws / "ws-service").rename(hostile_ws / HOSTILE)
    async with apps_client(make_settings(workspace=str(hostile_ws))) as client:
        hostile = await client.call_tool("visualize_mesh", {"format": "html"})
    async with apps_client(make_settings(workspace=str(sample))) as client:
        mesh = await client.call_tool("visualize_mesh", {})
        folded = await client.call_tool("visualize_mesh", {"max_services": 2, "format": "json"})
        page = await client.call_tool("visualize_mesh", {"format": "html"})
    results = {"flow-dead-end": flow, "flow-live": live, "trace-broken-hop": trace, "request": request, "mesh": mesh,
               "mesh-folded": folded}
    assert not any(r.is_error for r in results.values()), [r.content[0].text for r in results.values()]
    page_file = tmp_path / "mesh.html"
    page_file.write_text(page.structured_content["html"], encoding="utf-8")
    cases = [{"name": name, "app": app, "result": wire(r)} for name, r in results.items()]
    bare = {k: v for k, v in wire(mesh).items() if k != "_meta"}  # a host that did not negotiate: no view
    cases.append({"name": "mesh-structured", "app": app, "result": bare})
    cases.append({"name": "mesh-page", "file": str(page_file)})
    hostile_file = tmp_path / "hostile.html"
    hostile_file.write_text(hostile.structured_content["html"], encoding="utf-8")
    cases.append({"name": "hostile-page", "file": str(hostile_file)})
    seen = run_browser(cases, tmp_path)

    for name, result in results.items():
        view = result.meta[VIEW_META_KEY]
        drawn = seen[name]
        assert sorted(n["id"] for n in drawn["nodes"]) == sorted(n["id"] for n in view["nodes"]), name
        assert {n["id"] for n in drawn["nodes"] if n["broken"]} == {n["id"] for n in view["nodes"] if n["broken"]}
        assert drawn["edges"] == len(view["edges"]), name
        assert drawn["sent"][:2] == ["ui/initialize", "ui/notifications/initialized"], drawn["sent"]
        assert not [m for m in drawn["sent"] if m.startswith("tools/")]
        assert drawn["requests"] == [] and drawn["problems"] == [], (name, drawn["requests"], drawn["problems"])
        assert "where: " in drawn["panel"] and "state: " in drawn["panel"] and "next: " in drawn["panel"]

    # the flow: every node of the full result drawn, its dead end marked, the click shows its file:line
    full = flow_full.structured_content
    flow_seen = seen["flow-dead-end"]
    assert {n["id"] for n in flow_seen["nodes"]} == {n["id"] for n in full["nodes"]}
    dead = {n["id"] for n in full["nodes"] if any(t["code"] == "dead_end" for t in n["trouble"])}
    assert dead and dead <= {n["id"] for n in flow_seen["nodes"] if n["broken"]}
    clicked = next(n for n in full["nodes"] if n["id"] == flow_seen["clicked"])
    assert clicked["trouble"] and (clicked["file"] is None or f"{clicked['file']}:{clicked['line']}" in
                                   flow_seen["panel"])
    # live states coloured as read: the failed handler's job type in error
    states = {n["id"]: n["state"] for n in seen["flow-live"]["nodes"]}
    assert states == {n["id"]: n["state"] for n in live.meta[VIEW_META_KEY]["nodes"]}
    assert "error" in states.values() and set(states.values()) <= {"ok", "warning", "error", "unknown", "none"}
    # the trace: one node per hop, the verdict's hop (and only it) marked, its next step on a click
    report = trace_full.structured_content
    trace_seen = seen["trace-broken-hop"]
    assert report["verdict"]["code"] == "handler_failed"
    drawn_hops = sorted(n["label"].removeprefix("✖ ") for n in trace_seen["nodes"])
    assert drawn_hops == sorted(h["name"] for h in report["hops"])
    broken = [n for n in trace_seen["nodes"] if n["broken"]]
    assert broken and all(n["label"] == f"✖ {report['verdict']['hop']}" for n in broken)
    assert {n["state"] for n in broken} == {"error"}
    assert report["verdict"]["next_step"][:40] in trace_seen["panel"]
    assert "handler_failed" in trace_seen["verdict"]
    # the mesh: every service, queue and stream of the sample workspace; its trouble marked
    graph = mesh.structured_content
    assert {n["id"] for n in seen["mesh"]["nodes"]} == {n["id"] for n in graph["nodes"]}
    assert {n["id"] for n in seen["mesh"]["nodes"] if n["broken"]} == {n["id"] for n in graph["nodes"] if n["trouble"]}
    assert {"service", "queue", "stream", "websocket"} <= {n["kind"] for n in graph["nodes"]}
    assert {n["id"] for n in seen["mesh-page"]["nodes"]} == {n["id"] for n in graph["nodes"]}
    assert {n["id"] for n in seen["mesh-page"]["nodes"] if n["broken"]} == {
        n["id"] for n in graph["nodes"] if n["trouble"]}
    assert seen["mesh-page"]["requests"] == [] and seen["mesh-page"]["problems"] == []
    structured = seen["mesh-structured"]  # drawn from the structured content alone
    assert {n["id"] for n in structured["nodes"]} == {n["id"] for n in graph["nodes"]}
    assert {n["id"] for n in structured["nodes"] if n["broken"]} == {n["id"] for n in graph["nodes"] if n["trouble"]}
    assert structured["edges"] == len(graph["edges"]) and structured["problems"] == []
    # a repository named like markup stays text: drawn, no element made of it, nothing loaded
    bad = seen["hostile-page"]
    assert {n["id"] for n in bad["nodes"]} == {n["id"] for n in hostile.meta[VIEW_META_KEY]["nodes"]}
    assert bad["markup"] == 0 and bad["requests"] == [] and bad["problems"] == []
    assert any(n["label"].startswith('ws"]-->x <img') for n in bad["nodes"])
    assert all(seen[name]["markup"] == 0 for name in seen)
    # a folded group expands into its members
    fold = next(n for n in folded.structured_content["nodes"] if n["kind"] == "folded")
    expanded = {n["label"] for n in seen["mesh-folded"]["expanded"]}
    assert set(fold["members"]) <= expanded and fold["label"] not in expanded
    assert all((ARTIFACTS / f"{name}.png").stat().st_size > 1000 for name in [*results, "mesh-page"])
