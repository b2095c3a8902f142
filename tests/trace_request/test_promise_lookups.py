"""The SQL lookups of trace_request (tools/trace_request/lookups.py) keep their promises, on real databases.

Promises defended:
- every lookup is capped in the database: its query returns at most ``limit`` rows, oldest first, even when
  more rows match (the read's own row cap is a second fence, not the only one);
- the rows a lookup finds carry their payload, cut at ``payload_max_bytes`` and never dropped (rows found by
  traceparent, by the old uuid ``traceId`` column, and a job's outcome events);
- columns are the configured ones: with ``created_at`` renamed in [conventions.columns] every lookup (the
  correlation and trace lookups, the job_audit rows and the outcome events of jobs) still runs; a table
  that lacks created_at is named with the column it lacks;
- an id that cannot be a value of a uuid column is dropped from that column's lookup, the other ids are still
  searched (a service whose correlation ids are text next to one whose are uuids); a lookup left with no id
  costs no round trip and notes nothing;
- outcome events are matched on every configured payload id key; with none configured, or an event table
  without its type or payload column, the jobs are traced without outcome events instead of failing.
"""

from __future__ import annotations

import json
import secrets
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.rows import dict_row

from server.runtime import Runtime
from tests.trace_request import saga as sg
from tests.trace_request.conftest import outbox_database
from tools.outbox.mcp_tools import catalog_of
from tools.trace_request import lookups

pytestmark = pytest.mark.anyio

VARIANTS = """
ALTER TABLE event_queue ALTER COLUMN correlation_id TYPE text;
CREATE TABLE r_events (LIKE event_queue INCLUDING ALL);
CREATE TABLE r_jobs (LIKE jobs_outbox INCLUDING ALL);
CREATE TABLE r_audit (LIKE job_audit INCLUDING ALL);
ALTER TABLE r_events RENAME COLUMN created_at TO inserted_at;
ALTER TABLE r_jobs RENAME COLUMN created_at TO inserted_at;
ALTER TABLE r_audit RENAME COLUMN created_at TO inserted_at;
CREATE TABLE n_events (LIKE event_queue INCLUDING ALL);
ALTER TABLE n_events DROP COLUMN created_at;
CREATE TABLE n_audit (LIKE job_audit INCLUDING ALL);
ALTER TABLE n_audit DROP COLUMN created_at;
CREATE TABLE t_events (LIKE event_queue INCLUDING ALL);
ALTER TABLE t_events DROP COLUMN type;
CREATE TABLE p_events (LIKE event_queue INCLUDING ALL);
ALTER TABLE p_events DROP COLUMN payload;
CREATE TABLE x_jobs (LIKE jobs_outbox INCLUDING ALL);
ALTER TABLE x_jobs ALTER COLUMN id TYPE text;
CREATE TABLE u_audit (LIKE job_audit INCLUDING ALL);
ALTER TABLE u_audit ALTER COLUMN job_id TYPE uuid USING job_id::uuid;
"""
"""One scratch database of schema variants (service "shop"), chosen per test through [conventions.tables]:
``event_queue`` with text correlation ids; ``r_*`` with created_at renamed inserted_at; ``n_*`` without
created_at; ``t_events`` without type; ``p_events`` without payload; ``x_jobs`` with text ids; ``u_audit`` with
uuid job ids."""

VARIANT_TABLES = ("event_queue", "jobs_outbox", "job_audit", "r_events", "r_jobs", "r_audit", "n_events", "n_audit",
                  "t_events", "p_events", "x_jobs", "u_audit")


@pytest.fixture(scope="module")
def variants_db(pg_admin_url: str) -> Iterator[str]:
    with outbox_database(pg_admin_url, VARIANTS) as url:
        yield url


@pytest.fixture
def shop(variants_db: str) -> Iterator[tuple[str, psycopg.Connection]]:
    """The variants database, every table emptied."""
    with psycopg.connect(variants_db, autocommit=True) as conn:
        conn.execute(sql.SQL("TRUNCATE {}").format(sql.SQL(", ").join(sql.Identifier(t) for t in VARIANT_TABLES)))
        yield variants_db, conn


def keys(report) -> list[str]:
    return [i.key for i in report.items]


def item(report, key: str):
    return next(i for i in report.items if i.key == key)


