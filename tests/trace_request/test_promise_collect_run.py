"""How trace_request's collector runs its search, on real service databases (``Collector.collect``).

Promises defended (docs/runtime-diagnosis.md, "Joins" and "How it reads"):
- the search follows the ids the rows carry, level by level: a correlation id or trace id is searched once
  (never again in a later round, where it would only crowd the row limit of the lookup), and a row found
  again is skipped without stopping the level;
- ``truncated`` says a cap was hit, and only then: a lookup that filled its row limit, the 200 rows in all,
  the 100 values per round (the ids past them are not searched), the 3 rounds (ids left unsearched);
- with ``trace_id`` as the way in the old uuid ``"traceId"`` column is searched for that trace in every
  table, the expansion is by correlation id only, and a lookup note is written once per lookup;
- a service that failed is not read again in the call; the call's SQL round trips are the ones the docs
  count (11 for the three-service saga).
"""

from __future__ import annotations

import secrets
import uuid
from typing import Any

import psycopg
import pytest

from server.runtime import Runtime
from tests.trace_request import saga as sg
from tools.outbox.mcp_tools import catalog_of
from tools.trace_request.collect import Collected, Collector
from tools.trace_request.reads import RequestReads
from tools.trace_request.service import validate

pytestmark = pytest.mark.anyio

WAYS = ("correlation_id", "trace_id", "entity_id", "start")


def trace() -> str:
    return secrets.token_hex(16)


def event(conn: psycopg.Connection, *, corr: str | None = None, tp: str | None = None, trace_uuid: str | None = None,
          age_s: float = 600, payload: str = '{"after": {"id": 1}}') -> str:
    """An event_queue row; ``tp`` is the trace id of its traceparent, ``trace_uuid`` its old "traceId"."""
    row_id = str(uuid.uuid4())
    conn.execute(
        """INSERT INTO event_queue (id, type, emitter, payload, correlation_id, traceparent, "traceId", created_at)
           VALUES (%s, 'x:happened', 'ms-x', %s, %s, %s, %s, now() - make_interval(secs => %s))""",
        (row_id, payload, corr, sg.traceparent(tp, sg.span()) if tp else None, trace_uuid, age_s))
    return row_id


def job(conn: psycopg.Connection, *, tp: str | None = None, trace_uuid: str | None = None, age_s: float = 600) -> str:
    row_id = str(uuid.uuid4())
    conn.execute(
        """INSERT INTO jobs_outbox (id, type, emitter, target, traceparent, "traceId", created_at)
           VALUES (%s, 'x.do', 'ms-x', 'x-queue', %s, %s, now() - make_interval(secs => %s))""",
        (row_id, sg.traceparent(tp, sg.span()) if tp else None, trace_uuid, age_s))
    return row_id


def events(conn: psycopg.Connection, n: int, *, corr: str | None = None, tp: str | None = None,
           distinct_corr: bool = False, distinct_tp: bool = False) -> None:
    """``n`` event_queue rows in one statement (a shared or a distinct correlation id / trace per row)."""
    conn.execute(
        """INSERT INTO event_queue (id, type, emitter, correlation_id, traceparent, created_at)
           SELECT gen_random_uuid(), 'x:many', 'ms-x',
                  CASE WHEN %(dc)s THEN gen_random_uuid() ELSE %(corr)s::uuid END,
                  CASE WHEN %(dt)s THEN '00-' || md5(random()::text) || '-' || substr(md5(i::text), 1, 16) || '-01'
                       WHEN %(tp)s::text IS NULL THEN NULL
                       ELSE '00-' || %(tp)s || '-' || substr(md5(i::text), 1, 16) || '-01' END,
                  now() - make_interval(secs => 500 - i)
           FROM generate_series(1, %(n)s) AS i""",
        {"n": n, "corr": corr, "tp": tp, "dc": distinct_corr, "dt": distinct_tp})


def jobs(conn: psycopg.Connection, n: int, *, tp: str) -> None:
    conn.execute(
        """INSERT INTO jobs_outbox (id, type, emitter, target, traceparent, created_at)
           SELECT gen_random_uuid(), 'x.many', 'ms-x', 'x-queue',
                  '00-' || %(tp)s || '-' || substr(md5(i::text), 1, 16) || '-01', now() - make_interval(secs => 400 - i)
           FROM generate_series(1, %(n)s) AS i""",
        {"n": n, "tp": tp})


async def collect(settings: Any, **way: str) -> tuple[Collected, int]:
    """What the collector found for one way in, and the SQL round trips it took."""
    runtime = Runtime(settings)
    try:
        inp = validate(settings, since_s=86400, services=None, **({w: None for w in WAYS} | way))
        async with RequestReads(runtime.connections) as reads:
            out = await Collector(runtime.connections, settings, catalog_of(runtime), reads).collect(inp)
        return out, reads.round_trips
    finally:
        await runtime.aclose()


