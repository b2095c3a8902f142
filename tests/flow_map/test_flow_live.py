"""flow_map(live=true): the figures drawn equal what was seeded in PostgreSQL and Redis, unreachable
services leave their hops grey and named, and nothing is changed by reading."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import anyio
import psycopg
import pytest
import redis

from server.demo.embedded import free_port
from server.runtime import Runtime
from tests.flow_map.conftest import copy_workspace
from tests.flow_map.mermaid_parser import parse_ok, vertices
from tests.outbox.conftest import apply_schema
from tests.outbox.sim import insert_job
from tests.streams.snapshot import differences, snapshot
from tools.flow_map.model import GroupLive
from tools.flow_map.service import flow_map

JOB = "events.fallback_create_event"
QUEUE = "fallback-event-queue"
STREAM = "stream:ws:jobs-outbox"


def audit(conn: psycopg.Connection, job_type: str, status: str, finished_ago_s: float) -> None:
    conn.execute(
        """INSERT INTO job_audit (job_id, job_type, status, emitter, finished_at, created_at, updated_at)
           VALUES (gen_random_uuid()::text, %s, %s, 'ms-event', now() - make_interval(secs => %s),
                   now() - make_interval(secs => %s), now() - make_interval(secs => %s))""",
        (job_type, status, finished_ago_s, finished_ago_s + 5, finished_ago_s))


@pytest.fixture
def seeded(make_pg_db: Callable[[], str], redis_client: redis.Redis) -> dict[str, str]:
    event_db, user_db = make_pg_db(), make_pg_db()
    for url in (event_db, user_db):
        apply_schema(url)
    with psycopg.connect(event_db, autocommit=True) as conn:
        insert_job(conn, type=JOB, target=QUEUE, status="PENDING", age_s=3600)
        insert_job(conn, type=JOB, target=QUEUE, status="PENDING", age_s=5)
        insert_job(conn, type=JOB, target=QUEUE, status="PROCESSING", age_s=20)
        for _ in range(3):
            insert_job(conn, type=JOB, target=QUEUE, status="COMPLETED", age_s=100)
        insert_job(conn, type=JOB, target=QUEUE, status="FAILED", age_s=50, last_error="boom")
        for _ in range(5):
            insert_job(conn, type="events.geocode_event", target="event-queue", status="PENDING", age_s=9999)
        audit(conn, JOB, "FAILED", 600)
        audit(conn, JOB, "FAILED", 1200)
        audit(conn, JOB, "FAILED", 7200)  # older than an hour: not counted
        audit(conn, JOB, "COMPLETED", 60)
        for _ in range(4):
            audit(conn, "events.geocode_event", "FAILED", 60)
    with psycopg.connect(user_db, autocommit=True) as conn:
        insert_job(conn, type=JOB, target=QUEUE, status="PENDING", age_s=1)
    r = redis_client
    r.lpush(f"bull:{QUEUE}:wait", "a", "b", "c")
    r.lpush(f"bull:{QUEUE}:active", "d")
    r.zadd(f"bull:{QUEUE}:delayed", {"e": 1, "f": 2})
    r.zadd(f"bull:{QUEUE}:failed", {"g": 1, "h": 2, "i": 3, "j": 4})
    r.hset(f"bull:{QUEUE}:meta", "opts.maxLenEvents", "10000")
    for i in range(5):
        r.xadd(STREAM, {"id": f"e{i}", "type": "event.fallback_create_event_feedback", "payload": "{}"})
    r.xgroup_create(STREAM, "WsJobsOutbox", id="0")
    r.xreadgroup("WsJobsOutbox", "c1", {STREAM: ">"}, count=2)  # the consumer's read, seeding the PEL
    r.xadd(f"{STREAM}-dlq", {"messageId": "1-0", "error": "bad", "payload": json.dumps({"id": "x"}),
                            "timestamp": str(int(time.time() * 1000))})
    return {"event": event_db, "user": user_db}


def node(result, **where):
    return next(n for n in result.nodes if all(getattr(n, k) == v for k, v in where.items()))


@pytest.mark.anyio
async def test_live_numbers_equal_what_was_seeded(seeded, redis_url, redis_client, make_settings, make_index,
                                                  tmp_path: Path):
    svc = make_index(copy_workspace("workspace", tmp_path / "ws"))
    settings = make_settings(services={name: {"postgres": url} for name, url in seeded.items()},
                             redis={"url": redis_url})
    before = snapshot(redis_client)
    runtime = Runtime(settings)
    try:
        result = await flow_map(svc, "FALLBACK_CREATE_EVENT", 3, True, "LR", runtime)
    finally:
        await runtime.aclose()
    assert differences(before, snapshot(redis_client)) == []
    assert result.live and result.unavailable == []

    job = node(result, kind="job", value=JOB)
    assert job.live.by_service == {
        "event": {"PENDING": 2, "PROCESSING": 1, "COMPLETED": 3, "FAILED": 1, "AUDIT_FAILED_1H": 2},
        "user": {"PENDING": 1}}
    assert job.live.counts == {"PENDING": 3, "PROCESSING": 1, "COMPLETED": 3, "FAILED": 1, "AUDIT_FAILED_1H": 2}
    assert {"pending_in_outbox", "handler_failed"} <= set(job.live.verdicts) and job.live.status == "error"

    queue = node(result, kind="queue", value=QUEUE)
    assert queue.live.counts == {"waiting": 3, "active": 1, "delayed": 2, "failed": 4}
    assert "handler_failed" in queue.live.verdicts

    stream = node(result, kind="stream", value=STREAM)
    assert stream.live.counts == {"length": 5, "dead_letters": 1}
    assert "in_dlq" in stream.live.verdicts and stream.live.status == "error"

    consumer = node(result, symbol="WsJobOutboxPostProcessor")
    (group,) = consumer.live.groups
    assert group == GroupLive(group="WsJobsOutbox", consumers=1, lag=3, pending=2,
                              oldest_pending_idle_ms=group.oldest_pending_idle_ms, dead_consumers=[])
    assert group.oldest_pending_idle_ms is not None
    assert consumer.live.sentence.startswith("lag 3 · pending 2")

    feedback = node(result, kind="event", value="event.fallback_create_event_feedback")
    assert feedback.live.counts == {} and feedback.live.status == "ok"

    (parsed,) = parse_ok([result.mermaid])
    seen = vertices(parsed)
    assert "error" in seen[job.id]["classes"]
    assert "waiting 3 · active 1 · delayed 2 · failed 4" in seen[queue.id]["label"]
    assert "ok" in seen[feedback.id]["classes"]
    assert result.mermaid_bytes <= 4096
    assert "live error" in result.summary_text()
    assert "PENDING 3 · PROCESSING 1 · COMPLETED 3 · FAILED 1\njob_audit FAILED last hour 2" in seen[job.id]["label"]
    dead_end = node(result, kind="event", value="event:job:outbox:failure")
    assert "deadend" in seen[dead_end.id]["classes"] and "ok" not in seen[dead_end.id]["classes"]


@pytest.mark.anyio
async def test_unreachable_services_leave_hops_grey_and_named(make_settings, make_index, tmp_path: Path):
    svc = make_index(copy_workspace("workspace", tmp_path / "ws"))
    settings = make_settings(
        services={"event": {"postgres": f"postgresql://postgres@127.0.0.1:{free_port()}/nothing"}},
        redis={"url": f"redis://127.0.0.1:{free_port()}/0"}, limits={"connect_timeout_s": 1.0})
    runtime = Runtime(settings)
    try:
        with anyio.fail_after(30):
            result = await flow_map(svc, "FALLBACK_CREATE_EVENT", 3, True, "LR", runtime)
    finally:
        await runtime.aclose()
    assert [p.service for p in result.unavailable] == ["event", "redis"]
    assert all(p.error for p in result.unavailable)
    job = node(result, kind="job", value=JOB)
    assert job.live.status == "unknown" and job.live.unavailable == ["event"]
    for kind in ("queue", "stream"):
        hop = node(result, kind=kind)
        assert hop.live.status == "unknown" and hop.live.unavailable == ["redis"]
    (parsed,) = parse_ok([result.mermaid])
    seen = vertices(parsed)
    assert "grey" in seen[job.id]["classes"] and "ok" not in seen[job.id]["classes"]
    assert any("could not be read" in n for n in result.notes)