def insert(conn: psycopg.Connection, table: str, age_s: float, created: str | None = "created_at",
           **values: Any) -> str:
    """A row of ``table`` written ``age_s`` seconds ago (its created_at column named ``created``, or none)."""
    values.setdefault("id", str(uuid.uuid4()))
    cols = [sql.Identifier(k) for k in values] + ([sql.Identifier(created)] if created else [])
    marks = [sql.Placeholder()] * len(values) + ([sql.SQL("now() - make_interval(secs => %s)")] if created else [])
    params = [json.dumps(v) if isinstance(v, dict) else v for v in values.values()] + ([age_s] if created else [])
    conn.execute(sql.SQL("INSERT INTO {} ({}) VALUES ({})").format(
        sql.Identifier(table), sql.SQL(", ").join(cols), sql.SQL(", ").join(marks)), params)
    return str(values["id"])


def event(conn, table="event_queue", age_s=60.0, created="created_at", **values) -> str:
    values = {"status": "PENDING", "type": "order:created", "emitter": "ms-shop", "target_services": ["x"],
              "payload": {"after": {"id": 1}}, **values}
    return insert(conn, table, age_s, created, **values)


def job(conn, table="jobs_outbox", age_s=60.0, created="created_at", **values) -> str:
    values = {"status": "COMPLETED", "type": "shop.send_receipt", "emitter": "ms-shop", "target": "shop-queue",
              "payload": {"orderId": 7}, **values}
    return insert(conn, table, age_s, created, **values)


def audit(conn, job_id: str, table="job_audit", age_s=50.0, created="created_at", status="COMPLETED") -> str:
    return insert(conn, table, age_s, created, job_id=job_id, job_type="shop.send_receipt", status=status,
                  emitter="ms-shop")


def outcome(conn, job_id: str, table="event_queue", key="after.job_id", age_s=40.0, created="created_at") -> str:
    """A success row, its job id at the JSON path ``key`` (the audit trigger's is after.job_id)."""
    kind = "shop:job:outbox:success"
    *parents, last = key.split(".")
    payload: dict[str, Any] = {last: job_id, "status": "COMPLETED"}
    for step in reversed(parents):
        payload = {step: payload}
    return event(conn, table, age_s, created, type=kind, target_services=[kind], payload=payload)


def on_shop(saga_settings, url: str, tables: dict[str, str] | None = None, **conventions: Any):
    names = {"event_queue": "event_queue", "jobs_outbox": "jobs_outbox", "job_audit": "job_audit", **(tables or {})}
    return saga_settings(services={"shop": {"postgres": url}}, conventions={"tables": names, **conventions})


# -- the queries themselves -----------------------------------------------------------------------------


async def test_every_lookup_returns_at_most_its_limit_oldest_first_from_the_database(dbs, saga_settings) -> None:
    """Five rows match each lookup; asked for three, the database itself sends three, in created_at order."""
    url, conn = dbs["event"]
    correlation, trace = str(uuid.uuid4()), secrets.token_hex(16)
    for age in (50, 40, 30, 20, 10):
        event(conn, age_s=age, correlation_id=correlation, traceparent=sg.traceparent(trace, sg.span()),
              traceId=str(uuid.UUID(hex=trace)), payload={"after": {"orderRef": "ent-9"}})
    event(conn, age_s=5, correlation_id=str(uuid.uuid4()), payload={"after": {"orderRef": "ent-8"}})
    settings = saga_settings()
    runtime = Runtime(settings)
    try:
        events = (await catalog_of(runtime).tables("event"))["event_queue"]
    finally:
        await runtime.aclose()
    cap = settings.limits.payload_max_bytes
    queries = {
        "correlation_id": lookups.by_column(events, "correlation_id", [correlation], cap, 3),
        "traceparent": lookups.by_traceparent(events, [trace], cap, 3),
        "traceId": lookups.by_trace_uuid(events, [trace], cap, 3),
        "payload": lookups.by_payload(events, "ent-9", 3600, cap, 3),
    }
    with psycopg.connect(url, row_factory=dict_row) as read:
        for name, query in queries.items():
            assert query is not None, name
            rows = read.execute(*query).fetchall()
            assert len(rows) == 3, (name, len(rows))
            assert [r["created_at"] for r in rows] == sorted(r["created_at"] for r in rows), name
            assert {r["correlation_id"] for r in rows} == {uuid.UUID(correlation)}, name


# -- what the lookups' rows carry ------------------------------------------------------------------------


