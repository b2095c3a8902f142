"""trace_request through real MCP client sessions (in-process and stdio), the CLI and doctor."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from server.doctor import run_doctor
from server.runtime import Runtime
from tests.helpers import REPO_ROOT, in_process_client, stdio_client
from tests.trace_request import saga as sg

pytestmark = pytest.mark.anyio


async def test_in_process_session(dbs, redis_client, saga_settings) -> None:
    s = sg.build(dbs["event"][1], dbs["notification"][1], redis_client)
    async with in_process_client(saga_settings()) as client:
        tool = {t.name: t for t in (await client.list_tools()).tools}["trace_request"]
        result = await client.call_tool("trace_request", {"detail": "full", "correlation_id": s.correlation})
        two = await client.call_tool("trace_request", {"correlation_id": s.correlation, "trace_id": s.trace})
        unknown = await client.call_tool("trace_request", {"trace_id": s.trace, "services": ["nope"]})
    assert tool.annotations.read_only_hint is True and tool.output_schema is not None
    assert not result.is_error
    data = result.structured_content
    assert data["verdict"]["code"] == "in_pel" and len(data["items"]) == 3
    assert data["mermaid"].startswith("flowchart TD")
    assert result.content[0].text.startswith(f"request correlation_id={s.correlation}: in_pel")
    assert two.is_error and "exactly one of" in two.content[0].text
    assert unknown.is_error and "unknown service(s) nope" in unknown.content[0].text


async def test_stdio_session(dbs, redis_client, redis_url, mesh_config) -> None:
    s = sg.build(dbs["event"][1], dbs["notification"][1], redis_client, stuck_ws=False, job_fails=True)
    config = mesh_config({"services": {n: {"postgres": u} for n, (u, _) in dbs.items()}, "redis": {"url": redis_url}})
    async with stdio_client(config) as client:
        result = await client.call_tool("trace_request", {"detail": "full", "trace_id": s.trace})
    assert result.structured_content["verdict"]["code"] == "handler_failed"
    assert [i["id"] for i in result.structured_content["items"]] == [s.ids["created"], s.ids["job"],
                                                                      s.ids["follow_up"]]


def test_cli_json_and_exit_code(dbs, redis_client, redis_url, mesh_config) -> None:
    s = sg.build(dbs["event"][1], dbs["notification"][1], redis_client)
    config = mesh_config({"services": {n: {"postgres": u} for n, (u, _) in dbs.items()}, "redis": {"url": redis_url}})
    out = subprocess.run([sys.executable, "-m", "server.cli", "trace-request", "--config", str(config),
                          "--correlation-id", s.correlation, "--json"], capture_output=True, text=True,
                         cwd=REPO_ROOT, timeout=120)
    assert out.returncode == 1, out.stderr  # the verdict is not ok
    assert json.loads(out.stdout)["verdict"]["code"] == "in_pel"
    both = subprocess.run([sys.executable, "-m", "server.cli", "trace-request", "--config", str(config),
                           "--trace-id", s.trace, "--entity-id", "x"], capture_output=True, text=True,
                          cwd=REPO_ROOT, timeout=60)
    assert both.returncode == 2 and "not allowed with argument" in both.stderr


async def test_doctor_recommends_the_lookup_indexes(dbs, saga_settings) -> None:
    runtime = Runtime(saga_settings())
    try:
        report = await run_doctor(runtime)
    finally:
        await runtime.aclose()
    fixes = [(c.name, c.fix or "") for c in report.checks if c.name.startswith("trace_request_index:")]
    assert all(c.status == "warn" for c in report.checks if c.name.startswith("trace_request_index:"))
    ddl = " ".join(f for n, f in fixes if n.startswith("trace_request_index:event:"))
    assert "CREATE INDEX CONCURRENTLY ON event_queue (correlation_id);" in ddl
    assert "CREATE INDEX CONCURRENTLY ON jobs_outbox ((substr(traceparent, 4, 32)));" in ddl
    # the older schema has no traceparent / correlation_id: nothing recommended on them
    social = " ".join(f for n, f in fixes if n.startswith("trace_request_index:social:"))
    assert "traceparent" not in social and "correlation_id" not in social
