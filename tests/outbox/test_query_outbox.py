"""query_outbox: filters, hints, payload cap, keyset pagination, injection, limits, down service, old schema."""

from __future__ import annotations

import uuid

import psycopg
import pytest

from server.errors import InvalidArgument, NotFound, ServiceUnavailable
from tests.outbox import sim
from tests.outbox.conftest import apply_schema

pytestmark = pytest.mark.anyio

INJECTIONS = [
    "x'; DROP TABLE jobs_outbox; --",
    "' OR '1'='1",
    "\" OR 1=1 --",
    "users.send_welcome_email') UNION SELECT * FROM pg_user --",
    "%s%s%s",
    "{type}",
]

OLDER_SCHEMA = """
CREATE TABLE jobs_outbox (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(), status varchar(20) NOT NULL DEFAULT 'PENDING',
    attempts int NOT NULL DEFAULT 0, "lastError" text, type varchar(100) NOT NULL, emitter varchar(100) NOT NULL,
    target varchar(100) NOT NULL, payload jsonb NOT NULL DEFAULT '{}', scheduled_at timestamp NOT NULL DEFAULT now(),
    created_at timestamp NOT NULL DEFAULT now(), updated_at timestamp NOT NULL DEFAULT now()
);
CREATE TABLE event_queue (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(), status varchar(20) NOT NULL DEFAULT 'PENDING',
    attempts int NOT NULL DEFAULT 0, "lastError" text, type varchar(100) NOT NULL, emitter varchar(100) NOT NULL,
    payload jsonb NOT NULL DEFAULT '{}', version int NOT NULL DEFAULT 1,
    target_services varchar[] NOT NULL DEFAULT '{}', processed_at timestamp,
    created_at timestamp NOT NULL DEFAULT now(), updated_at timestamp NOT NULL DEFAULT now()
);
CREATE TABLE job_audit (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(), job_id varchar(100) NOT NULL UNIQUE, job_type varchar(255) NOT NULL,
    status varchar(20) NOT NULL DEFAULT 'PENDING', worker_id varchar(100), emitter varchar(100),
    current_attempt int NOT NULL DEFAULT 0, started_at timestamp, finished_at timestamp, result_payload jsonb,
    error_message text, error_stack text, created_at timestamp NOT NULL DEFAULT now(),
    updated_at timestamp NOT NULL DEFAULT now()
);
"""
"""The outbox tables before the traceId / traceparent / correlation_id / emitterId migrations."""


async def test_rows_newest_first_with_filters_and_hints(db, r, outbox_settings, tools_for) -> None:
    old = sim.insert_job(db, age_s=3600)
    fresh = sim.insert_job(db, age_s=10)
    other = sim.insert_job(db, type="users.other", age_s=5)
    pushed = sim.insert_job(db, age_s=20)
    sim.runner_push_job(db, r, pushed)
    async with tools_for(outbox_settings()) as tools:
        everything = await tools.query(table="jobs_outbox")
        pending = await tools.query(table="jobs_outbox", status="pending", type="users.send_welcome_email")
        older = await tools.query(table="jobs_outbox", older_than_s=600)
        by_id = await tools.query(table="jobs_outbox", id=pushed)
    assert [row.id for row in everything.rows] == [other, fresh, pushed, old]
    assert [row.id for row in pending.rows] == [fresh, old]
    assert pending.filters == {"status": "PENDING", "type": "users.send_welcome_email"}
    assert [row.id for row in older.rows] == [old]
    rows = {row.id: row for row in everything.rows}
    assert "outbox runner is stopped" in rows[old].hint
    assert "not late yet" in rows[fresh].hint
    assert "no job_audit row" in by_id.rows[0].hint  # COMPLETED = pushed, nobody consumed it
    assert 3500 < rows[old].age_s < 3700
    assert rows[old].columns["target"] == "user-queue" and rows[old].columns["payload"] == {"userId": 1}
    assert everything.next_cursor is None