def ids(out: Collected) -> list[str]:
    return sorted(h.found.row.id for h in out.hits.values())


async def test_the_saga_by_correlation_takes_the_eleven_round_trips_the_docs_count(
        dbs, redis_client, saga_settings, run) -> None:
    s = sg.build(dbs["event"][1], dbs["notification"][1], redis_client)
    report = await run(saga_settings(), correlation_id=s.correlation)
    assert [i.id for i in report.items] == [s.ids["created"], s.ids["job"], s.ids["follow_up"]]
    # event and notification: the transaction, the seed level, the expansion by the trace found; notification: the
    # jobs' audit and outcome rows; social (no correlation_id column: no seed lookup): the transaction and the
    # expansion ("traceId"); the clock offset of event and notification
    assert report.sql_round_trips == 3 + 4 + 2 + 2


async def test_a_chain_is_followed_round_by_round_and_each_id_searched_once(dbs, saga_settings) -> None:
    """correlation C -> A (trace T) -> B (trace T, correlation C2) and job J (trace T, old traceId T2) -> D (C2,
    trace T3) and E (trace T2) -> F (trace T3). The row limit of a lookup is 60 (``max_rows``); 57 more rows carry
    C and 56 more carry T, so no lookup fills it (not truncated), but one that searched C or T again with the new
    ids would."""
    conn = dbs["event"][1]
    c, c2 = str(uuid.uuid4()), str(uuid.uuid4())
    t, t2, t3 = trace(), trace(), trace()
    a = event(conn, corr=c, tp=t, age_s=600)
    b = event(conn, corr=c2, tp=t, age_s=590)  # after A in the same table: A, found again, comes first
    j = job(conn, tp=t, trace_uuid=str(uuid.UUID(hex=t2)), age_s=595)
    d = event(conn, corr=c2, tp=t3, age_s=580)
    e = event(conn, tp=t2, age_s=570)
    f = event(conn, tp=t3, age_s=560)
    events(conn, 57, corr=c)
    events(conn, 56, tp=t)
    more = [str(r[0]) for r in conn.execute("SELECT id FROM event_queue WHERE type = 'x:many'")]
    out, _ = await collect(saga_settings(limits={"max_rows": 60}), correlation_id=c)
    assert ids(out) == sorted([a, b, j, d, e, f, *more])
    assert out.truncated is False
    assert out.unavailable == [] and out.left_out == []
    # every lookup note once, though the lookups ran at several levels
    assert [(n.service, n.lookup, n.note) for n in out.skipped] == [
        ("social", "event_queue.correlation_id", "event_queue has no correlation_id column in this service: "
                                                 "not searched there"),
        ("social", "jobs_outbox.traceparent", "jobs_outbox has no traceparent column in this service: "
                                              "not searched there"),
        ("social", "event_queue.traceparent", "event_queue has no traceparent column in this service: "
                                              "not searched there")]
    assert sorted((n.service, n.lookup) for n in out.unindexed) == [
        (service, lookup) for service in ("event", "notification")
        for lookup in ("event_queue.correlation_id", "event_queue.traceparent", "jobs_outbox.traceparent")] + [
        ("social", "event_queue.traceId"), ("social", "jobs_outbox.traceId")]


async def test_a_lookup_over_its_row_limit_says_truncated(dbs, saga_settings) -> None:
    c = str(uuid.uuid4())
    events(dbs["event"][1], 61, corr=c)
    out, _ = await collect(saga_settings(limits={"max_rows": 60}), correlation_id=c)
    assert len(out.hits) == 60 and out.truncated is True


async def test_by_trace_id_the_old_trace_id_column_is_searched_and_only_correlation_ids_are_followed(
        dbs, saga_settings, run) -> None:
    """P carries trace T in its traceparent and another trace T2 in its old "traceId"; Q carries T only in
    "traceId" (in a table that has a traceparent column); R carries T2. By trace_id T: P and Q, and R is neither
    found nor listed as left out (the expansion of a trace_id search is by correlation id only)."""
    conn = dbs["event"][1]
    t, t2 = trace(), trace()
    p = event(conn, tp=t, trace_uuid=str(uuid.UUID(hex=t2)), age_s=600)
    q = job(conn, trace_uuid=str(uuid.UUID(hex=t)), age_s=590)
    event(conn, tp=t2, age_s=580)
    report = await run(saga_settings(), trace_id=t)
    assert [i.id for i in report.items] == [p, q]
    assert report.left_out == [] and report.truncated is False


