"""Promise: an outbox plan changes only the rows whose state it read and can justify, each guarded by what
it was planned on, and says why every other row is left alone.

- ``reconcile_outbox``: an ``event_queue`` row FAILED becomes COMPLETED; a ``jobs_outbox`` row FAILED only
  when its ``job_audit`` row is COMPLETED (the job did run). Any other row is named with its state, an id
  found nowhere is named, and when nothing can be reconciled the refusal says all of it.
- ``requeue_stuck_job``: only rows PROCESSING for longer than ``[limits] processing_ageing_s`` (the oldest
  first, up to the plan cap); each goes to COMPLETED when BullMQ (the job in the row's own queue), the
  worker's ``job:completed:<id>`` guard or ``job_audit`` shows it was pushed, else back to PENDING; both
  UPDATEs are guarded by the status *and* the ``updated_at`` read when planning.
- after a replay (``dlq_replay``), the FAILED ``event_queue`` rows of the replayed events, in the service
  given or the one configured service whose emitter sent them, behind the confirm step.

Real PostgreSQL (a scratch database with the outbox schema) and Redis; every value compared whole.
"""

from __future__ import annotations

import uuid
from datetime import datetime

import psycopg
import pytest
import redis

from server.connections import Connections
from server.errors import NotFound, RemediationRefused
from tests.remediation.conftest import GROUP, STREAM, settings_for
from tests.remediation.target_sim import js, new_event
from tools.remediation.model import Check, Plan
from tools.remediation.planner import Request, propose

pytestmark = pytest.mark.anyio

SQL_BACKUP = "every column of each row, read inside the transaction before the UPDATE"
RUNBOOK_5 = "runbook step 5: afterwards check that job_audit closes the cycle (trace_job / trace_event)"
DLQ = f"{STREAM}-dlq"


async def _propose(settings, symptom: str, **kw) -> Plan:
    connections = Connections(settings)
    try:
        return await propose(settings, connections, Request(symptom, kw.get("stream"), kw.get("group"),
                                                            kw.get("service"), None, kw.get("ids")))
    finally:
        await connections.aclose()


def _row(pg: str, table: str, status: str, age_s: int = 0, target: str = "mail", row_id: str | None = None) -> str:
    row_id = row_id or str(uuid.uuid4())
    with psycopg.connect(pg, autocommit=True) as conn:
        if table == "jobs_outbox":
            conn.execute("INSERT INTO jobs_outbox (id, status, type, emitter, target, updated_at) VALUES "
                         "(%s, %s, 't', 'ms-event', %s, now() - make_interval(secs => %s))",
                         (row_id, status, target, age_s))
        else:
            conn.execute("INSERT INTO event_queue (id, status, type, emitter, updated_at) VALUES "
                         "(%s, %s, 't', 'ms-event', now() - make_interval(secs => %s))", (row_id, status, age_s))
    return row_id


def _audit(pg: str, job_id: str, status: str) -> None:
    with psycopg.connect(pg, autocommit=True) as conn:
        conn.execute("INSERT INTO job_audit (job_id, job_type, status, emitter) VALUES (%s, 't', %s, 'ms-event')",
                     (job_id, status))


def _stamp(pg: str, row_id: str) -> str:
    with psycopg.connect(pg) as conn:
        value = conn.execute("SELECT updated_at FROM jobs_outbox WHERE id = %s", (row_id,)).fetchone()[0]
    assert isinstance(value, datetime)
    return value.isoformat()


def _row_check(table: str, row_id: str, status: str, updated_at: str | None = None, service: str = "event") -> Check:
    return Check(kind="row_matches", args={"service": service, "table": table, "id": row_id, "status": status,
                                           "updated_at": updated_at})


def _human(step) -> tuple:
    return step.action, step.description, step.target, step.precondition, step.backup, step.reversible