async def test_job_audit_id_matches_job_id_and_hints_read_the_error(db, r, outbox_settings, tools_for) -> None:
    job_id = sim.insert_job(db)
    sim.runner_push_job(db, r, job_id)
    sim.worker_take(db, r, job_id, "user-queue")
    sim.worker_fail(db, r, job_id, "user-queue", "geocoder timeout")
    async with tools_for(outbox_settings()) as tools:
        audit = await tools.query(table="job_audit", id=job_id)
        events = await tools.query(table="event_queue", type="user:job:outbox:failure")
    assert len(audit.rows) == 1 and audit.rows[0].columns["job_id"] == job_id
    assert "geocoder timeout" in audit.rows[0].hint
    assert audit.rows[0].type == "users.send_welcome_email"
    assert events.rows[0].columns["payload"]["after"]["job_id"] == job_id
    assert events.rows[0].columns["target_services"] == ["user:job:outbox:failure"]


async def test_big_payload_is_cut_with_a_flag(db, r, outbox_settings, tools_for) -> None:
    big = sim.insert_job(db, payload={"blob": "é" * 5000})
    small = sim.insert_job(db, payload={"a": 1}, age_s=1)
    async with tools_for(outbox_settings(limits={"payload_max_bytes": 256})) as tools:
        result = await tools.query(table="jobs_outbox")
    rows = {row.id: row for row in result.rows}
    assert rows[big].truncated and rows[big].truncated_columns == ["payload"]
    text = rows[big].columns["payload"]
    assert isinstance(text, str) and len(text.encode()) <= 256 and text.startswith('{"blob": "éé')
    assert not rows[small].truncated and rows[small].columns["payload"] == {"a": 1}


async def test_keyset_pagination_is_stable_while_rows_arrive(db, r, outbox_settings, tools_for) -> None:
    ids = [sim.insert_job(db, age_s=100 - i) for i in range(25)]  # ids[-1] is the newest
    seen: list[str] = []
    async with tools_for(outbox_settings()) as tools:
        page = await tools.query(table="jobs_outbox", status="PENDING", limit=10)
        seen += [row.id for row in page.rows]
        sim.insert_job(db, age_s=0)  # arrives between pages: must not shift the next pages
        while page.next_cursor:
            page = await tools.query(table="jobs_outbox", status="PENDING", limit=10, cursor=page.next_cursor)
            seen += [row.id for row in page.rows]
        with pytest.raises(InvalidArgument, match="cursor is not valid"):
            await tools.query(table="jobs_outbox", status="FAILED", limit=10, cursor=page.next_cursor or "x")
    assert seen == list(reversed(ids))


async def test_rows_with_equal_created_at_paginate_without_loss(db, r, outbox_settings, tools_for) -> None:
    db.execute("INSERT INTO jobs_outbox (type, emitter, target, created_at) "
               "SELECT 't', 'ms-user', 'q', timestamp '2026-01-01 00:00:00' FROM generate_series(1, 7)")
    async with tools_for(outbox_settings()) as tools:
        seen = []
        page = await tools.query(table="jobs_outbox", limit=3)
        seen += [row.id for row in page.rows]
        while page.next_cursor:
            page = await tools.query(table="jobs_outbox", limit=3, cursor=page.next_cursor)
            seen += [row.id for row in page.rows]
    assert len(seen) == 7 and len(set(seen)) == 7


async def test_injection_attempts_are_data(db, r, outbox_settings, tools_for) -> None:
    sim.insert_job(db)
    async with tools_for(outbox_settings()) as tools:
        for attempt in INJECTIONS:
            result = await tools.query(table="jobs_outbox", type=attempt)
            assert result.rows == []
            audit = await tools.query(table="job_audit", id=attempt)  # job_id is text: a plain miss
            assert audit.rows == []
            with pytest.raises(InvalidArgument, match="not a UUID"):
                await tools.query(table="jobs_outbox", id=attempt)
            with pytest.raises(InvalidArgument, match="unknown status"):
                await tools.query(table="jobs_outbox", status=attempt)
            with pytest.raises(NotFound, match="unknown service"):
                await tools.query(table="jobs_outbox", service=attempt)
            with pytest.raises(InvalidArgument):
                await tools.query(table=attempt)
            with pytest.raises(InvalidArgument, match="cursor"):
                await tools.query(table="jobs_outbox", cursor=attempt)
            assert (await tools.trace_job(attempt)).verdict.code == "not_found"
            assert (await tools.trace_event(attempt, service=None)).verdict.code == "not_found"
            with pytest.raises(NotFound, match="unknown service"):
                await tools.health(attempt)
            with pytest.raises(NotFound, match="unknown service"):
                await tools.trace_job(str(uuid.uuid4()), service=attempt)
    assert db.execute("SELECT count(*) FROM jobs_outbox").fetchone() == (1,)
    assert db.execute("SELECT count(*) FROM pg_tables WHERE tablename IN ('jobs_outbox', 'event_queue', 'job_audit')"
                      ).fetchone() == (3,)


