"""What the lookups of ``trace_request`` plan, as the user reads it in the report (real databases and Redis).

Promises defended (tools/trace_request/collect.py: ``_plan``, ``_plan_correlation``, ``_plan_trace``,
``by_start``, ``by_entity``, ``trace_ids``, ``correlation``):
- every lookup that could not run is named in ``skipped`` with the column it lacks ("<table> has no <column>
  column in this service: not searched there"), and every lookup that ran without the recommended index is named
  in ``unindexed`` with the index to create; nothing else is noted (the notes are asserted whole);
- an item says how it was reached (``link``: correlation_id, trace_id, start, then how it hangs on its parent)
  and only an entity_id search is heuristic;
- the rows found by a correlation or trace lookup carry their payload (cut at ``payload_max_bytes``, never
  dropped);
- the old uuid ``traceId`` is searched for the trace asked for (and where a table has no traceparent), and the
  trace id a row holds there leads to the rest of the request;
- a row with no correlation id and no trace leads nowhere: nothing more is searched, nothing is noted;
- each lookup stops at the row cap in the database (its ``LIMIT`` is inside the lookup: a hot key never costs a
  read of all its rows): the rows kept are the first ones the lookup met, and ``truncated`` says more may exist.
"""

from __future__ import annotations

import secrets
import uuid

import psycopg
import pytest

from tests.outbox.conftest import apply_schema
from tests.trace_request import saga as sg
from tools.trace_request.model import LookupNote

pytestmark = pytest.mark.anyio

CREATED_PAYLOAD = {"before": None, "after": {"id": "evt-42", "ownerId": "user-7"}}  # saga.build's first event


def skipped(table: str, column: str) -> str:
    return f"{table} has no {column} column in this service: not searched there"


def no_index(table: str, keys: str) -> str:
    return f"ran without an index (CREATE INDEX CONCURRENTLY ON {table} ({keys});)"


TRACEPARENT_KEYS = "(substr(traceparent, 4, 32))"


def notes(found: list[LookupNote]) -> list[tuple[str, str, str]]:
    return sorted((n.service, n.lookup, n.note) for n in found)


def first_row(report, key: str) -> dict:
    item = next(i for i in report.items if i.key == key)
    row = item.hops[0].row
    assert row is not None, key
    return row.columns



def social_skipped() -> list[tuple[str, str, str]]:
    """The skipped notes of the social service (older schema: no correlation_id nor traceparent)."""
    return [("social", "event_queue.correlation_id", skipped("event_queue", "correlation_id")),
            ("social", "event_queue.traceparent", skipped("event_queue", "traceparent")),
            ("social", "jobs_outbox.traceparent", skipped("jobs_outbox", "traceparent"))]

async def test_a_correlation_search_says_how_each_row_was_reached_and_notes_every_lookup(
        dbs, redis_client, saga_settings, run) -> None:
    s = sg.build(dbs["event"][1], dbs["notification"][1], redis_client)
    report = await run(saga_settings(), correlation_id=s.correlation)
    created, job, follow = (f"event:event_queue:{s.ids['created']}", f"notification:jobs_outbox:{s.ids['job']}",
                            f"notification:event_queue:{s.ids['follow_up']}")
    assert [(i.key, i.link, i.heuristic) for i in report.items] == [
        (created, "correlation_id", False),
        (job, "trace_id (same trace)", False),
        (follow, "correlation_id (same correlation_id)", False)]
    # the payloads of rows found by the correlation lookup and by the traceparent lookup are kept
    assert first_row(report, created)["payload"] == CREATED_PAYLOAD
    job_payload = dbs["notification"][1].execute("SELECT payload FROM jobs_outbox WHERE id = %s",
                                                 (s.ids["job"],)).fetchone()[0]
    assert first_row(report, job)["payload"] == job_payload
    assert first_row(report, follow)["payload"] == {"before": None, "after": {"id": 1}}
    # social (older schema) lacks the columns: named; the old traceId is searched only there (no traceparent)
    assert notes(report.skipped) == social_skipped()
    assert notes(report.unindexed) == sorted([
        *((service, "event_queue.correlation_id", no_index("event_queue", "correlation_id"))
          for service in ("event", "notification")),
        *((service, f"{table}.traceparent", no_index(table, TRACEPARENT_KEYS))
          for service in ("event", "notification") for table in ("event_queue", "jobs_outbox")),
        *(("social", f"{table}.traceId", no_index(table, '"traceId"')) for table in ("event_queue", "jobs_outbox"))])
    assert report.unavailable == [] and report.truncated is False