async def test_reconcile_marks_only_failed_rows_whose_outcome_is_known(settings, outbox_db) -> None:
    e_failed = _row(outbox_db, "event_queue", "FAILED")
    e_pending = _row(outbox_db, "event_queue", "PENDING")
    j_ran = _row(outbox_db, "jobs_outbox", "FAILED")
    j_audit_failed = _row(outbox_db, "jobs_outbox", "FAILED")
    j_no_audit = _row(outbox_db, "jobs_outbox", "FAILED")
    j_completed = _row(outbox_db, "jobs_outbox", "COMPLETED")
    _audit(outbox_db, j_ran, "COMPLETED")
    _audit(outbox_db, j_audit_failed, "FAILED")
    _audit(outbox_db, j_completed, "COMPLETED")
    ghost = str(uuid.uuid4())
    ids = [e_failed.upper(), e_pending, j_ran, j_audit_failed, j_no_audit, j_completed, ghost]
    plan = await _propose(settings, "reconcile_outbox", service="event", ids=ids)

    events, jobs = plan.steps
    assert [_human(s) for s in plan.steps] == [
        ("reconcile_sql", "event_queue: 1 row(s) FAILED -> COMPLETED (processed after a replay), one transaction",
         "event.event_queue", "each row still FAILED", SQL_BACKUP, True),
        ("reconcile_sql", "jobs_outbox: 1 row(s) FAILED -> COMPLETED (job_audit shows the job COMPLETED), one "
         "transaction", "event.jobs_outbox", "each row still FAILED", SQL_BACKUP, True),
    ]
    # an id given in capitals is the same row (PostgreSQL's uuid), named as PostgreSQL writes it
    assert [(r.id, r.updated_at) for r in events.operation.rows] == [(e_failed, None)]
    assert [(r.id, r.updated_at) for r in jobs.operation.rows] == [(j_ran, None)]
    for step, table in ((events, "event_queue"), (jobs, "jobs_outbox")):
        op = step.operation
        assert (op.service, op.table, op.set_status, op.expect_status) == ("event", table, "COMPLETED", "FAILED")
    assert events.checks == [_row_check("event_queue", e_failed, "FAILED")]  # no confirm step: nothing replayed
    assert jobs.checks == [_row_check("jobs_outbox", j_ran, "FAILED")]
    assert events.params == [["COMPLETED", e_failed, "FAILED"]] and jobs.params == [["COMPLETED", j_ran, "FAILED"]]
    assert events.command == 'UPDATE "event_queue" SET "status" = $1, "updated_at" = now() WHERE "id" = $2 AND ' \
                             '"status" = $3'
    # a COMPLETED row of a succeeded job is deleted only once its success event was pushed: not yet here
    unpushed = [w for w in plan.warnings if w.startswith(f"job {j_completed}: its success event was not pushed (")]
    assert len(unpushed) == 1 and unpushed[0].endswith("trace_job names that link; nothing deleted")
    assert sorted(w for w in plan.warnings if w not in unpushed) == sorted([
        f"no row {ghost} in event_queue, jobs_outbox or (as a job id) job_audit of service event (purged, or another "
        "service?)",
        f"jobs_outbox row {j_audit_failed} is FAILED but its job_audit is FAILED: the job did not succeed; retry it "
        "rather than marking it done",
        f"jobs_outbox row {j_no_audit} is FAILED but its job_audit is missing: the job did not succeed; retry it "
        "rather than marking it done",
    ])
    assert plan.notes == [f"event_queue row {e_pending} is PENDING: nothing to reconcile", RUNBOOK_5]
    assert plan.candidates_found == 6 and not plan.truncated
    assert (plan.blast_radius.rows, plan.blast_radius.tables) == (2, ["event.event_queue", "event.jobs_outbox"])
    assert plan.summary == "service event: mark 2 FAILED outbox row(s) COMPLETED"


async def test_reconcile_with_nothing_failed_refuses_and_says_why(settings, outbox_db) -> None:
    pending = _row(outbox_db, "event_queue", "PENDING")
    ghost = str(uuid.uuid4())
    with pytest.raises(NotFound) as info:
        await _propose(settings, "reconcile_outbox", service="event", ids=[pending, ghost])
    assert str(info.value) == (
        "none of the 2 id(s) is, in service event, a FAILED row that can be reconciled, a job whose audit row was left "
        "open under its completion guard, or a succeeded job whose outbox row was left after its success event was "
        f"pushed (no row {ghost} in event_queue, jobs_outbox or (as a job id) job_audit of service event (purged, or "
        f"another service?); event_queue row {pending} is PENDING: nothing to reconcile; {RUNBOOK_5})")