async def test_a_correlation_id_equal_to_a_trace_id_is_still_followed_as_a_trace(dbs, saga_settings, run) -> None:
    """Some services use the trace id as correlation id: asked by that correlation id, the rows of the trace
    that carry no correlation id are found too."""
    conn = dbs["event"][1]
    t = trace()
    a = event(conn, corr=str(uuid.UUID(hex=t)), tp=t, age_s=600)
    j = job(conn, tp=t, age_s=590)
    report = await run(saga_settings(), correlation_id=t)
    assert [i.id for i in report.items] == [a, j]


async def test_an_entity_id_that_is_also_a_correlation_id_is_still_followed_as_one(dbs, saga_settings, run) -> None:
    conn = dbs["event"][1]
    v = str(uuid.uuid4())
    a = event(conn, corr=v, payload=f'{{"after": {{"orderId": "{v}"}}}}', age_s=600)
    b = event(conn, corr=v, age_s=590)
    report = await run(saga_settings(), entity_id=v)
    assert [(i.id, i.heuristic) for i in report.items] == [(a, True), (b, False)]


def four_hundred_rows(dbs: dict, *, more_traces: bool = False) -> str:
    """396 rows share correlation C or its trace (99 per lookup: no lookup fills its limit of 100)."""
    c, t = str(uuid.uuid4()), trace()
    for name in ("event", "notification"):
        events(dbs[name][1], 99, corr=c, tp=t)
        jobs(dbs[name][1], 99, tp=t)
        if more_traces:
            dbs[name][1].execute('UPDATE jobs_outbox SET "traceId" = gen_random_uuid()')
    return c


async def test_two_hundred_rows_in_all_then_truncated(dbs, saga_settings) -> None:
    out, _ = await collect(saga_settings(), correlation_id=four_hundred_rows(dbs))
    assert len(out.hits) == 200 and out.truncated is True


async def test_no_further_level_is_read_once_two_hundred_rows_are_kept(dbs, saga_settings) -> None:
    """The jobs carry other trace ids in their old "traceId", but the search stops at the cap: another level could
    add no row."""
    out, round_trips = await collect(saga_settings(), correlation_id=four_hundred_rows(dbs, more_traces=True))
    assert len(out.hits) == 200 and out.truncated is True
    # event and notification: the transaction, the seed, the expansion by T; social: the transaction, the expansion
    assert round_trips == 3 + 3 + 2


async def test_a_lookup_over_a_hundred_rows_keeps_a_hundred_and_says_truncated(dbs, saga_settings) -> None:
    """The row limit of a lookup is 100 even when ``max_rows`` (500 here) allows more."""
    c = str(uuid.uuid4())
    events(dbs["event"][1], 101, corr=c)
    out, _ = await collect(saga_settings(), correlation_id=c)
    assert len(out.hits) == 100 and out.truncated is True


async def test_the_correlation_id_asked_for_is_not_searched_again(dbs, saga_settings) -> None:
    """Rows of correlation C that carry no trace: one level, nothing more to follow."""
    c = str(uuid.uuid4())
    a = event(dbs["event"][1], corr=c, age_s=600)
    b = event(dbs["notification"][1], corr=c, age_s=590)
    out, round_trips = await collect(saga_settings(), correlation_id=c)
    assert ids(out) == sorted([a, b]) and out.truncated is False
    # event and notification: the transaction and the seed; social has no correlation_id column: not read
    assert round_trips == 2 + 2


async def test_by_trace_id_a_row_left_out_does_not_hide_the_rows_after_it(dbs, saga_settings, run) -> None:
    """Trace T: P (correlation C). By C: X (another trace, older than P) is left out and listed; Y (C, no trace)
    after it belongs to the request."""
    conn = dbs["event"][1]
    c, t = str(uuid.uuid4()), trace()
    x = event(conn, corr=c, tp=trace(), age_s=700)
    p = event(conn, corr=c, tp=t, age_s=600)
    y = event(conn, corr=c, age_s=500)
    report = await run(saga_settings(), trace_id=t)
    assert [i.id for i in report.items] == [p, y]
    assert report.left_out == [f"event:event_queue:{x}"]


def hundred_and_one_correlation_ids(dbs: dict) -> tuple[str, str]:
    """Round 1 reaches 101 correlation ids (101 rows of trace T); the row Z shares only the last one (sorted)."""
    c, t = str(uuid.uuid4()), trace()
    last = "ffffffff-ffff-4fff-bfff-ffffffffffff"
    event(dbs["event"][1], corr=c, tp=t, age_s=700)
    events(dbs["event"][1], 50, tp=t, distinct_corr=True)
    events(dbs["notification"][1], 50, tp=t, distinct_corr=True)
    event(dbs["notification"][1], corr=last, tp=t, age_s=650)
    return c, event(dbs["notification"][1], corr=last, age_s=640)


