"""The causal tree of ``trace_request`` (tools/trace_request/tree.py), through the real collector on real
service databases and a real Redis.

Promises defended (docs/runtime-diagnosis.md, ``trace_request``):
- each item carries its row as read: type, status, created_at, traceparent and correlation id (NULL stays
  None, never the text "None"), whether code or the audit trigger wrote it, its hops (named ``event_queue`` /
  ``jobs_outbox`` then the stream entries and groups) and ``broken`` exactly when its verdict is not ``ok``;
- items are in creation order (ties by key); a row whose created_at is NULL counts as created at the epoch;
- an item's parent is the latest earlier item sharing its correlation id, else its trace, else the latest
  earlier item, and ``link`` says which in those exact words;
- outcome events written by the audit trigger are hops of their job, not items; when their job is not in the
  tree (cleaned after success) they are items written by the trigger (by their job's emitter's naming), and
  never a ``trace_context_broken`` finding;
- ``trace_context_broken`` compares a code-written row with its nearest ancestor that has a context, names that
  ancestor as ``parent``, and is not said of a table that has no traceparent column;
- a row whose chain cannot be read (a Redis key of the wrong type) stays an ``inconclusive`` item named by its
  key in ``unavailable`` with the error (its service was searched), and the other rows are still traced (in
  creation order).
"""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql

from tests.trace_request import saga as sg
from tests.trace_request.conftest import outbox_database
from tools.outbox.model import ServiceProblem

pytestmark = pytest.mark.anyio

WRONGTYPE = "WRONGTYPE Operation against a key holding the wrong kind of value"
NULL_CUT = "its traceparent is NULL while its parent's is set: the trace is cut here"


@pytest.fixture(scope="module")
def zeta_db(pg_admin_url: str) -> Iterator[str]:
    """A fourth service, "zeta" (sorts after the others), whose event_queue.created_at may be NULL."""
    with outbox_database(pg_admin_url, "ALTER TABLE event_queue ALTER COLUMN created_at DROP NOT NULL;") as url:
        yield url