async def test_requeue_by_ids_reads_every_sign_of_a_push(settings, outbox_db, redis_client: redis.Redis) -> None:
    hashed, listed, guarded, audited, lost, elsewhere = (_row(outbox_db, "jobs_outbox", "PROCESSING", age_s=900)
                                                         for _ in range(6))
    recent = _row(outbox_db, "jobs_outbox", "PROCESSING", age_s=100)
    pending = _row(outbox_db, "jobs_outbox", "PENDING", age_s=900)
    redis_client.hset(f"bull:mail:{hashed}", mapping={"name": "t", "data": "{}"})  # the job hash, no list yet
    redis_client.rpush("bull:mail:wait", "x", listed, "y")  # listed in its queue, hash not written yet
    redis_client.set(f"job:completed:{guarded}", "1")  # the worker ran it, BullMQ removed it
    _audit(outbox_db, audited, "PROCESSING")  # job_audit has it, in any state
    redis_client.hset(f"bull:other:{elsewhere}", mapping={"name": "t", "data": "{}"})  # another queue's job
    redis_client.rpush("bull:other:wait", elsewhere)
    ids = [hashed, listed, guarded, audited, lost, elsewhere, recent, pending]
    plan = await _propose(settings, "requeue_stuck_job", service="event", ids=ids)

    done, requeued = plan.steps
    guard = "each row still PROCESSING with the same updated_at"
    never_pushed = (f"{guard}; and, as when planned, BullMQ still knows nothing of each job (no job hash, no lock "
                    "key, in no state list or set), its completion guard is unset and it has no job_audit row")
    assert [_human(s) for s in plan.steps] == [
        ("reconcile_sql", "jobs_outbox: 4 row(s) PROCESSING -> COMPLETED (BullMQ or job_audit shows the job was "
         "pushed), one transaction", "event.jobs_outbox", guard, SQL_BACKUP, True),
        ("requeue_sql", "jobs_outbox: 2 row(s) PROCESSING -> PENDING (never pushed: the outbox runner pushes it "
         "again), one transaction", "event.jobs_outbox", never_pushed, SQL_BACKUP, True),
    ]
    stamps = {i: _stamp(outbox_db, i) for i in ids}
    pushed = [hashed, listed, guarded, audited]
    assert sorted((r.id, r.updated_at) for r in done.operation.rows) == sorted((i, stamps[i]) for i in pushed)
    assert sorted((r.id, r.updated_at) for r in requeued.operation.rows) == sorted(
        (i, stamps[i]) for i in (lost, elsewhere))
    assert sorted(done.checks, key=lambda c: c.args["id"]) == sorted(
        (_row_check("jobs_outbox", i, "PROCESSING", stamps[i]) for i in pushed), key=lambda c: c.args["id"])
    assert [c.kind for c in requeued.checks] == ["row_matches", "bull_job_absent", "key_absent",
                                                 "audit_row_absent"] * 2  # each row's verdict re-checked at apply
    assert {c.args["job_id"]: c.args["queue"] for c in requeued.checks if c.kind == "bull_job_absent"} == {
        lost: "mail", elsewhere: "mail"}  # the row's own queue: a job of that id in another queue is not it
    assert sorted(requeued.params) == sorted(["PENDING", i, "PROCESSING", stamps[i]] for i in (lost, elsewhere))
    assert (requeued.operation.set_status, requeued.operation.expect_status) == ("PENDING", "PROCESSING")
    assert done.command.endswith('WHERE "id" = $2 AND "status" = $3 AND "updated_at" = $4')
    assert len(plan.warnings) == 2
    assert f"jobs_outbox row {pending} is PENDING, not PROCESSING: skipped" in plan.warnings
    (young,) = [w for w in plan.warnings if recent in w]
    assert young.startswith(f"jobs_outbox row {recent} was updated 10")  # 100 s, or 101 under load
    assert young.endswith(" s ago (< 300 s): a runner may be pushing it right now; skipped")
    assert plan.notes == ["a requeued job is pushed with job id = row id; the worker's job:completed guard and "
                          "job_audit protect against a double run"]
    assert plan.candidates_found == 8 and not plan.truncated
    assert (plan.blast_radius.rows, plan.blast_radius.tables) == (6, ["event.jobs_outbox"])
    assert plan.summary == ("unstick 6 jobs_outbox row(s) of service event: 4 to COMPLETED (already pushed), 2 back "
                            "to PENDING")