def hundred_and_one_trace_ids(dbs: dict) -> tuple[str, str]:
    """The seed reaches 101 trace ids (101 rows of correlation C); the job Z shares only the last one (sorted)."""
    c = str(uuid.uuid4())
    events(dbs["event"][1], 50, corr=c, distinct_tp=True)
    events(dbs["notification"][1], 50, corr=c, distinct_tp=True)
    event(dbs["notification"][1], corr=c, tp="f" * 32, age_s=650)
    return c, job(dbs["notification"][1], tp="f" * 32, age_s=640)


@pytest.mark.parametrize("ids_of", [hundred_and_one_correlation_ids, hundred_and_one_trace_ids])
async def test_ids_past_the_first_hundred_of_a_round_are_searched_in_the_next_one(dbs, saga_settings, ids_of) -> None:
    """A round searches at most 100 ids of each kind; the 101st waits for the next round (it is not lost): Z,
    reached only through it, is found, and nothing is left unsearched (not truncated: no lookup filled its
    limit)."""
    c, z = ids_of(dbs)
    out, _ = await collect(saga_settings(), correlation_id=c)
    assert z in ids(out) and len(out.hits) == 103 - (ids_of is hundred_and_one_trace_ids)
    assert out.truncated is False


async def test_ids_left_when_the_rows_cap_is_reached_exactly_make_it_truncated(dbs, saga_settings) -> None:
    """Exactly 200 rows, no row turned away and no lookup at its limit (each returns at most 99), but two of
    them carry a correlation id C2 that is never searched: the answer says rows may be missing."""
    c, t, c2 = str(uuid.uuid4()), trace(), str(uuid.uuid4())
    events(dbs["event"][1], 97, corr=c, tp=t)
    events(dbs["event"][1], 2, corr=c2, tp=t)
    events(dbs["notification"][1], 99, corr=c, tp=t)
    jobs(dbs["notification"][1], 2, tp=t)
    out, _ = await collect(saga_settings(), correlation_id=c)
    assert len(out.hits) == 200 and out.truncated is True


async def test_ids_left_when_the_rounds_run_out_make_it_truncated(dbs, saga_settings) -> None:
    """A chain of five correlation ids linked by traces needs more than the 3 rounds: the answer says so."""
    conn = dbs["event"][1]
    corrs = [str(uuid.uuid4()) for _ in range(4)]
    traces = [trace() for _ in range(4)]
    # A0 (C0, T0) -> A1 (C1, T0) -> B1 (C1, T1) -> ...: each round follows one id
    event(conn, corr=corrs[0], tp=traces[0], age_s=700)
    for i in range(1, 4):
        event(conn, corr=corrs[i], tp=traces[i - 1], age_s=700 - 10 * i)
        event(conn, corr=corrs[i], tp=traces[i], age_s=695 - 10 * i)
    out, _ = await collect(saga_settings(), correlation_id=corrs[0])
    assert len(out.hits) == 4 and out.truncated is True  # A0, then A1, B1, A2 (whose C2 is not searched)


async def test_a_service_that_failed_is_not_read_again(dbs, saga_settings, service_dbs) -> None:
    """notification's event_queue is locked: its seed lookup hits the statement timeout and the service is named;
    the expansion round (by the trace of event's row) reads event and social only."""
    c, t = str(uuid.uuid4()), trace()
    event(dbs["event"][1], corr=c, tp=t, age_s=600)
    settings = saga_settings(limits={"statement_timeout_ms": 300})
    base, _ = await collect(settings, correlation_id=c)  # warm: each service's schema is read (and cached)
    runtime = Runtime(settings)
    locker = psycopg.connect(service_dbs["notification"][0])
    try:
        catalog = catalog_of(runtime)
        for name in ("event", "notification", "social"):
            await catalog.tables(name, with_indexes=True)
        locker.execute("LOCK TABLE event_queue IN ACCESS EXCLUSIVE MODE")
        inp = validate(settings, correlation_id=c, trace_id=None, entity_id=None, start=None, since_s=86400,
                       services=None)
        async with RequestReads(runtime.connections) as reads:
            out = await Collector(runtime.connections, settings, catalog, reads).collect(inp)
    finally:
        locker.rollback()
        locker.close()
        await runtime.aclose()
    assert [p.service for p in out.unavailable] == ["notification"]
    assert "statement timeout of 300 ms" in out.unavailable[0].error
    assert ids(out) == ids(base)
    # event: its transaction, the seed, the expansion by T; notification: its transaction and the failed seed;
    # social (no correlation_id column: no seed lookup): its transaction and the expansion by T ("traceId")
    assert reads.round_trips == 3 + 2 + 2