async def test_limits_out_of_range_are_refused(db, r, outbox_settings, tools_for) -> None:
    async with tools_for(outbox_settings(limits={"max_rows": 100})) as tools:
        for bad in (0, -1, 101):
            with pytest.raises(InvalidArgument, match="limit must be between 1 and 100"):
                await tools.query(table="jobs_outbox", limit=bad)
        with pytest.raises(InvalidArgument, match="older_than_s"):
            await tools.query(table="jobs_outbox", older_than_s=-5)
        with pytest.raises(InvalidArgument, match="type must be"):
            await tools.query(table="jobs_outbox", type="x" * 300)
        assert len((await tools.query(table="jobs_outbox", limit=100)).rows) == 0


async def test_all_services_answer_and_the_down_one_is_named(
    make_outbox_db, r, outbox_settings, tools_for, down_dsn
) -> None:
    user, event = make_outbox_db(), make_outbox_db()
    with psycopg.connect(user, autocommit=True) as a, psycopg.connect(event, autocommit=True) as b:
        u1, u2 = sim.insert_job(a, age_s=30), sim.insert_job(a, age_s=10)
        e1, e2 = sim.insert_job(b, age_s=20), sim.insert_job(b, age_s=5)
    settings = outbox_settings(services={"user": {"postgres": user}, "event": {"postgres": event},
                                         "ranking": {"postgres": down_dsn}})
    async with tools_for(settings) as tools:
        first = await tools.query(service=None, table="jobs_outbox", limit=3)
        second = await tools.query(service=None, table="jobs_outbox", limit=3, cursor=first.next_cursor)
        with pytest.raises(ServiceUnavailable, match="ranking"):
            await tools.query(service="ranking", table="jobs_outbox")
    assert [(row.service, row.id) for row in first.rows + second.rows] == [
        ("event", e2), ("user", u2), ("event", e1), ("user", u1)
    ]
    assert second.next_cursor is None
    assert [p.service for p in first.unavailable] == ["ranking"]
    assert str(down_dsn.split("@")[1].split("/")[0]) in first.unavailable[0].error


async def test_older_schema_without_optional_columns(make_pg_db, r, outbox_settings, tools_for) -> None:
    url = make_pg_db()
    apply_schema(url, OLDER_SCHEMA)
    with psycopg.connect(url, autocommit=True) as conn:
        cols = {row[0] for row in conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = 'event_queue'")}
        assert "traceparent" not in cols and "correlation_id" not in cols and "emitterId" not in cols
        job_id = sim.insert_job(conn, age_s=4000)
        event_id = sim.insert_event(conn, age_s=4000)
    async with tools_for(outbox_settings(services={"user": {"postgres": url}})) as tools:
        result = await tools.query(table="event_queue")
        job = await tools.trace_job(job_id)
        event = await tools.trace_event(event_id)
    assert [row.id for row in result.rows] == [event_id]
    assert "traceparent" not in result.rows[0].columns
    assert set(result.missing_columns["user"]) == {"emitterId", "traceId", "traceparent", "correlation_id"}
    assert job.verdict.code == "pending_in_outbox"
    assert event.verdict.code == "event_pending"


async def test_missing_table_is_named(make_pg_db, r, outbox_settings, tools_for) -> None:
    url = make_pg_db()
    async with tools_for(outbox_settings(services={"user": {"postgres": url}})) as tools:
        with pytest.raises(NotFound, match="table 'jobs_outbox' does not exist"):
            await tools.query(table="jobs_outbox")
        report = await tools.trace_job(str(uuid.uuid4()))
    assert report.verdict.code == "not_found"
