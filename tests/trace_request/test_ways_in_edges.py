"""trace_request's ways in (start, entity_id) at their edges, on real databases and Redis.

Promises defended:
- an item reached from ``start`` says so (``link == "start"``, for an event_queue row and for the job
  of a job_audit row) and carries its row's payload (cut at ``payload_max_bytes``, never dropped);
- an ``entity_id`` search names the lookups that ran without the recommended index, and the rows it
  finds carry their payload;
- a table whose payload is not JSON, or that has no created_at, is not searched by entity_id: the
  lookup is named in ``skipped``, no row of it is returned, and the service is not called unavailable.
"""

from __future__ import annotations

import psycopg
import pytest

from tests.outbox.conftest import apply_schema
from tests.trace_request import saga as sg

pytestmark = pytest.mark.anyio

CREATED_PAYLOAD = {"before": None, "after": {"id": "evt-42", "ownerId": "user-7"}}  # saga.build's first event


def item(report, key: str):
    return next(i for i in report.items if i.key == key)


async def test_items_reached_from_start_say_so_and_carry_their_payload(dbs, redis_client, saga_settings, run) -> None:
    s = sg.build(dbs["event"][1], dbs["notification"][1], redis_client)
    created = f"event:event_queue:{s.ids['created']}"
    report = await run(saga_settings(), start=created)
    start = item(report, created)
    assert start.link == "start"
    row = start.hops[0].row
    assert row is not None and row.columns["payload"] == CREATED_PAYLOAD
    audit_id = dbs["notification"][1].execute("SELECT id FROM job_audit WHERE job_id = %s",
                                              (s.ids["job"],)).fetchone()[0]
    report = await run(saga_settings(), start=f"notification:job_audit:{audit_id}")
    job = item(report, f"notification:jobs_outbox:{s.ids['job']}")
    assert job.link == "start (same trace)"
    row = job.hops[0].row
    assert row is not None and row.columns["payload"] not in (None, {}), row.columns


async def test_an_entity_search_names_its_unindexed_lookups_and_keeps_payloads(
        dbs, redis_client, saga_settings, run) -> None:
    s = sg.build(dbs["event"][1], dbs["notification"][1], redis_client)
    report = await run(saga_settings(), entity_id="evt-42")
    notes = {(n.service, n.lookup): n.note for n in report.unindexed}
    for service in ("event", "notification"):
        for table in ("event_queue", "jobs_outbox"):
            assert notes[(service, f"{table}.payload")] == (
                f"ran without an index (CREATE INDEX CONCURRENTLY ON {table} (created_at, id);)")
    created = item(report, f"event:event_queue:{s.ids['created']}")
    row = created.hops[0].row
    assert created.heuristic and row is not None
    assert row.columns["payload"] == CREATED_PAYLOAD


async def test_a_table_with_a_text_payload_or_no_created_at_is_not_searched_by_entity(
        dbs, redis_client, saga_settings, run, make_pg_db) -> None:
    legacy = make_pg_db()
    apply_schema(legacy)
    apply_schema(legacy, "ALTER TABLE jobs_outbox ALTER COLUMN payload TYPE text USING payload::text;"
                         "ALTER TABLE event_queue DROP COLUMN created_at CASCADE;")
    with psycopg.connect(legacy, autocommit=True) as conn:
        job = sg.sim.insert_job(conn, type="legacy.job", target="legacy-queue", emitter="ms-legacy",
                                payload={"entity": "evt-42"})
    services = {name: {"postgres": url} for name, (url, _) in dbs.items()}
    services["legacy"] = {"postgres": legacy}
    report = await run(saga_settings(services=services), entity_id="evt-42")
    assert all(i.service != "legacy" for i in report.items), [i.key for i in report.items if i.service == "legacy"]
    assert job not in " ".join(i.key for i in report.items)
    skipped = {(n.service, n.lookup) for n in report.skipped}
    assert {("legacy", "jobs_outbox.payload"), ("legacy", "event_queue.payload")} <= skipped
    assert report.unavailable == []


async def test_a_start_id_that_matches_no_row_is_not_found_without_a_false_note(dbs, saga_settings, run) -> None:
    """An id that cannot be a uuid, or a job_audit id with no row: nothing found, and no note saying the table has
    no id column (it has one)."""
    for start in ("event:event_queue:not-a-uuid", "notification:job_audit:7d1c2a4e-0000-4000-8000-00000000000a"):
        report = await run(saga_settings(), start=start)
        assert report.items == [] and report.verdict.code == "not_found", (start, report.verdict)
        assert [n for n in report.skipped if n.lookup.endswith(".id")] == [], (start, report.skipped)
        assert report.unavailable == []


async def test_a_numeric_entity_id_matches_numbers_and_strings_in_a_json_payload(
        saga_settings, run, make_pg_db) -> None:
    """A payload column of type json (not jsonb) is searched too; a numeric entity id matches a JSON number and a
    JSON string equal to it, not a longer number."""
    shop = make_pg_db()
    apply_schema(shop)
    apply_schema(shop, "ALTER TABLE event_queue ALTER COLUMN payload TYPE json USING payload::json;")
    with psycopg.connect(shop, autocommit=True) as conn:
        def event(payload: dict) -> str:
            return sg.insert_event(conn, type="order:created", emitter="ms-shop", targets=["x"], correlation=None,
                                   tp=None, age_s=5, payload=payload)

        as_number, as_text = event({"after": {"orderId": 98765}}), event({"ref": "98765"})
        event({"after": {"orderId": 987650, "ref": "98765x"}})
    report = await run(saga_settings(services={"shop": {"postgres": shop}}), entity_id="98765")
    assert sorted(i.id for i in report.items) == sorted([as_number, as_text])
    assert report.unavailable == [] and [n for n in report.skipped if n.lookup == "event_queue.payload"] == []
