"""The tracer itself (:mod:`tools.outbox.trace`): its event verdicts, its "not found", its Redis outages.

Lean on purpose (the mutation bench runs it once per mutant): the event-row verdicts and the
"not found" reports are checked on plain data (a ``Tracer`` whose row needs no I/O), the rest
on one PostgreSQL database shared by the module's tests (each writes its own rows) and a
scratch Redis. Promises defended:

- an event row's ages in seconds against ``[limits] pending_ageing_s`` / ``processing_ageing_s``,
  at exactly the limit and one second each side;
- a service that could not be read makes a missing item ``inconclusive``, never ``not_found``;
  Redis down leaves the SQL hops and marks the Redis hops unknown, with ``redis`` unavailable;
- the clock offset (Redis TIME minus the database's now()) is measured once per service.

The scenario tests of ``test_trace_job.py`` / ``test_trace_event.py`` cover the chains at length.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

import psycopg
import pytest

from server.config import Settings
from server.errors import InvalidArgument, ServiceUnavailable
from tests.conftest import _with_database, as_url
from tests.outbox import sim
from tests.outbox import trace_fixtures as fx
from tests.outbox.conftest import SCHEMA_SQL
from tools.outbox.model import OutboxRow, ServiceProblem
from tools.outbox.rows import RowTimes
from tools.outbox.trace import Found, Tracer

pytestmark = pytest.mark.anyio

# one PostgreSQL database for the module, the scratch Redis, tracers on both (tests/outbox/trace_fixtures.py)
module_db, db, r, tracer_for = fx.module_db, fx.db, fx.r, fx.tracer_for
dead_port_url, down_pg = fx.dead_port_url, fx.down_pg


# -- plain data: event rows and "not found" ----------------------------------------------------------


@pytest.fixture
def settings(make_settings) -> Settings:
    s = make_settings(services={"user": {"postgres": "postgresql://x@127.0.0.1:1/none"},
                                "billing": {"postgres": "postgresql://x@127.0.0.1:1/none"}})
    assert (s.limits.pending_ageing_s, s.limits.processing_ageing_s) == (300, 300)
    return s


def event(status: str, age_s: float | None = 10.0, updated_age_s: float | None = None, hint: str | None = None,
          **columns: Any) -> Found:
    row = OutboxRow(service="user", table="event_queue", id="e-1", status=status, type="user:created", age_s=age_s,
                    updated_age_s=updated_age_s, hint=hint, columns=columns)
    return Found(row, RowTimes(None, None, None, None, None, None))


async def chain(settings: Settings, found: Found) -> tuple[Any, list[tuple[str, str, str, str | None]]]:
    hops, findings = await Tracer(None, settings, None).event_chain(found, "event_queue", "")  # type: ignore[arg-type]
    return hops, [(f.code, f.severity, f.sentence, f.hop) for f in findings]


@pytest.mark.parametrize(("age_s", "expected"), [
    (299.0, ("event_pending", "info", "event e-1 (user:created) is PENDING for 299s: waiting for the outbox runner")),
    (300.0, ("event_pending", "info", "event e-1 (user:created) is PENDING for 300s: waiting for the outbox runner")),
    (301.0, ("event_pending", "error", "event e-1 (user:created) is PENDING for 301s (> 300s): the outbox runner is "
                                       "stopped or Redis is unreachable")),
])
async def test_a_pending_event_is_late_after_pending_ageing_s(settings, age_s, expected) -> None:
    hops, findings = await chain(settings, event("PENDING", age_s=age_s, updated_age_s=1.0))
    assert findings == [(*expected, "event_queue")]
    (h,) = hops
    assert (h.name, h.ref, h.found, h.state, h.healthy, h.detail) == (
        "event_queue", "user.event_queue e-1", True, "PENDING", False, "user:created PENDING")
    assert h.row is not None and h.row.id == "e-1"


async def test_a_pending_event_without_an_age_is_not_late(settings) -> None:
    _, findings = await chain(settings, event("PENDING", age_s=None, hint="waiting"))
    assert findings[0][:3] == ("event_pending", "info",
                               "event e-1 (user:created) is PENDING for 0s: waiting for the outbox runner")


@pytest.mark.parametrize(("since", "expected"), [
    (300.0, ("event_pending", "info", "event e-1 is being pushed (PROCESSING 300s)")),
    (301.0, ("stuck_processing", "error", "event e-1 is PROCESSING for 301s (> 300s): the runner died between claim "
                                          "and push")),
])
async def test_a_processing_event_is_stuck_after_processing_ageing_s(settings, since, expected) -> None:
    hops, findings = await chain(settings, event("PROCESSING", age_s=9999.0, updated_age_s=since, hint="claimed"))
    assert findings == [(*expected, "event_queue")]
    assert hops[0].detail == "claimed"


async def test_a_processing_event_without_updated_at_ages_from_created_at(settings) -> None:
    _, findings = await chain(settings, event("PROCESSING", age_s=301.0, updated_age_s=None))
    assert findings[0][0] == "stuck_processing"
    _, findings = await chain(settings, event("PROCESSING", age_s=None, updated_age_s=None))
    assert findings[0][2] == "event e-1 is being pushed (PROCESSING 0s)"


async def test_an_event_the_runner_gave_up_on(settings) -> None:
    hops, findings = await Tracer(None, settings, None).event_chain(  # type: ignore[arg-type]
        event("FAILED", lastError="READONLY " + "z" * 400), "outcome_event", "outcome_event.")
    (f,) = findings
    assert (f.code, f.severity, f.hop) == ("event_pending", "error", "outcome_event")
    assert f.sentence == f"event e-1 is FAILED: the outbox runner gave up pushing it (READONLY {'z' * 291})"
    assert f.next_step == ("fix the cause in the runner logs, then propose_remediation(symptom='requeue_stuck_job', "
                           "service='user', ids=['e-1']) puts it back to PENDING")
    assert hops[0].name == "outcome_event"
    _, findings = await chain(settings, event("FAILED"))
    assert findings[0][2] == "event e-1 is FAILED: the outbox runner gave up pushing it"


@pytest.mark.parametrize("targets", [None, [], "user:created"])
async def test_a_completed_event_with_no_target_was_pushed_nowhere(settings, targets) -> None:
    hops, findings = await Tracer(None, settings, None).event_chain(  # type: ignore[arg-type]
        event("COMPLETED", target_services=targets), "event_queue", "")
    (f,) = findings
    assert (f.code, f.severity, f.sentence, f.hop) == (
        "not_found", "error", "event e-1 is COMPLETED but has no target_services: it was pushed nowhere", "event_queue")
    assert f.next_step == "check the producer's target_services"
    assert hops[0].healthy is True


def test_the_outcome_types_of_a_job_every_naming_variant(make_settings) -> None:
    s = make_settings(services={"user": {"postgres": "postgresql://x@h/d"},
                                "pay": {"postgres": "postgresql://x@h/d", "emitter": "ms-billing"}})
    tracer = Tracer(None, s, None)  # type: ignore[arg-type]
    assert tracer.outcome_types("user", ["ms-orders", None, "ms-user", "orders"]) == (
        ["job.outbox.success", "orders:job:outbox:success", "user:job:outbox:success"],
        ["job.outbox.failed", "orders:job:outbox:failure", "user:job:outbox:failure", "orders:job:outbox:failed",
         "user:job:outbox:failed"],
    )
    assert tracer.outcome_types("pay", [])[0] == ["job.outbox.success", "billing:job:outbox:success"]


def test_a_missing_item_with_a_service_down_is_inconclusive_never_not_found(settings) -> None:
    tracer = Tracer(None, settings, None)  # type: ignore[arg-type]
    tracer.unavailable = [ServiceProblem(service="billing", error="connection refused"),
                          ServiceProblem(service="elsewhere", error="x")]
    report = tracer._not_found("event", "e-1", None, ["user", "billing"], "event_queue")
    v = report.verdict
    assert (v.code, v.severity, v.hop) == ("inconclusive", "warning", "event_queue")
    assert v.sentence == ("no event_queue row with id e-1 in user, but 1 service(s) could not be searched (billing: "
                          "connection refused): the event may be there")
    assert v.next_step == "fix the access to billing and trace again, or pass service=..."
    assert (report.kind, report.id, report.service, report.searched_services, report.findings) == (
        "event", "e-1", None, ["user"], [v])
    (h,) = report.hops
    assert (h.name, h.ref, h.found, h.state, h.healthy, h.detail) == (
        "event_queue", "event_queue e-1", False, "absent", None, v.sentence)
    assert report.unavailable == tracer.unavailable
    tracer.unavailable = [ServiceProblem(service="user", error="a"), ServiceProblem(service="billing", error="b")]
    v = tracer._not_found("job", "j", "user", ["user", "billing"], "jobs_outbox").verdict
    assert v.sentence == ("no jobs_outbox row with id j in no service, but 2 service(s) could not be searched (user: "
                          "a; billing: b): the job may be there")
    assert v.next_step == "fix the access to user, billing and trace again, or pass service=..."


def test_a_missing_item_with_every_service_read_is_not_found(settings) -> None:
    tracer = Tracer(None, settings, None)  # type: ignore[arg-type]
    tracer.unavailable = [ServiceProblem(service="elsewhere", error="x")]  # not one of the services searched
    report = tracer._not_found("job", "j-1", "user", ["user"], "jobs_outbox")
    v = report.verdict
    assert (v.code, v.severity, v.hop) == ("not_found", "warning", "jobs_outbox")
    assert v.sentence == ("no jobs_outbox row with id j-1 in user. COMPLETED rows older than the retention (86400s) "
                          "are purged, so an old finished job leaves no row; a recent one was never written to these "
                          "databases")
    assert (report.kind, report.service, report.searched_services) == ("job", "user", ["user"])
    v = tracer._not_found("event", "e", None, ["user", "billing"], "event_queue").verdict
    assert v.sentence.startswith("no event_queue row with id e in user, billing. COMPLETED rows older")


# -- real PostgreSQL and Redis: one database for the module ------------------------------------------


async def test_a_delivered_event_is_ok_with_the_clock_offset_measured_once(db, r, tracer_for) -> None:
    event_id = sim.insert_event(db, targets=["user:created", "user:audit"])
    pushed = sim.runner_push_event(db, r, event_id)
    for stream, entry in pushed:
        sim.ensure_group(r, stream, "pp")
        sim.consumer_read(r, stream, "pp", "c-1")
        sim.consumer_ack(r, stream, "pp", entry)
    tracer = tracer_for()
    report = await tracer.trace_event("user", event_id)
    assert (report.verdict.code, report.verdict.sentence) == (
        "ok", f"event {event_id} was pushed and acknowledged by every consumer group of its streams")
    assert (report.kind, report.id, report.service, report.searched_services) == ("event", event_id, "user", ["user"])
    assert [(h.name, h.state) for h in report.hops] == [
        ("event_queue", "COMPLETED"), ("stream_entry", "present"), ("group", "acknowledged"),
        ("stream_entry", "present"), ("group", "acknowledged")]
    assert [h.entry.entry_id for h in report.hops if h.name == "stream_entry"] == [e for _, e in pushed]
    assert list(report.clock_offsets_ms) == ["user"] and abs(report.clock_offsets_ms["user"]) < 1000
    assert tracer.offsets == report.clock_offsets_ms
    assert [s.model_dump()["instance"] for s in report.redis_sources] == ["default"]
    assert report.unavailable == []


async def test_an_event_found_in_one_service_while_another_is_down(db, r, tracer_for, module_db) -> None:
    event_id = sim.insert_event(db, status="PENDING", age_s=5)
    services = {"user": {"postgres": module_db}, "billing": {"postgres": down_pg()}}
    report = await tracer_for(services=services).trace_event(None, event_id)
    assert (report.verdict.code, report.service, report.searched_services) == ("event_pending", "user", ["user"])
    assert [p.service for p in report.unavailable] == ["billing"]
    report = await tracer_for(services=services).trace_event(None, str(uuid.uuid4()))
    assert report.verdict.code == "inconclusive", report.verdict.sentence
    assert report.searched_services == ["user"]


async def test_an_unknown_event_is_not_found_when_every_service_answered(db, tracer_for) -> None:
    missing = str(uuid.uuid4())
    report = await tracer_for().trace_event("user", missing)
    assert (report.verdict.code, report.hops[0].ref, report.searched_services, report.service) == (
        "not_found", f"event_queue {missing}", ["user"], "user")


async def test_a_named_service_is_the_only_one_searched(db, tracer_for, module_db) -> None:
    services = {"user": {"postgres": module_db}, "billing": {"postgres": down_pg()}}
    report = await tracer_for(services=services).trace_event("user", str(uuid.uuid4()))
    assert (report.verdict.code, report.unavailable, report.searched_services) == ("not_found", [], ["user"])


async def test_the_findings_are_ranked_worst_first(db, r, tracer_for) -> None:
    event_id = sim.insert_event(db, targets=["user:created", "user:missing"])
    (stream, _), = sim.runner_push_event(db, r, event_id)[:1]
    r.delete("stream:user:missing")
    sim.ensure_group(r, stream, "pp")
    sim.consumer_read(r, stream, "pp", "c-1")
    report = await tracer_for().trace_event("user", event_id)
    assert [(f.code, f.severity) for f in report.findings] == [("not_found", "error"), ("in_pel", "info")]
    assert report.verdict.code == "not_found"


async def test_an_unhealthy_hop_no_rule_explains_is_inconclusive_not_ok(db, r, tracer_for) -> None:
    """An event_queue status the conventions do not name (here ARCHIVED): delivered, yet not called ok."""
    event_id = sim.insert_event(db, targets=["user:created"])
    ((stream, entry),) = sim.runner_push_event(db, r, event_id)
    db.execute("UPDATE event_queue SET status = 'ARCHIVED' WHERE id = %s", (event_id,))
    sim.ensure_group(r, stream, "pp")
    sim.consumer_read(r, stream, "pp", "c-1")
    sim.consumer_ack(r, stream, "pp", entry)
    report = await tracer_for().trace_event("user", event_id)
    assert (report.verdict.code, report.verdict.hop) == ("inconclusive", "event_queue"), report.verdict.sentence
    assert report.findings == []


async def test_an_event_id_that_is_not_a_uuid_is_refused_when_a_service_is_named(tracer_for) -> None:
    refusal = re.escape("event_id 'nope' is not a UUID, and event_queue.id is a uuid column")
    with pytest.raises(InvalidArgument, match=refusal):
        await tracer_for().trace_event("user", "nope")
    report = await tracer_for().trace_event(None, "nope")  # every service: not a row of any
    assert report.verdict.code == "not_found"
    for bad in ("", "e" * 101):
        with pytest.raises(InvalidArgument, match=re.escape("event_id must be 1 to 100 characters long")):
            await tracer_for().trace_event("user", bad)
    with pytest.raises(InvalidArgument, match="is not a UUID"):  # 100 characters pass the length check
        await tracer_for().trace_event("user", "e" * 100)


async def test_redis_down_leaves_the_sql_hops_and_marks_the_stream_hops_unknown(db, tracer_for) -> None:
    event_id = sim.insert_event(db, status="COMPLETED", targets=["user:created"])
    tracer = tracer_for(redis={"url": dead_port_url()})
    report = await tracer.trace_event("user", event_id)
    assert [(h.name, h.ref, h.state, h.healthy) for h in report.hops] == [
        ("event_queue", f"user.event_queue {event_id}", "COMPLETED", True),
        ("stream_entry", "stream:user:created", "unknown", None)]
    assert report.hops[1].detail == "Redis is unavailable: this hop could not be observed"
    assert [p.service for p in report.unavailable] == ["redis"]
    assert report.clock_offsets_ms == {} and tracer.redis_ok is False and tracer.redis_down == {"default"}


async def test_redis_down_for_a_pushed_job(db, tracer_for) -> None:
    job_id = sim.insert_job(db, status="COMPLETED", updated_age_s=20, age_s=20)
    report = await tracer_for(redis={"url": dead_port_url()}).trace_job("user", job_id)
    assert (report.verdict.code, report.verdict.severity) == ("pushed_not_consumed", "warning")
    assert [(h.name, h.state) for h in report.hops] == [
        ("jobs_outbox", "COMPLETED"), ("bullmq_job", "unknown"), ("completion_guard", "unknown"),
        ("job_audit", "absent")]
    assert [p.service for p in report.unavailable] == ["redis"]  # recorded once for three Redis steps


async def test_a_job_with_its_bullmq_job_and_audit(db, r, tracer_for) -> None:
    job_id = sim.insert_job(db, target="user-queue", age_s=30)
    sim.runner_push_job(db, r, job_id)
    sim.worker_take(db, r, job_id, "user-queue", age_s=2)
    report = await tracer_for().trace_job("user", job_id)
    assert (report.verdict.code, report.kind, report.service, report.searched_services) == (
        "running", "job", "user", ["user"])
    hops = {h.name: h for h in report.hops}
    assert hops["bullmq_job"].ref == f"bull:user-queue:{job_id}" and hops["bullmq_job"].state == "active"
    assert hops["bullmq_job"].bull is not None and hops["bullmq_job"].bull.lock_exists is True
    assert hops["job_audit"].state == "PROCESSING"
    assert hops["jobs_outbox"].row is not None and hops["jobs_outbox"].row.hint
    assert [s.model_dump()["instance"] for s in report.redis_sources] == ["default"]


async def test_a_stalled_job_gets_the_queue_liveness(db, r, tracer_for) -> None:
    job_id = sim.insert_job(db, target="user-queue")
    sim.runner_push_job(db, r, job_id)
    sim.worker_take(db, r, job_id, "user-queue", lock=False)
    report = await tracer_for().trace_job("user", job_id)
    assert report.verdict.code == "stalled"
    bull = next(h for h in report.hops if h.name == "bullmq_job").bull
    assert bull is not None and bull.liveness is not None and bull.liveness.workers == 0
    assert "no worker of queue 'user-queue' is connected" in report.verdict.sentence
    r.set(f"bull:user-queue:{sim.CONV.bullmq_stalled_check_key}", "1", px=30_000)  # this queue's checker ran
    report = await tracer_for().trace_job("user", job_id)
    bull = next(h for h in report.hops if h.name == "bullmq_job").bull
    assert bull is not None and bull.liveness is not None and 0 < (bull.liveness.stalled_check_ttl_ms or 0) <= 30_000


async def test_an_overdue_delayed_job_gets_the_queue_liveness_a_scheduled_one_not(db, r, tracer_for) -> None:
    job_id = sim.insert_job(db, target="q")
    sim.runner_push_job(db, r, job_id)
    r.lrem("bull:q:wait", 1, job_id)
    seconds, micros = r.time()
    now_ms = seconds * 1000 + micros // 1000
    r.zadd("bull:q:delayed", {job_id: (now_ms - 120_000) * 4096})
    report = await tracer_for().trace_job("user", job_id)
    bull = next(h for h in report.hops if h.name == "bullmq_job").bull
    assert report.verdict.code == "pushed_not_consumed" and bull is not None and bull.liveness is not None
    r.zadd("bull:q:delayed", {job_id: (now_ms + 120_000) * 4096})
    report = await tracer_for().trace_job("user", job_id)
    bull = next(h for h in report.hops if h.name == "bullmq_job").bull
    assert report.verdict.code == "scheduled" and bull is not None and bull.liveness is None
    # due 10 s ago, within delayed_overdue_ms (60 s, in ms): not late, so the liveness is not read either
    r.zadd("bull:q:delayed", {job_id: (now_ms - 10_000) * 4096})
    report = await tracer_for(limits={"delayed_overdue_ms": 60_000}).trace_job("user", job_id)
    bull = next(h for h in report.hops if h.name == "bullmq_job").bull
    assert report.verdict.code == "scheduled" and bull is not None and bull.liveness is None


async def test_the_id_of_a_job_audit_row_traces_its_job(db, r, tracer_for) -> None:
    job_id = sim.insert_job(db, target="user-queue")
    sim.runner_push_job(db, r, job_id)
    sim.worker_take(db, r, job_id, "user-queue")
    audit_id = str(db.execute("SELECT id FROM job_audit WHERE job_id = %s", (job_id,)).fetchone()[0])
    report = await tracer_for().trace_job("user", audit_id)
    assert report.id == job_id
    assert report.id_note == (f"{audit_id} is the id of a job_audit row of service 'user', not a job id: its job_id "
                              f"is {job_id}; traced that job (pass job_id='{job_id}' next time)")


async def test_a_purged_job_is_found_by_its_outcome_event(db, r, tracer_for) -> None:
    job_id = sim.insert_job(db, target="user-queue")
    sim.runner_push_job(db, r, job_id)
    sim.worker_take(db, r, job_id, "user-queue")
    sim.worker_complete(db, r, job_id, "user-queue")
    outcome_id, outcome_type = sim.outcome_event_of(db, job_id)
    db.execute("DELETE FROM jobs_outbox WHERE id = %s", (job_id,))
    db.execute("DELETE FROM job_audit WHERE job_id = %s", (job_id,))
    r.delete(f"job:completed:{job_id}")
    report = await tracer_for().trace_job(None, job_id)
    assert report.verdict.code == "purged", report.verdict.sentence
    assert f"1 outcome event(s) in event_queue ({outcome_type})" in report.verdict.sentence
    assert report.service == "user"
    outcome_hops = [h for h in report.hops if h.name == "outcome_event"]
    assert [h.ref for h in outcome_hops] == [f"user.event_queue {outcome_id}"]


async def test_a_missing_job_with_a_service_down_is_inconclusive(db, tracer_for, module_db) -> None:
    services = {"user": {"postgres": module_db}, "billing": {"postgres": down_pg()}}
    report = await tracer_for(services=services).trace_job(None, str(uuid.uuid4()))
    assert (report.verdict.code, report.service, report.searched_services) == ("inconclusive", None, ["user"])
    assert "billing could not be searched" in report.verdict.sentence
    report = await tracer_for().trace_job(None, str(uuid.uuid4()))
    assert report.verdict.code == "not_found"


async def test_a_completed_job_still_in_the_outbox_follows_its_success_event(db, r, tracer_for) -> None:
    job_id = sim.insert_job(db, target="user-queue")
    sim.runner_push_job(db, r, job_id)
    sim.worker_take(db, r, job_id, "user-queue")
    sim.worker_complete(db, r, job_id, "user-queue")
    outcome_id, _ = sim.outcome_event_of(db, job_id)
    report = await tracer_for().trace_job("user", job_id)
    # the success event is still PENDING (no runner pushed it): that is the broken link
    assert (report.verdict.code, report.verdict.hop) == ("event_pending", "outcome_event"), report.verdict.sentence
    assert [h.ref for h in report.hops if h.name == "outcome_event"] == [f"user.event_queue {outcome_id}"]
    row = next(h for h in report.hops if h.name == "jobs_outbox").row  # its hint reads the job_audit status
    assert row is not None and row.hint == ("COMPLETED and job_audit COMPLETED, yet the row is still here: the success "
                                            "event was not processed (stream or common post-processor).")


async def test_the_clock_offset_is_zero_and_not_kept_when_the_database_cannot_be_read(tracer_for, module_db) -> None:
    tracer = tracer_for(services={"user": {"postgres": module_db}, "billing": {"postgres": down_pg()}})
    assert await tracer.clock_offset("billing", "default", "stream:x") == 0
    assert tracer.offsets == {}
    offset = await tracer.clock_offset("user", "default", "stream:x")
    assert tracer.offsets == {"user": offset} and abs(offset) < 1000
    tracer.offsets["user"] = 123_456  # measured once per call and service: the next hop reuses it
    assert await tracer.clock_offset("user", "default", "stream:x") == 123_456


async def test_the_clock_offset_is_zero_when_redis_cannot_be_read(tracer_for) -> None:
    tracer = tracer_for(redis={"url": dead_port_url()})
    assert await tracer.clock_offset("user", "default", "stream:x") == 0
    assert tracer.offsets == {} and [p.service for p in tracer.unavailable] == ["redis"]


async def test_the_clock_offset_on_a_cluster_reads_the_keys_node(cluster_backend, tracer_for) -> None:
    tracer = tracer_for(redis=cluster_backend.redis_config)
    offset = await tracer.clock_offset("user", "default", "stream:user:created")
    assert tracer.offsets == {"user": offset} and abs(offset) < 1000 and tracer.unavailable == []


async def test_redis_down_marks_every_target_stream_unknown(db, tracer_for) -> None:
    event_id = sim.insert_event(db, status="COMPLETED", targets=["user:created", "user:audit"])
    report = await tracer_for(redis={"url": dead_port_url()}).trace_event("user", event_id)
    assert [(h.name, h.ref, h.state) for h in report.hops[1:]] == [
        ("stream_entry", "stream:user:created", "unknown"), ("stream_entry", "stream:user:audit", "unknown")]


async def test_an_entry_no_group_read_is_aged_by_redis_clock(db, r, tracer_for) -> None:
    event_id = sim.insert_event(db, targets=["user:created"])
    ((stream, entry),) = sim.runner_push_event(db, r, event_id)
    r.xgroup_create(stream, "pp-stopped", id="0")
    report = await tracer_for().trace_event("user", event_id)
    assert (report.verdict.code, report.verdict.severity) == ("pushed_not_consumed", "info")
    assert re.search(rf"not read yet \(entry {entry}, \d+s old, group at 0-0\)", report.verdict.sentence)


async def test_a_job_id_out_of_bounds_is_refused_by_name(tracer_for) -> None:
    for bad in ("", "j" * 101, "j\x00"):
        with pytest.raises(InvalidArgument, match=r"^job_id must "):
            await tracer_for().trace_job("user", bad)


# -- survivors of the mutation run (docs/testing.md "tools/outbox/trace.py"): one chain each, every field --


async def test_a_finished_job_of_another_emitter_is_ok_through_its_pushed_success_event(db, r, tracer_for) -> None:
    """Job of emitter ms-orders in service user: its success event is orders:job:outbox:success (the row's emitter,
    not the service's), pushed and acknowledged; the guard is set and the outbox row cleaned up."""
    job_id = sim.insert_job(db, target="user-queue", emitter="ms-orders")
    sim.runner_push_job(db, r, job_id)
    sim.worker_take(db, r, job_id, "user-queue")
    sim.worker_complete(db, r, job_id, "user-queue")
    sim.success_post_processor_delete(db, job_id)
    outcome_id, outcome_type = sim.outcome_event_of(db, job_id)
    assert outcome_type == "orders:job:outbox:success"
    ((stream, entry),) = sim.runner_push_event(db, r, outcome_id)
    sim.ensure_group(r, stream, "pp")
    sim.consumer_read(r, stream, "pp", "c-1")
    sim.consumer_ack(r, stream, "pp", entry)
    report = await tracer_for().trace_job("user", job_id)
    assert (report.verdict.code, report.verdict.sentence) == (
        "ok", f"job {job_id} ran, succeeded, and its outbox row was cleaned up"), report.verdict.sentence
    assert report.findings == []
    assert list(report.clock_offsets_ms) == ["user"]  # measured for the outcome event's stream
    guard = next(h for h in report.hops if h.name == "completion_guard")
    assert (guard.ref, guard.found, guard.state, guard.healthy) == (f"job:completed:{job_id}", True, "set", True)
    (outcome,) = [h for h in report.hops if h.name == "outcome_event"]
    assert outcome.ref == f"user.event_queue {outcome_id}" and outcome.row is not None
    assert outcome.row.columns["payload"]["after"]["job_id"] == job_id and outcome.row.truncated is False
    assert [(h.name, h.state) for h in report.hops if h.name.startswith("outcome_event.")] == [
        ("outcome_event.stream_entry", "present"), ("outcome_event.group", "acknowledged")]
    assert next(h for h in report.hops if h.name == "outcome_event.stream_entry").ref == f"{stream} {entry}"


async def test_the_hints_and_payloads_of_the_rows_traced(db, r, tracer_for) -> None:
    """The rows' hints (with the job_audit status, the limits and the real column names) and uncut payloads."""
    tracer = tracer_for
    job_id = sim.insert_job(db, status="COMPLETED", target="user-queue", age_s=20)
    report = await tracer().trace_job("user", job_id)
    row = next(h for h in report.hops if h.name == "jobs_outbox").row
    assert row is not None and row.columns["payload"] == {"userId": 1} and row.truncated is False
    assert row.hint == ("COMPLETED (pushed to BullMQ queue 'user-queue') but no job_audit row: not consumed, the "
                        "worker is stopped or the target queue is wrong.")
    job_id = sim.insert_job(db, age_s=5)
    report = await tracer().trace_job("user", job_id)
    row = next(h for h in report.hops if h.name == "jobs_outbox").row
    assert row is not None and row.hint == "PENDING for 5s: waiting for the outbox runner (not late yet)."
    job_id = sim.insert_job(db, scheduled_in_s=600)
    report = await tracer().trace_job("user", job_id)
    row = next(h for h in report.hops if h.name == "jobs_outbox").row
    assert row is not None and re.fullmatch(r"PENDING, scheduled to run in (599|600)s: not late\.", row.hint or "")
    assert report.verdict.code == "pending_in_outbox" and report.findings == [report.verdict]
    assert re.fullmatch(rf"job {job_id} is PENDING, scheduled to run in (599|600)s: not late", report.verdict.sentence)
    event_id = sim.insert_event(db, status="FAILED", payload={"before": None, "after": {"id": 7}})
    db.execute("""UPDATE event_queue SET "lastError" = 'READONLY replica' WHERE id = %s""", (event_id,))
    report = await tracer().trace_event("user", event_id)
    (hop,) = report.hops
    assert hop.detail == "FAILED: the outbox runner gave up pushing the event. Last error: READONLY replica"
    assert hop.row is not None and hop.row.columns["payload"] == {"before": None, "after": {"id": 7}}


async def test_a_job_on_a_redis_instance_that_is_down_names_that_instance(db, r, tracer_for, redis_url) -> None:
    """Queue jobs-* lives on instance 'jobs' (down): the BullMQ job and the guard are read there, not on the default."""
    tracer = tracer_for(redis={"url": redis_url, "instances": {"jobs": {"url": dead_port_url(), "queues": ["jobs-*"]}}})
    job_id = sim.insert_job(db, status="COMPLETED", target="jobs-queue", age_s=20)
    r.set(f"job:completed:{job_id}", "true")  # on the default instance: must not be read as this job's guard
    report = await tracer.trace_job("user", job_id)
    (problem,) = report.unavailable
    print(problem)
    assert problem.service == "redis:jobs" and problem.error.startswith("Redis instance 'jobs'")
    assert [(h.name, h.state) for h in report.hops if h.name in ("bullmq_job", "completion_guard")] == [
        ("bullmq_job", "unknown"), ("completion_guard", "unknown")]
    assert [s.model_dump()["instance"] for s in report.redis_sources] == ["jobs"]
    assert tracer.redis_down == {"jobs"}


async def test_redis_down_names_the_error(db, tracer_for) -> None:
    job_id = sim.insert_job(db, status="COMPLETED", age_s=20)
    report = await tracer_for(redis={"url": dead_port_url()}).trace_job("user", job_id)
    (problem,) = report.unavailable
    assert problem.service == "redis" and problem.error.startswith("Redis"), problem.error
    assert problem.error != "None"


async def test_a_job_traced_in_a_named_service_does_not_search_the_others(db, r, tracer_for, module_db) -> None:
    services = {"user": {"postgres": module_db}, "billing": {"postgres": down_pg()}}
    missing = str(uuid.uuid4())
    report = await tracer_for(services=services).trace_job("user", missing)
    assert (report.verdict.code, report.service, report.searched_services, report.unavailable) == (
        "not_found", "user", ["user"], [])
    job_id = sim.insert_job(db, target="user-queue")
    sim.runner_push_job(db, r, job_id)
    sim.worker_take(db, r, job_id, "user-queue")
    audit_id = str(db.execute("SELECT id FROM job_audit WHERE job_id = %s", (job_id,)).fetchone()[0])
    report = await tracer_for(services=services).trace_job("user", audit_id)  # its job: traced in user only
    assert (report.id, report.service, report.searched_services, report.unavailable) == (job_id, "user", ["user"], [])
    with pytest.raises(ServiceUnavailable):
        await tracer_for(services=services).trace_job("billing", missing)


async def test_a_service_whose_outcome_events_cannot_be_read_makes_a_missing_job_inconclusive(
        db, tracer_for, module_db, pg_admin_url) -> None:
    """No row anywhere; the purged-job search of service 'odd' times out (its event_queue is locked): that service
    is named unavailable, with the database's error, and the job is not called not_found."""
    name = f"mesh_t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = as_url(_with_database(pg_admin_url, name))
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(SCHEMA_SQL)
        services = {"user": {"postgres": module_db}, "odd": {"postgres": url}}
        tracer = tracer_for(services=services, limits={"statement_timeout_ms": 300})
        await tracer.catalog.tables("odd")  # discovered before the lock
        with psycopg.connect(url) as locker:
            locker.execute("LOCK TABLE event_queue IN ACCESS EXCLUSIVE MODE")
            report = await tracer.trace_job(None, str(uuid.uuid4()))
        (problem,) = report.unavailable
        assert (problem.service, problem.error) == (
            "odd", "the query on service 'odd' exceeded the statement timeout of 300 ms: narrow the filters or raise "
                   "[limits] statement_timeout_ms")
        assert (report.verdict.code, report.searched_services) == ("inconclusive", ["user"]), report.verdict.sentence
        assert "in user, but odd could not be searched (see unavailable)" in report.verdict.sentence
    finally:
        with psycopg.connect(pg_admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def test_a_trimmed_entry_is_looked_for_at_the_rows_processed_at(db, r, tracer_for) -> None:
    """The entry was trimmed away (MAXLEN 1): the tracer says when it was pushed, from processed_at (Redis clock),
    not from a later updated_at."""
    event_id = sim.insert_event(db, targets=["user:trimmed"])
    ((stream, _),) = sim.runner_push_event(db, r, event_id, maxlen=1)
    r.xadd(stream, {"id": "another"}, maxlen=1, approximate=False)
    db.execute("UPDATE event_queue SET updated_at = now() + interval '1 hour' WHERE id = %s", (event_id,))
    processed_ms = db.execute("SELECT (EXTRACT(EPOCH FROM processed_at) * 1000)::bigint FROM event_queue "
                              "WHERE id = %s", (event_id,)).fetchone()[0]
    report = await tracer_for().trace_event("user", event_id)
    hop = report.hops[1]
    print(hop.state, hop.detail, report.verdict.code)
    assert (hop.name, hop.ref, hop.state) == ("stream_entry", stream, "trimmed")
    match = re.search(r"it was pushed about (\d+) ms \(Redis clock\)", hop.detail or "")
    assert match is not None and abs(int(match[1]) - processed_ms) < 1000, (hop.detail, processed_ms)
    assert report.verdict.code == "trimmed"


async def test_a_missing_job_with_redis_down_is_inconclusive(tracer_for) -> None:
    """No row and no outcome event, but the completion guard could not be read: Redis is named, not not_found."""
    report = await tracer_for(redis={"url": dead_port_url()}).trace_job("user", str(uuid.uuid4()))
    assert report.verdict.code == "inconclusive", report.verdict.sentence
    assert "redis" in report.verdict.sentence
    assert [p.service for p in report.unavailable] == ["redis"]