async def test_requeue_of_pushed_rows_only_adds_no_requeue_note(settings, outbox_db, redis_client) -> None:
    row = _row(outbox_db, "jobs_outbox", "PROCESSING", age_s=900)
    redis_client.set(f"job:completed:{row}", "1")
    plan = await _propose(settings, "requeue_stuck_job", service="event")
    assert [s.action for s in plan.steps] == ["reconcile_sql"] and plan.notes == [] and plan.warnings == []
    assert plan.summary == "unstick 1 jobs_outbox row(s) of service event: 1 to COMPLETED (already pushed), 0 back " \
                           "to PENDING"


async def test_requeue_takes_rows_stuck_past_the_threshold_oldest_first_up_to_the_cap(
    tmp_path, outbox_db, redis_url
) -> None:
    oldest, older, old = (_row(outbox_db, "jobs_outbox", "PROCESSING", age_s=a) for a in (900, 700, 310))
    _row(outbox_db, "jobs_outbox", "PROCESSING", age_s=290)  # under the 300 s threshold
    _row(outbox_db, "jobs_outbox", "COMPLETED", age_s=1000)
    _row(outbox_db, "jobs_outbox", "PENDING", age_s=1000)
    at_cap = await _propose(settings_for(tmp_path / "a", outbox_db, redis_url, limits={"max_plan_messages": 3}),
                            "requeue_stuck_job", service="event")
    (step,) = at_cap.steps
    assert sorted(r.id for r in step.operation.rows) == sorted([oldest, older, old])
    assert not at_cap.truncated and at_cap.candidates_found == 3 and at_cap.warnings == []
    capped = await _propose(settings_for(tmp_path / "b", outbox_db, redis_url, limits={"max_plan_messages": 2}),
                            "requeue_stuck_job", service="event")
    (step,) = capped.steps
    assert sorted(r.id for r in step.operation.rows) == sorted([oldest, older])  # the oldest first
    assert capped.truncated and capped.candidates_found == 2 and capped.blast_radius.rows == 2


async def test_a_row_without_updated_at_is_never_taken_for_stuck(tmp_path, outbox_db, redis_url) -> None:
    """A schema whose updated_at allows NULL: asked for by id, a PROCESSING row without it has an unknown age,
    so it is skipped with that reason (it crashed the planner); the threshold search never meets it."""
    row = _row(outbox_db, "jobs_outbox", "PROCESSING", age_s=900)
    with psycopg.connect(outbox_db, autocommit=True) as conn:
        conn.execute("ALTER TABLE jobs_outbox ALTER COLUMN updated_at DROP NOT NULL")
        conn.execute("UPDATE jobs_outbox SET updated_at = NULL WHERE id = %s", (row,))
    settings = settings_for(tmp_path, outbox_db, redis_url, limits={"processing_ageing_s": 1})
    with pytest.raises(NotFound) as info:
        await _propose(settings, "requeue_stuck_job", service="event", ids=[row])
    assert f"jobs_outbox row {row} has no updated_at: how long it has been PROCESSING is unknown; skipped" in str(
        info.value)
    with pytest.raises(NotFound) as info:
        await _propose(settings, "requeue_stuck_job", service="event")
    assert str(info.value) == "no jobs_outbox row of service event stuck PROCESSING for more than 1 s"