@pytest.fixture
def zeta(zeta_db: str) -> Iterator[tuple[str, psycopg.Connection]]:
    conn = psycopg.connect(zeta_db, autocommit=True)
    tables = [row[0] for row in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")]
    conn.execute(sql.SQL("TRUNCATE {} RESTART IDENTITY CASCADE").format(
        sql.SQL(", ").join(sql.Identifier(t) for t in tables)))
    yield zeta_db, conn
    conn.close()


def created_at(conn: psycopg.Connection, table: str, row_id: str) -> str:
    value = conn.execute(sql.SQL("SELECT created_at FROM {} WHERE id = %s").format(sql.Identifier(table)),
                         (row_id,)).fetchone()[0]
    return value.isoformat()


def undated_event(conn: psycopg.Connection, corr: str, status: str = "PENDING", target: str = "x") -> str:
    """An event_queue row of the zeta service with a NULL created_at."""
    event_id = str(uuid.uuid4())
    conn.execute("INSERT INTO event_queue (id, status, type, emitter, target_services, correlation_id, created_at) "
                 "VALUES (%s, %s, 'zeta:opened', 'ms-zeta', %s, %s, NULL)", (event_id, status, [target], corr))
    return event_id


def one_ms_after_the_epoch(conn: psycopg.Connection, event_id: str) -> None:
    """created_at = 1970-01-01T00:00:00.001 (1 ms: the smallest time after the epoch that a row can show)."""
    conn.execute("UPDATE event_queue SET created_at = to_timestamp(0.001) AT TIME ZONE current_setting('TimeZone') "
                 "WHERE id = %s", (event_id,))


def shown(report) -> list[tuple]:
    """Each item as the user reads it: key, type, status, created_at, written_by, traceparent, correlation id,
    parent, link, heuristic, broken, verdict code, hop names."""
    return [(i.key, i.type, i.status, i.created_at, i.written_by, i.traceparent, i.correlation_id, i.parent,
             i.link, i.heuristic, i.broken, i.verdict.code, [h.name for h in i.hops]) for i in report.items]


def contexts(report) -> list[tuple[str, str | None, str]]:
    return [(f.item, f.parent, f.sentence) for f in report.trace_context]


async def test_each_item_carries_its_row_its_hops_and_its_parent(dbs, redis_client, saga_settings, run) -> None:
    event_db, notif_db = dbs["event"][1], dbs["notification"][1]
    s = sg.build(event_db, notif_db, redis_client)  # ws-service leaves the follow-up pending: in_pel
    cut = sg.insert_event(notif_db, type="notification:read", emitter="ms-notification", targets=["ws:notify"],
                          correlation=s.correlation, tp=None, age_s=575)  # code-written, no traceparent: PENDING
    report = await run(saga_settings(), correlation_id=s.correlation)
    created, job = f"event:event_queue:{s.ids['created']}", f"notification:jobs_outbox:{s.ids['job']}"
    follow, cut_key = f"notification:event_queue:{s.ids['follow_up']}", f"notification:event_queue:{cut}"
    tp = {name: sg.traceparent(s.trace, span) for name, span in s.spans.items()}
    assert shown(report) == [
        (created, "event:created", "COMPLETED", created_at(event_db, "event_queue", s.ids["created"]), "code",
         tp["event"], s.correlation, None, "correlation_id", False, False, "ok",
         ["event_queue", "stream_entry", "group"]),
        # the job: no correlation id column value (None, not "None"); its outcome event is still PENDING (info)
        (job, "notifications.send_push", "COMPLETED", created_at(notif_db, "jobs_outbox", s.ids["job"]), "code",
         tp["job"], None, created, "trace_id (same trace)", False, True, "event_pending",
         ["jobs_outbox", "bullmq_job", "completion_guard", "job_audit", "outcome_event"]),
        (follow, "notification:sent", "COMPLETED", created_at(notif_db, "event_queue", s.ids["follow_up"]), "code",
         tp["follow_up"], s.correlation, created, "correlation_id (same correlation_id)", False, True, "in_pel",
         ["event_queue", "stream_entry", "group"]),
        (cut_key, "notification:read", "PENDING", created_at(notif_db, "event_queue", cut), "code",
         None, s.correlation, follow, "correlation_id (same correlation_id)", False, True, "event_pending",
         ["event_queue"]),
    ]
    assert contexts(report) == [(cut_key, follow, f"{cut_key} (notification:read) is written by code but {NULL_CUT}")]


async def test_a_row_sharing_no_id_follows_the_latest_earlier_item_and_an_old_schema_is_never_flagged(
        dbs, redis_client, saga_settings, run) -> None:
    s = sg.build(dbs["event"][1], dbs["notification"][1], redis_client, stuck_ws=False)
    social = dbs["social"][1]  # no traceparent column: the trace in the old uuid "traceId"
    old = sg.sim.insert_job(social, type="social.share", target="social-queue", emitter="ms-social", age_s=585)
    social.execute('UPDATE jobs_outbox SET "traceId" = %s WHERE id = %s', (str(uuid.UUID(hex=s.trace)), old))
    report = await run(saga_settings(), trace_id=s.trace)
    job, old_key = f"notification:jobs_outbox:{s.ids['job']}", f"social:jobs_outbox:{old}"
    assert [(i.key, i.parent, i.link) for i in report.items] == [
        (f"event:event_queue:{s.ids['created']}", None, "trace_id"),
        (job, f"event:event_queue:{s.ids['created']}", "trace_id (same trace)"),
        (old_key, job, "trace_id (created after)"),  # neither a correlation id nor a traceparent to share
        (f"notification:event_queue:{s.ids['follow_up']}", f"event:event_queue:{s.ids['created']}",
         "trace_id (same correlation_id)"),
    ]
    # its parent has a context, but its table cannot hold one: not a broken context
    assert report.trace_context == []


async def test_a_context_is_checked_against_the_nearest_ancestor_that_has_one(dbs, saga_settings, run) -> None:
    conn = dbs["event"][1]
    corr, trace = str(uuid.uuid4()), secrets.token_hex(16)

    def event(name: str, tp: str | None, age_s: float) -> str:
        return sg.insert_event(conn, type=name, emitter="ms-event", targets=["x"], correlation=corr, tp=tp,
                               age_s=age_s)

    first = event("a:first", None, 50)  # no context: nothing to continue
    second = event("a:second", sg.traceparent(trace, sg.span()), 40)  # its parent has none: not checked
    third = event("a:third", None, 30)  # parent second: cut
    fourth = event("a:fourth", None, 20)  # parent third has no context: checked against second, cut
    report = await run(saga_settings(), correlation_id=corr)
    keys = [f"event:event_queue:{i}" for i in (first, second, third, fourth)]
    assert [(i.key, i.parent) for i in report.items] == [(keys[0], None), (keys[1], keys[0]), (keys[2], keys[1]),
                                                         (keys[3], keys[2])]
    assert contexts(report) == [
        (keys[2], keys[1], f"{keys[2]} (a:third) is written by code but {NULL_CUT}"),
        (keys[3], keys[1], f"{keys[3]} (a:fourth) is written by code but {NULL_CUT}"),
    ]


async def test_outcome_events_are_hops_of_their_job_and_alone_are_trigger_written_items(
        dbs, redis_client, saga_settings, run) -> None:
    """The job's emitter (ms-push) is not the service's (ms-notification): its outcome is named after ms-push."""
    event_db, notif_db = dbs["event"][1], dbs["notification"][1]
    corr, trace = str(uuid.uuid4()), secrets.token_hex(16)
    created = sg.insert_event(event_db, type="event:created", emitter="ms-event", targets=["x"], correlation=corr,
                              tp=sg.traceparent(trace, sg.span()), age_s=600)
    job = sg.insert_job(notif_db, type="push.send", target="push-queue", emitter="ms-push",
                        tp=sg.traceparent(trace, sg.span()), age_s=590)
    sg.sim.runner_push_job(notif_db, redis_client, job, pushed_age_s=589)
    sg.sim.worker_take(notif_db, redis_client, job, "push-queue", age_s=588)
    sg.sim.worker_complete(notif_db, redis_client, job, "push-queue")
    outcome, outcome_type = sg.sim.outcome_event_of(notif_db, job)  # trigger-written: no correlation, no context
    assert outcome_type == "push:job:outbox:success"
    follow = sg.insert_event(notif_db, type="notification:sent", emitter="ms-notification", targets=["x"],
                             correlation=corr, tp=sg.traceparent(trace, sg.span()), age_s=580,
                             payload={"jobId": job})
    keys = {"created": f"event:event_queue:{created}", "job": f"notification:jobs_outbox:{job}",
            "follow": f"notification:event_queue:{follow}", "outcome": f"notification:event_queue:{outcome}"}

    # the entity search finds the outcome (its payload holds the job id): it is a hop of the job, not an item
    report = await run(saga_settings(), entity_id=job)
    assert [(i.key, i.written_by) for i in report.items] == [(keys["created"], "code"), (keys["job"], "code"),
                                                             (keys["follow"], "code")]
    assert [h.row.id for h in report.items[1].hops if h.name == "outcome_event"] == [outcome]

    # the job row cleaned after success: the outcome is an item of its own, written by the trigger, never flagged
    notif_db.execute("DELETE FROM jobs_outbox WHERE id = %s", (job,))
    report = await run(saga_settings(), entity_id=job)
    assert [(i.key, i.written_by, i.parent, i.link) for i in report.items] == [
        (keys["created"], "code", None, "correlation_id"),
        (keys["follow"], "code", keys["created"], "entity_id (same correlation_id)"),
        (keys["outcome"], "trigger", keys["follow"], "entity_id (created after)"),
    ]
    assert report.trace_context == []


async def test_a_row_with_a_null_created_at_counts_as_created_at_the_epoch(dbs, zeta, saga_settings, run) -> None:
    corr = str(uuid.uuid4())
    undated = undated_event(zeta[1], corr)
    early = sg.insert_event(dbs["event"][1], type="event:created", emitter="ms-event", targets=["x"],
                            correlation=corr, tp=None, age_s=0)
    one_ms_after_the_epoch(dbs["event"][1], early)
    later = sg.insert_event(dbs["event"][1], type="event:updated", emitter="ms-event", targets=["x"],
                            correlation=corr, tp=None, age_s=5)
    services = {name: {"postgres": url} for name, (url, _) in dbs.items()} | {"zeta": {"postgres": zeta[0]}}
    report = await run(saga_settings(services=services), correlation_id=corr)
    # the undated row (0 ms) before the row of 1 ms, although its key sorts after
    assert [(i.key, i.created_at) for i in report.items] == [
        (f"zeta:event_queue:{undated}", None),
        (f"event:event_queue:{early}", "1970-01-01T00:00:00.001000"),
        (f"event:event_queue:{later}", created_at(dbs["event"][1], "event_queue", later)),
    ]


UNREAD_NEXT = ("fix what the error names (the access to Redis or the database, a key of the wrong type) and "
               "trace again")


async def test_an_event_whose_stream_cannot_be_read_is_kept_inconclusive_and_the_others_are_still_traced(
        dbs, zeta, redis_client, saga_settings, run) -> None:
    """Two rows whose target stream key holds a string (XRANGE answers WRONGTYPE): each stays an item, found
    and ``inconclusive`` with the error, named in ``unavailable`` by its key, in creation order (the undated
    one counts as created at the epoch: before the one of 1 ms); their services count as searched (the rows
    are there); the later event of a third service is still traced."""
    corr = str(uuid.uuid4())
    redis_client.set("stream:not-a-stream", "a string")
    undated = undated_event(zeta[1], corr, status="COMPLETED", target="not-a-stream")
    epoch = sg.insert_event(dbs["event"][1], type="event:created", emitter="ms-event", targets=["not-a-stream"],
                            correlation=corr, tp=None, age_s=0)
    one_ms_after_the_epoch(dbs["event"][1], epoch)
    dbs["event"][1].execute("UPDATE event_queue SET status = 'COMPLETED' WHERE id = %s", (epoch,))
    later = sg.insert_event(dbs["notification"][1], type="notification:sent", emitter="ms-notification",
                            targets=["x"], correlation=corr, tp=None, age_s=10)
    services = {name: {"postgres": url} for name, (url, _) in dbs.items()} | {"zeta": {"postgres": zeta[0]}}
    report = await run(saga_settings(services=services), correlation_id=corr)
    keys = [f"zeta:event_queue:{undated}", f"event:event_queue:{epoch}", f"notification:event_queue:{later}"]
    assert [i.key for i in report.items] == keys
    error = f"{WRONGTYPE}: the key exists but is not of the expected type"
    unread = [(i.verdict.code, i.verdict.severity, i.verdict.sentence, i.verdict.next_step, i.hops, i.broken)
              for i in report.items[:2]]
    assert unread == [("inconclusive", "warning", f"the row was found, but its chain could not be read: {error}",
                       UNREAD_NEXT, [], True)] * 2
    assert report.unavailable == [ServiceProblem(service=keys[0], error=error),
                                  ServiceProblem(service=keys[1], error=error)]
    assert set(report.searched_services) >= {"zeta", "event", "notification"}
    assert report.inconclusive is True
    assert report.verdict.code == "inconclusive"
    assert report.verdict.sentence.endswith(f"(inconclusive: chain not read: {keys[0]}, {keys[1]})")


async def test_a_job_whose_chain_cannot_be_read_is_kept_inconclusive_and_later_jobs_are_still_traced(
        dbs, redis_client, saga_settings, run) -> None:
    notif_db, trace = dbs["notification"][1], secrets.token_hex(16)
    broken = sg.insert_job(notif_db, type="push.send", target="push-queue", emitter="ms-notification",
                           tp=sg.traceparent(trace, sg.span()), age_s=30)
    redis_client.set(f"bull:push-queue:{broken}", "a string, not the job's hash")  # HLEN answers WRONGTYPE
    later = sg.insert_job(notif_db, type="push.send", target="push-queue", emitter="ms-notification",
                          tp=sg.traceparent(trace, sg.span()), age_s=20)
    report = await run(saga_settings(), trace_id=trace)
    key = f"notification:jobs_outbox:{broken}"
    assert [(i.key, i.verdict.code) for i in report.items] == [(key, "inconclusive"),
                                                              (f"notification:jobs_outbox:{later}",
                                                               "pending_in_outbox")]
    # redis-py words a pipeline's error its own way (7.x "... caused error: ('WRONGTYPE ...',)", 8.x without the
    # tuple): ours are the prefix, the command that failed and the server's words, whatever the version
    [problem] = report.unavailable
    error = problem.error
    assert problem.service == key
    assert error.startswith("Redis refused a command: ") and f"HLEN bull:push-queue:{broken}" in error
    assert WRONGTYPE in error
    assert report.items[0].verdict.sentence == f"the row was found, but its chain could not be read: {error}"
    assert "notification" in report.searched_services
    assert report.inconclusive is True
    assert report.verdict.sentence.endswith(f"(inconclusive: chain not read: {key})")
    started = await run(saga_settings(), start=key)  # never "no row": the row is there
    assert (started.items[0].key, started.items[0].verdict.code) == (key, "inconclusive")
    assert started.verdict.code == "inconclusive" and started.inconclusive is True