async def test_rows_found_by_trace_carry_their_payload_and_so_do_outcome_events(
        dbs, redis_client, saga_settings, run) -> None:
    """By trace id: the first event (its traceparent), a row of the older social schema (its uuid traceId) and
    the outcome event in the job's chain each carry the payload their row holds."""
    s = sg.build(dbs["event"][1], dbs["notification"][1], redis_client)
    social = event(dbs["social"][1], age_s=570, type="social:liked", emitter="ms-social",
                   traceId=str(uuid.UUID(hex=s.trace)), payload={"after": {"likeId": "like-3"}})
    report = await run(saga_settings(), trace_id=s.trace)
    created = item(report, f"event:event_queue:{s.ids['created']}")
    assert created.hops[0].row.columns["payload"] == {"before": None, "after": {"id": "evt-42", "ownerId": "user-7"}}
    liked = item(report, f"social:event_queue:{social}")
    assert liked.hops[0].row.columns["payload"] == {"after": {"likeId": "like-3"}}
    job_item = item(report, f"notification:jobs_outbox:{s.ids['job']}")
    (hop,) = [h for h in job_item.hops if h.row is not None and h.row.id == s.ids["outcome"]]
    written = dbs["notification"][1].execute("SELECT payload FROM event_queue WHERE id = %s",
                                             (s.ids["outcome"],)).fetchone()[0]
    assert written["after"]["job_id"] == s.ids["job"] and "jobId" not in written
    assert hop.row.columns["payload"] == written


# -- configured and missing columns ------------------------------------------------------------------------


async def test_a_renamed_created_at_column_is_used_by_every_lookup(shop, saga_settings, run) -> None:
    url, conn = shop
    correlation, trace = str(uuid.uuid4()), secrets.token_hex(16)
    created = event(conn, "r_events", 30, "inserted_at", correlation_id=correlation,
                    traceparent=sg.traceparent(trace, sg.span()))
    job_id = job(conn, "r_jobs", 25, "inserted_at", traceparent=sg.traceparent(trace, sg.span()))
    audit(conn, job_id, "r_audit", 20, "inserted_at")
    done = outcome(conn, job_id, "r_events", age_s=15, created="inserted_at")
    settings = on_shop(saga_settings, url, {"event_queue": "r_events", "jobs_outbox": "r_jobs", "job_audit": "r_audit"},
                       columns={"created_at": "inserted_at"})
    report = await run(settings, correlation_id=correlation)
    assert report.unavailable == []
    assert keys(report) == [f"shop:event_queue:{created}", f"shop:jobs_outbox:{job_id}"]
    hops = item(report, f"shop:jobs_outbox:{job_id}").hops
    assert [h.state for h in hops if h.name == "job_audit"] == ["COMPLETED"]
    assert [h.row.id for h in hops if h.row is not None and h.row.table == "event_queue"] == [done]


async def test_a_table_without_created_at_is_named_with_the_column_it_lacks(shop, saga_settings, run) -> None:
    """The correlation lookup of an event table without created_at: the service is unavailable. The job_audit rows
    of a job in a table without it, and the outcome events of a job in an event table without it: the job (found)
    stays an inconclusive item, its chain named unread by its key. Each error names created_at (not some other
    column)."""
    url, conn = shop
    correlation = str(uuid.uuid4())
    event(conn, "n_events", created=None, correlation_id=correlation)
    lacking = 'column "created_at" does not exist'
    report = await run(on_shop(saga_settings, url, {"event_queue": "n_events"}), correlation_id=correlation)
    assert [(p.service, p.error) for p in report.unavailable] == [("shop", f"service 'shop': {lacking}")]
    job_id = job(conn)
    audit(conn, job_id, "n_audit", created=None)
    for tables in ({"job_audit": "n_audit"}, {"event_queue": "n_events"}):
        report = await run(on_shop(saga_settings, url, tables), start=f"shop:jobs_outbox:{job_id}")
        key = f"shop:jobs_outbox:{job_id}"
        assert [(p.service, p.error) for p in report.unavailable] == [(key, f"service 'shop': {lacking}")], tables
        assert [(i.key, i.verdict.code) for i in report.items] == [(key, "inconclusive")]


# -- ids typed for their column ----------------------------------------------------------------------------


