"""The four tools through real MCP client sessions: in-process and a stdio subprocess."""

from __future__ import annotations

import pytest

from tests.helpers import in_process_client, stdio_client
from tests.outbox import sim

pytestmark = pytest.mark.anyio

TOOLS = ("query_outbox", "outbox_health", "trace_job", "trace_event")


async def test_tools_are_listed_read_only_with_schemas(outbox_settings) -> None:
    async with in_process_client(outbox_settings(limits={"max_rows": 200})) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
    for name in TOOLS:
        tool = listed[name]
        assert tool.annotations.read_only_hint is True and tool.annotations.destructive_hint is False
        assert tool.annotations.open_world_hint is True
        assert tool.output_schema is not None
    limit = listed["query_outbox"].input_schema["properties"]["limit"]
    assert limit["maximum"] == 200 and limit["minimum"] == 1
    assert listed["query_outbox"].input_schema["required"] == ["table"]
    assert listed["trace_job"].input_schema["required"] == ["job_id"]


async def test_in_process_diagnosis_round(db, r, outbox_settings) -> None:
    job_id = sim.insert_job(db, age_s=900)
    sim.runner_push_job(db, r, job_id, pushed_age_s=800)
    event_id = sim.insert_event(db)
    (stream, entry), = sim.runner_push_event(db, r, event_id)
    sim.ensure_group(r, stream, "pp-social")
    sim.consumer_read(r, stream, "pp-social", "social-1")
    sim.consumer_dead_letter(r, stream, "pp-social", entry, "ValidationError: missing userId")
    async with in_process_client(outbox_settings()) as client:
        health = await client.call_tool("outbox_health", {})
        rows = await client.call_tool("query_outbox", {"table": "jobs_outbox", "status": "COMPLETED"})
        job = await client.call_tool("trace_job", {"detail": "full", "job_id": job_id})
        event = await client.call_tool("trace_event", {"detail": "full", "event_id": event_id, "service": "user"})
    assert not health.is_error and health.structured_content["services"][0]["service"] == "user"
    assert "outbox health" in health.content[0].text
    assert rows.structured_content["rows"][0]["id"] == job_id
    assert "no job_audit row" in rows.structured_content["rows"][0]["hint"]
    assert job.structured_content["verdict"]["code"] == "pushed_not_consumed"
    assert job.content[0].text.startswith(f"job {job_id}: pushed_not_consumed")
    assert event.structured_content["verdict"]["code"] == "in_dlq"
    groups = [h for h in event.structured_content["hops"] if h["name"] == "group"]
    assert groups[0]["delivery"]["dead_letters"][0]["error"] == "ValidationError: missing userId"


async def test_errors_are_tool_errors_with_a_clear_message(db, r, outbox_db, outbox_settings, down_dsn) -> None:
    settings = outbox_settings(services={"user": {"postgres": outbox_db}, "ranking": {"postgres": down_dsn}})
    async with in_process_client(settings) as client:
        bad_limit = await client.call_tool("query_outbox", {"table": "jobs_outbox", "limit": 100_000})
        bad_table = await client.call_tool("query_outbox", {"table": "users; DROP TABLE jobs_outbox"})
        bad_status = await client.call_tool("query_outbox", {"table": "jobs_outbox", "status": "DONE"})
        unknown = await client.call_tool("trace_job", {"detail": "full", "job_id": "x", "service": "nope"})
        down = await client.call_tool("query_outbox", {"table": "jobs_outbox", "service": "ranking"})
        partial = await client.call_tool("outbox_health", {})
    assert bad_limit.is_error and "limit" in bad_limit.content[0].text
    assert bad_table.is_error and "table" in bad_table.content[0].text
    assert bad_status.is_error and "unknown status 'DONE'" in bad_status.content[0].text
    assert unknown.is_error and "unknown service 'nope'" in unknown.content[0].text
    assert down.is_error and "PostgreSQL of service 'ranking' is unavailable" in down.content[0].text
    assert "Traceback" not in down.content[0].text
    assert not partial.is_error
    assert "ranking: UNAVAILABLE" in partial.content[0].text
    assert db.execute("SELECT count(*) FROM jobs_outbox").fetchone() == (0,)


async def test_stdio_subprocess(db, r, outbox_db, redis_url, mesh_config, down_dsn) -> None:
    job_id = sim.insert_job(db, age_s=100)
    sim.runner_push_job(db, r, job_id)
    sim.worker_take(db, r, job_id, "user-queue")
    sim.worker_fail(db, r, job_id, "user-queue", "boom in handler")
    config = mesh_config({"services": {"user": {"postgres": outbox_db}, "ranking": {"postgres": down_dsn}},
                          "redis": {"url": redis_url}})
    async with stdio_client(config) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        job = await client.call_tool("trace_job", {"detail": "full", "job_id": job_id})
        rows = await client.call_tool("query_outbox", {"table": "job_audit", "status": "FAILED"})
    assert set(TOOLS) <= names
    assert job.structured_content["verdict"]["code"] == "handler_failed"
    assert job.structured_content["service"] == "user"
    assert [p["service"] for p in job.structured_content["unavailable"]] == ["ranking"]
    assert rows.structured_content["rows"][0]["columns"]["error_message"] == "boom in handler"
    assert [p["service"] for p in rows.structured_content["unavailable"]] == ["ranking"]