async def test_a_trace_search_reads_the_old_trace_id_too_and_notes_its_lookups(
        dbs, redis_client, saga_settings, run) -> None:
    s = sg.build(dbs["event"][1], dbs["notification"][1], redis_client)
    social = dbs["social"][1]  # the older schema: the trace in the old uuid "traceId" only
    old = sg.sim.insert_job(social, type="social.share", target="social-queue", emitter="ms-social", age_s=585,
                            payload={"share": "evt-42"})
    social.execute('UPDATE jobs_outbox SET "traceId" = %s WHERE id = %s', (str(uuid.UUID(hex=s.trace)), old))
    report = await run(saga_settings(), trace_id=s.trace)
    key = f"social:jobs_outbox:{old}"
    assert [(i.key, i.link) for i in report.items if i.service == "social"] == [(key, "trace_id (created after)")]
    assert first_row(report, key)["payload"] == {"share": "evt-42"}
    assert notes(report.skipped) == social_skipped()
    # the trace asked for is looked up in traceparent and in the old traceId of every table that has them
    assert notes(report.unindexed) == sorted([
        *((service, "event_queue.correlation_id", no_index("event_queue", "correlation_id"))
          for service in ("event", "notification")),
        *((service, f"{table}.traceparent", no_index(table, TRACEPARENT_KEYS))
          for service in ("event", "notification") for table in ("event_queue", "jobs_outbox")),
        *((service, f"{table}.traceId", no_index(table, '"traceId"'))
          for service in ("event", "notification", "social") for table in ("event_queue", "jobs_outbox"))])


async def test_a_table_without_the_old_trace_id_is_not_searched_for_it_nor_noted(
        saga_settings, run, make_pg_db) -> None:
    """The old traceId is looked up only where the table has it: a schema without it gets no note about it."""
    shop = make_pg_db()
    apply_schema(shop)
    apply_schema(shop, 'ALTER TABLE jobs_outbox DROP COLUMN "traceId"; ALTER TABLE event_queue DROP COLUMN "traceId";')
    trace = secrets.token_hex(16)
    with psycopg.connect(shop, autocommit=True) as conn:
        event = sg.insert_event(conn, type="order:created", emitter="ms-shop", targets=["x"], correlation=None,
                                tp=sg.traceparent(trace, sg.span()), age_s=5)
    report = await run(saga_settings(services={"shop": {"postgres": shop}}), trace_id=trace)
    assert [(i.key, i.link) for i in report.items] == [(f"shop:event_queue:{event}", "trace_id")]
    assert report.skipped == []
    assert notes(report.unindexed) == [("shop", f"{table}.traceparent", no_index(table, TRACEPARENT_KEYS))
                                       for table in ("event_queue", "jobs_outbox")]


async def test_the_old_trace_id_of_a_start_row_leads_to_the_rest_of_the_request(
        dbs, redis_client, saga_settings, run) -> None:
    s = sg.build(dbs["event"][1], dbs["notification"][1], redis_client)
    social = dbs["social"][1]
    old = sg.sim.insert_job(social, type="social.share", target="social-queue", emitter="ms-social", age_s=585)
    social.execute('UPDATE jobs_outbox SET "traceId" = %s WHERE id = %s', (str(uuid.UUID(hex=s.trace)), old))
    report = await run(saga_settings(), start=f"social:jobs_outbox:{old}")
    assert sorted(i.key for i in report.items) == sorted([
        f"event:event_queue:{s.ids['created']}", f"notification:jobs_outbox:{s.ids['job']}",
        f"notification:event_queue:{s.ids['follow_up']}", f"social:jobs_outbox:{old}"])
    assert next(i.link for i in report.items if i.id == old) == "start (created after)"


async def test_a_start_row_with_no_correlation_nor_trace_leads_nowhere_and_notes_nothing(
        dbs, saga_settings, run) -> None:
    lone = sg.sim.insert_job(dbs["social"][1], type="social.share", target="social-queue", emitter="ms-social",
                             age_s=5)
    report = await run(saga_settings(), start=f"social:jobs_outbox:{lone}")
    assert [(i.key, i.link) for i in report.items] == [(f"social:jobs_outbox:{lone}", "start")]
    assert report.skipped == [] and report.unindexed == [] and report.unavailable == []