async def test_requeue_threshold_is_the_configured_one(tmp_path, outbox_db, redis_url) -> None:
    row = _row(outbox_db, "jobs_outbox", "PROCESSING", age_s=120)
    settings = settings_for(tmp_path, outbox_db, redis_url, limits={"processing_ageing_s": 100})
    plan = await _propose(settings, "requeue_stuck_job", service="event")
    assert [r.id for r in plan.steps[0].operation.rows] == [row]
    by_id = await _propose(settings, "requeue_stuck_job", service="event", ids=[row])
    assert [r.id for r in by_id.steps[0].operation.rows] == [row] and by_id.warnings == []
    strict = settings_for(tmp_path / "strict", outbox_db, redis_url, limits={"processing_ageing_s": 200})
    with pytest.raises(NotFound) as info:
        await _propose(strict, "requeue_stuck_job", service="event")
    assert str(info.value) == "no jobs_outbox row of service event stuck PROCESSING for more than 200 s"
    with pytest.raises(NotFound, match=r"was updated 12\d s ago \(< 200 s\)"):
        await _propose(strict, "requeue_stuck_job", service="event", ids=[row])


def _dead(r: redis.Redis, message_id: str, event: dict) -> str:
    payload = js({"success": True, "type": event["type"], "id": event["id"], "payload": js(event)})
    return r.xadd(DLQ, {"messageId": message_id, "error": "boom", "payload": payload, "timestamp": "1"}).decode()


@pytest.fixture
def group(redis_client: redis.Redis) -> None:
    redis_client.xgroup_create(STREAM, GROUP, id="0", mkstream=True)


def _sql_steps(plan: Plan) -> list:
    return [s for s in plan.steps if s.action == "reconcile_sql"]


async def test_a_replay_reconciles_its_events_in_the_service_that_emitted_them(tmp_path, outbox_db, redis_url,
                                                                             redis_client, group) -> None:
    services = {"event": {"postgres": outbox_db}, "user": {"postgres": outbox_db},
                "orders": {"postgres": outbox_db, "emitter": "ms-shop"}}
    settings = settings_for(tmp_path, None, redis_url, services=services)
    by_user, by_shop, by_event = new_event(emitter="ms-user"), new_event(emitter="ms-shop"), new_event()
    for event in (by_user, by_shop, by_event):
        _row(outbox_db, "event_queue", "FAILED", row_id=event["id"])
    _dead(redis_client, "1700000000000-0", by_user)
    _dead(redis_client, "1700000000001-0", by_user)  # the same event dead-lettered twice: one row
    _dead(redis_client, "1700000000002-0", by_shop)
    _dead(redis_client, "1700000000003-0", by_event)

    user = await _propose(settings, "dlq_replay", stream=STREAM, ids=["1700000000000-0", "1700000000001-0"])
    (sql,) = _sql_steps(user)
    assert "service user chosen from the events' emitter" in user.notes
    assert sql.target == "user.event_queue" and [r.id for r in sql.operation.rows] == [by_user["id"]]
    confirmed = Check(kind="step_ok", args={"step": 3, "output_key": "confirmed"})
    assert sql.checks == [_row_check("event_queue", by_user["id"], "FAILED", service="user"), confirmed]
    assert sql.description == "event_queue: 1 row(s) FAILED -> COMPLETED (replay confirmed), one transaction"
    assert user.blast_radius.tables == ["user.event_queue"]

    shop = await _propose(settings, "dlq_replay", stream=STREAM, ids=["1700000000002-0"])
    assert _sql_steps(shop)[0].target == "orders.event_queue"  # its configured emitter, not ms-orders
    assert "service orders chosen from the events' emitter" in shop.notes

    mixed = await _propose(settings, "dlq_replay", stream=STREAM, ids=["1700000000002-0", "1700000000003-0"])
    assert _sql_steps(mixed) == [] and mixed.blast_radius.rows == 0
    assert "pass service=<name> to also reconcile the replayed events' event_queue rows" in mixed.notes
    assert not any("chosen from the events' emitter" in n for n in mixed.notes)

    given = await _propose(settings, "dlq_replay", stream=STREAM, service="event",
                           ids=["1700000000002-0", "1700000000003-0"])
    (sql,) = _sql_steps(given)  # the service given decides, whatever the emitters
    assert sql.target == "event.event_queue" and sorted(r.id for r in sql.operation.rows) == sorted(
        [by_shop["id"], by_event["id"]])
    assert not any("chosen from" in n or "pass service=" in n for n in given.notes)


