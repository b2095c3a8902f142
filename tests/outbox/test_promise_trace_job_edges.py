"""The tracer's job chain at its edges: a second Redis instance, the delayed-job limit at the exact
millisecond, a job known only by its audit row, an event_queue without a payload column.

Real PostgreSQL and Redis (a second logical database plays a second Redis instance); Redis's clock is
put at an exact instant by the loopback proxy of :mod:`tests.redis_fault_proxy` (every ``TIME`` is
forwarded to the real server and its reply replaced on the way back). Promises defended:

- the liveness of a stalled job's queue is read on the instance that holds that queue;
- a delayed job gets its queue's liveness only when it is overdue by *more than*
  ``[limits] delayed_overdue_ms`` (not at exactly the limit, and at one millisecond more);
- a job whose outbox row is gone: its BullMQ hop says the queue is unknown, and an unhealthy hop of
  its chain that no rule explains makes the verdict ``inconclusive``, never ``ok``;
- the completion guard of a job with no outbox row (no queue) is read on the default Redis;
- an event_queue with a ``type`` but no ``payload`` column is not searched for outcome events (no
  failing query, the job is ``not_found``, no service called unavailable).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.outbox import sim
from tests.outbox import trace_fixtures as fx
from tests.outbox.conftest import apply_schema
from tests.redis_fault_proxy import RedisFaultProxy
from tests.scratch_redis import claim_database

pytestmark = pytest.mark.anyio

module_db, db, r, tracer_for = fx.module_db, fx.db, fx.r, fx.tracer_for


@pytest.fixture
def jobs_redis_url(redis_base_url: str) -> Iterator[str]:
    """A second scratch Redis database, configured as instance 'jobs' (queues jobs-*)."""
    yield from claim_database(redis_base_url)


@pytest.fixture
def clock(redis_url: str) -> Iterator[RedisFaultProxy]:
    proxy = RedisFaultProxy.in_front_of(redis_url)
    yield proxy
    proxy.close()


async def test_a_stalled_job_s_queue_liveness_is_read_on_its_own_instance(
        db, r, tracer_for, redis_url, jobs_redis_url) -> None:
    import redis as redis_lib

    jobs = redis_lib.Redis.from_url(jobs_redis_url)
    try:
        job_id = sim.insert_job(db, target="jobs-q")
        sim.runner_push_job(db, jobs, job_id)
        sim.worker_take(db, jobs, job_id, "jobs-q", lock=False)  # active, lock gone: stalled
        jobs.set(f"bull:jobs-q:{sim.CONV.bullmq_stalled_check_key}", "1", px=30_000)  # only on its instance
        config = {"url": redis_url, "instances": {"jobs": {"url": jobs_redis_url, "queues": ["jobs-*"]}}}
        report = await tracer_for(redis=config).trace_job("user", job_id)
    finally:
        jobs.close()
    assert report.verdict.code == "stalled", report.verdict.sentence
    bull = next(h for h in report.hops if h.name == "bullmq_job").bull
    assert bull is not None and bull.liveness is not None
    assert 0 < (bull.liveness.stalled_check_ttl_ms or 0) <= 30_000
    assert [s.model_dump()["instance"] for s in report.redis_sources] == ["jobs"]  # the default was not read


@pytest.mark.parametrize(("past_due_ms", "liveness_read"), [(59_999, False), (60_000, False), (60_001, True)])
async def test_a_delayed_job_gets_its_queue_liveness_past_the_limit_only(
        db, r, tracer_for, clock, past_due_ms, liveness_read) -> None:
    due_ms = 1_900_000_000_000
    job_id = sim.insert_job(db, target="delay-q")
    sim.runner_push_job(db, r, job_id)
    r.lrem("bull:delay-q:wait", 1, job_id)
    r.zadd("bull:delay-q:delayed", {job_id: due_ms * 4096 + 7})  # BullMQ's score: timestamp * 0x1000 + counter
    clock.pin_time(due_ms + past_due_ms)
    tracer = tracer_for(redis={"url": clock.url()})
    assert tracer.settings.limits.delayed_overdue_ms == 60_000
    report = await tracer.trace_job("user", job_id)
    bull = next(h for h in report.hops if h.name == "bullmq_job").bull
    assert bull is not None and (bull.state, bull.redis_now_ms, bull.overdue_ms()) == (
        "delayed", due_ms + past_due_ms, past_due_ms)
    assert (bull.liveness is not None) is liveness_read


async def test_a_job_known_by_its_audit_row_with_an_unexplained_unhealthy_outcome_is_inconclusive(
        db, r, tracer_for) -> None:
    """The job ran and its row was deleted; its success event was pushed and acknowledged, then its status set to
    one the conventions do not name (ARCHIVED): no rule explains that hop, so the job is not called ok."""
    job_id = sim.insert_job(db, target="user-queue")
    sim.runner_push_job(db, r, job_id)
    sim.worker_take(db, r, job_id, "user-queue")
    sim.worker_complete(db, r, job_id, "user-queue")
    sim.success_post_processor_delete(db, job_id)
    outcome_id, _ = sim.outcome_event_of(db, job_id)
    ((stream, entry),) = sim.runner_push_event(db, r, outcome_id)
    sim.ensure_group(r, stream, "pp")
    sim.consumer_read(r, stream, "pp", "c-1")
    sim.consumer_ack(r, stream, "pp", entry)
    report = await tracer_for().trace_job("user", job_id)
    bull_hop = next(h for h in report.hops if h.name == "bullmq_job")
    assert (bull_hop.ref, bull_hop.state, bull_hop.found, bull_hop.detail) == (
        f"bull:?:{job_id}", "unknown", False, "queue unknown: no jobs_outbox row to read its target from")
    assert report.verdict.code == "ok", report.verdict.sentence  # every hop healthy so far
    db.execute("UPDATE event_queue SET status = 'ARCHIVED' WHERE id = %s", (outcome_id,))
    report = await tracer_for().trace_job("user", job_id)
    v = report.verdict
    assert (v.code, v.severity, v.hop) == ("inconclusive", "warning", "outcome_event"), v.sentence
    assert v.sentence == (f"no rule explains the unhealthy hop(s): outcome_event user.event_queue {outcome_id} is "
                          "ARCHIVED; the chain is not known to be complete")


async def test_an_event_queue_without_a_payload_column_is_not_searched_for_outcomes(
        make_pg_db, tracer_for) -> None:
    url = make_pg_db()
    apply_schema(url)
    apply_schema(url, "ALTER TABLE event_queue DROP COLUMN payload CASCADE;")
    tracer = tracer_for(services={"odd": {"postgres": url}})
    assert (await tracer.catalog.tables("odd"))["event_queue"].has("type")
    report = await tracer.trace_job("odd", "7d1c2a4e-0000-4000-8000-000000000001")
    assert (report.verdict.code, report.unavailable, report.searched_services) == ("not_found", [], ["odd"])


async def test_the_guard_of_a_job_whose_queue_is_unknown_is_read_on_the_default_instance(
        db, r, tracer_for, redis_url) -> None:
    """No jobs_outbox row, so no queue: the completion guard is read on the default Redis, even when an instance
    takes every queue ("*", down here)."""
    job_id = sim.insert_job(db, target="user-queue")
    sim.runner_push_job(db, r, job_id)
    sim.worker_take(db, r, job_id, "user-queue")
    sim.worker_complete(db, r, job_id, "user-queue")  # sets job:completed:<id> on the default instance
    sim.success_post_processor_delete(db, job_id)
    config = {"url": redis_url, "instances": {"jobs": {"url": fx.dead_port_url(), "queues": ["*"]}}}
    report = await tracer_for(redis=config).trace_job("user", job_id)
    guard = next(h for h in report.hops if h.name == "completion_guard")
    assert (guard.state, guard.found) == ("set", True)
    assert report.unavailable == []