async def test_a_start_table_without_an_id_column_is_named_skipped(saga_settings, run, make_pg_db) -> None:
    """start on event_queue, or on job_audit whose job is then read in jobs_outbox: a table without an id column
    is not searched, and the note names it (the service is not called unavailable)."""
    legacy = make_pg_db()
    apply_schema(legacy)
    apply_schema(legacy, "ALTER TABLE event_queue DROP COLUMN id CASCADE;"
                         "ALTER TABLE jobs_outbox DROP COLUMN id CASCADE;")
    audit = str(uuid.uuid4())
    with psycopg.connect(legacy, autocommit=True) as conn:
        conn.execute("INSERT INTO job_audit (id, job_id, job_type, emitter) VALUES (%s, %s, 'legacy.job', 'ms-legacy')",
                     (audit, str(uuid.uuid4())))
    settings = saga_settings(services={"legacy": {"postgres": legacy}})
    for start, table in ((f"legacy:event_queue:{uuid.uuid4()}", "event_queue"),
                         (f"legacy:job_audit:{audit}", "jobs_outbox")):
        report = await run(settings, start=start)
        assert report.items == [] and report.verdict.code == "not_found", start
        assert report.skipped == [LookupNote(service="legacy", lookup=f"{table}.id", note=skipped(table, "id"))]
        assert report.unindexed == [] and report.unavailable == []


CAP = 50
"""``max_rows`` of the row-cap test: above the 44 column rows of a service's schema, which the schema read is also
capped by (below them the schema comes back cut)."""


def insert_newest_first(conn: psycopg.Connection, *, correlation: str | None = None, trace: str | None = None,
                        payload: dict | None = None) -> list[str]:
    """CAP + 1 events of one key, written newest first: a scan meets them in the reverse of their time order."""
    return [sg.insert_event(conn, type="order:created", emitter="ms-event", targets=["x"], correlation=correlation,
                            tp=sg.traceparent(trace, sg.span()) if trace else None, age_s=age, payload=payload)
            for age in range(1, CAP + 2)]


def insert_old_trace_jobs_newest_first(conn: psycopg.Connection, trace: str) -> list[str]:
    out = []
    for age in range(1, CAP + 2):
        job = sg.sim.insert_job(conn, type="social.share", target="social-queue", emitter="ms-social", age_s=age)
        conn.execute('UPDATE jobs_outbox SET "traceId" = %s WHERE id = %s', (str(uuid.UUID(hex=trace)), job))
        out.append(job)
    return out


async def test_each_lookup_stops_at_the_row_cap_in_the_database(dbs, saga_settings, run) -> None:
    """With ``max_rows = CAP`` every lookup reads at most CAP rows: the first CAP it meets (here the newest, written
    first), not the CAP oldest of all its matches (the oldest match is not read); the report says the cap was
    reached."""
    settings = saga_settings(limits={"max_rows": CAP})
    event, social = dbs["event"][1], dbs["social"][1]

    def first_met(service: str, table: str, ids: list[str]) -> list[str]:
        return sorted(f"{service}:{table}:{i}" for i in ids[:CAP])

    correlation = str(uuid.uuid4())
    by_corr = insert_newest_first(event, correlation=correlation)
    report = await run(settings, correlation_id=correlation, services=["event"])
    assert sorted(i.key for i in report.items) == first_met("event", "event_queue", by_corr) and report.truncated

    trace = secrets.token_hex(16)
    by_traceparent = insert_newest_first(event, trace=trace)
    by_old_trace = insert_old_trace_jobs_newest_first(social, trace)
    report = await run(settings, trace_id=trace, services=["event", "social"])
    assert sorted(i.key for i in report.items) == sorted(
        first_met("event", "event_queue", by_traceparent) + first_met("social", "jobs_outbox", by_old_trace))
    assert report.truncated

    by_entity = insert_newest_first(event, payload={"after": {"orderId": "ord-77"}})
    report = await run(settings, entity_id="ord-77", services=["event"])
    assert sorted(i.key for i in report.items) == first_met("event", "event_queue", by_entity) and report.truncated
    assert {(i.link, i.heuristic) for i in report.items} == {("entity_id", True), ("entity_id (created after)", True)}