async def test_an_id_that_cannot_be_a_uuid_is_dropped_and_the_others_are_still_searched(
        dbs, shop, saga_settings, run) -> None:
    """Service shop keeps text correlation ids, notification uuids. By trace id, a shop row (correlation
    "0-order-7") and a notification row (correlation C) are found; the next round searches both correlation ids
    everywhere: in notification "0-order-7" cannot be a uuid and is dropped, C still finds the row that shares it
    and carries no trace."""
    url, conn = shop
    notif = dbs["notification"][1]
    trace = secrets.token_hex(16)
    correlation = "f" + str(uuid.uuid4())[1:]  # sorts after "0-order-7"
    legacy = event(conn, age_s=30, correlation_id="0-order-7", traceparent=sg.traceparent(trace, sg.span()))
    traced = event(notif, age_s=20, correlation_id=correlation, traceparent=sg.traceparent(trace, sg.span()))
    untraced = event(notif, age_s=10, correlation_id=correlation)
    services = {"notification": {"postgres": dbs["notification"][0]}, "shop": {"postgres": url}}
    report = await run(saga_settings(services=services), trace_id=trace)
    assert keys(report) == [f"shop:event_queue:{legacy}", f"notification:event_queue:{traced}",
                            f"notification:event_queue:{untraced}"]
    assert report.unavailable == []


async def test_an_id_no_lookup_can_use_costs_no_round_trip_and_notes_nothing(dbs, saga_settings, run) -> None:
    """A start id that is not a uuid: no row, no SQL round trip, no note (the lookup was not run)."""
    event(dbs["event"][1], correlation_id=str(uuid.uuid4()))
    report = await run(saga_settings(), start="event:event_queue:not-a-uuid")
    assert report.items == [] and report.unavailable == []
    assert report.sql_round_trips == 0
    assert report.unindexed == [] and report.skipped == []


# -- the outcome events of jobs ------------------------------------------------------------------------------


async def test_outcome_events_are_matched_on_every_configured_id_key_and_on_none(shop, saga_settings, run) -> None:
    """Every configured JSON path is searched: the trigger's after.job_id and an old flat key (jobId)."""
    url, conn = shop
    trace = secrets.token_hex(16)
    first = job(conn, age_s=30, traceparent=sg.traceparent(trace, sg.span()))
    second = job(conn, age_s=20, traceparent=sg.traceparent(trace, sg.span()))
    by_camel = outcome(conn, first, key="jobId", age_s=15)
    by_snake = outcome(conn, second, key="after.job_id", age_s=10)

    def outcomes(report) -> dict[str, list[str]]:
        return {i.id: [h.row.id for h in i.hops if h.row is not None and h.row.table == "event_queue"]
                for i in report.items}

    report = await run(on_shop(saga_settings, url, job_outcome_id_keys=["jobId", "$.after.job_id"]), trace_id=trace)
    assert report.unavailable == []
    assert outcomes(report) == {first: [by_camel], second: [by_snake]}
    report = await run(on_shop(saga_settings, url, job_outcome_id_keys=[]), trace_id=trace)
    assert report.unavailable == []
    assert outcomes(report) == {first: [], second: []}


async def test_an_event_table_without_type_or_payload_leaves_jobs_without_outcomes(shop, saga_settings, run) -> None:
    url, conn = shop
    job_id = job(conn)
    audit(conn, job_id)
    for table in ("t_events", "p_events"):
        report = await run(on_shop(saga_settings, url, {"event_queue": table}), start=f"shop:jobs_outbox:{job_id}")
        assert report.unavailable == [], table
        assert keys(report) == [f"shop:jobs_outbox:{job_id}"], table
        hops = report.items[0].hops
        assert [h.state for h in hops if h.name == "job_audit"] == ["COMPLETED"], table
        assert [h for h in hops if h.row is not None and h.row.table == "event_queue"] == [], table


async def test_a_job_with_no_audit_id_and_no_outcome_type_to_search_costs_no_more_round_trips(
        shop, saga_settings, run) -> None:
    """A job id that cannot be a uuid of job_audit.job_id, and no outcome type configured: neither the audit nor the
    outcome lookup is sent. The call's round trips are the transaction's settings and the start lookup."""
    url, conn = shop
    job_id = job(conn, "x_jobs", id="job-7")
    settings = on_shop(saga_settings, url, {"jobs_outbox": "x_jobs", "job_audit": "u_audit"},
                       job_success_types=[], job_failure_types=[])
    report = await run(settings, start=f"shop:jobs_outbox:{job_id}")
    assert keys(report) == ["shop:jobs_outbox:job-7"] and report.unavailable == []
    assert report.sql_round_trips == 2