async def test_a_replay_of_events_without_a_row_id_plans_no_sql(settings, outbox_db, redis_client, group) -> None:
    event = new_event()
    event["id"] = "evt-1"  # not a row UUID: no event_queue row can be named by it
    _dead(redis_client, "1700000000000-0", event)
    plan = await _propose(settings, "dlq_replay", stream=STREAM, service="event")
    assert _sql_steps(plan) == [] and plan.warnings == []
    assert not any("pass service=" in n or "event_queue" in n for n in plan.notes)
    unnamed = await _propose(settings, "dlq_replay", stream=STREAM)
    assert not any("pass service=" in n or "chosen from" in n for n in unnamed.notes)


async def test_requeue_looks_for_a_listed_job_only_as_far_as_the_configured_scan(tmp_path, outbox_db, redis_url,
                                                                               redis_client) -> None:
    """``[limits] bull_list_scan_max`` bounds the LPOS from each end of a BullMQ list (the server's load)."""
    near, deep = (_row(outbox_db, "jobs_outbox", "PROCESSING", age_s=900) for _ in range(2))
    filler = [f"j{i}" for i in range(30)]
    redis_client.rpush("bull:mail:wait", *filler[:5], near, *filler[5:15], deep, *filler[15:])
    settings = settings_for(tmp_path, outbox_db, redis_url, limits={"bull_list_scan_max": 10})
    plan = await _propose(settings, "requeue_stuck_job", service="event")
    done, requeued = plan.steps
    assert [r.id for r in done.operation.rows] == [near]  # 6th from the head: within 10
    assert [r.id for r in requeued.operation.rows] == [deep]  # 17th from the head, 16th from the tail: not seen


async def test_the_sql_row_cap_below_the_plan_cap_hides_no_row(tmp_path, outbox_db, redis_url) -> None:
    """``[limits] max_rows`` bounds each read, not the plan: ids are read in chunks of at most ``max_rows``, so a
    row that exists is never named missing, and a stuck-rows search cut by ``max_rows`` says it was cut."""
    events = [_row(outbox_db, "event_queue", "FAILED") for _ in range(3)]
    jobs = [_row(outbox_db, "jobs_outbox", "FAILED") for _ in range(3)]
    for job in jobs:
        _audit(outbox_db, job, "COMPLETED")
    small = settings_for(tmp_path / "s", outbox_db, redis_url, limits={"max_rows": 2})
    plan = await _propose(small, "reconcile_outbox", service="event", ids=events + jobs)
    assert plan.warnings == [] and plan.candidates_found == 6
    assert [sorted(r.id for r in s.operation.rows) for s in plan.steps] == [sorted(events), sorted(jobs)]

    stuck = [_row(outbox_db, "jobs_outbox", "PROCESSING", age_s=900 - i) for i in range(3)]
    by_ids = await _propose(small, "requeue_stuck_job", service="event", ids=stuck)
    assert sorted(r.id for r in by_ids.steps[0].operation.rows) == sorted(stuck) and by_ids.warnings == []
    searched = await _propose(small, "requeue_stuck_job", service="event")
    assert [r.id for r in searched.steps[0].operation.rows] == stuck[:2]  # the oldest first, cut by max_rows
    assert searched.truncated


async def test_an_id_column_that_is_not_unique_is_refused_not_cut(settings, outbox_db) -> None:
    row = _row(outbox_db, "event_queue", "FAILED")
    with psycopg.connect(outbox_db, autocommit=True) as conn:  # a copy of the table without its primary key
        conn.execute("ALTER TABLE event_queue DROP CONSTRAINT event_queue_pkey")
        conn.execute("INSERT INTO event_queue SELECT * FROM event_queue")
    with pytest.raises(RemediationRefused) as info:
        await _propose(settings, "reconcile_outbox", service="event", ids=[row])
    assert str(info.value) == ("service event: 1 id(s) matched more rows than ids; the id column configured "
                               "([conventions.columns]) is not unique there: no plan made")
