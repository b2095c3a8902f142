"""trace_job: each verdict reproduced with real rows, BullMQ-shaped keys and consumer groups."""

from __future__ import annotations

import uuid

import pytest

from tests.outbox import sim

pytestmark = pytest.mark.anyio

QUEUE = "user-queue"
GROUP = "pp-common"


def hop(report, name: str):
    return next(h for h in report.hops if h.name == name)


async def test_pending_job_ageing_is_pending_in_outbox(db, r, outbox_settings, tools_for) -> None:
    job_id = sim.insert_job(db, age_s=3600)
    async with tools_for(outbox_settings()) as tools:
        report = await tools.trace_job(job_id)
    assert report.verdict.code == "pending_in_outbox"
    assert report.verdict.severity == "error"
    assert "3600" in report.verdict.sentence or "360" in report.verdict.sentence
    jobs = hop(report, "jobs_outbox")
    assert jobs.found and jobs.state == "PENDING" and "runner" in (jobs.detail or "")
    assert hop(report, "bullmq_job").state == "absent"
    assert hop(report, "job_audit").found is False


async def test_fresh_pending_job_is_not_late(db, r, outbox_settings, tools_for) -> None:
    job_id = sim.insert_job(db, age_s=2)
    scheduled = sim.insert_job(db, age_s=3600, scheduled_in_s=600)
    async with tools_for(outbox_settings()) as tools:
        fresh = await tools.trace_job(job_id)
        later = await tools.trace_job(scheduled)
    assert (fresh.verdict.code, fresh.verdict.severity) == ("pending_in_outbox", "info")
    assert (later.verdict.code, later.verdict.severity) == ("pending_in_outbox", "info")
    assert "scheduled" in later.verdict.sentence


async def test_processing_job_ageing_is_stuck_processing(db, r, outbox_settings, tools_for) -> None:
    job_id = sim.insert_job(db, status="PROCESSING", age_s=4000, updated_age_s=3000)
    async with tools_for(outbox_settings()) as tools:
        report = await tools.trace_job(job_id)
    assert report.verdict.code == "stuck_processing"
    assert report.verdict.hop == "jobs_outbox"
    assert "between claim and push" in report.verdict.sentence


async def test_pushed_job_waiting_in_bullmq_is_pushed_not_consumed(db, r, outbox_settings, tools_for) -> None:
    job_id = sim.insert_job(db, age_s=900)
    sim.runner_push_job(db, r, job_id, pushed_age_s=800)
    async with tools_for(outbox_settings()) as tools:
        report = await tools.trace_job(job_id)
    assert report.verdict.code == "pushed_not_consumed"
    assert report.verdict.severity == "error"
    bull = hop(report, "bullmq_job")
    assert bull.found and bull.state == "waiting"
    assert bull.bull is not None and bull.bull.found_in == [f"bull:{QUEUE}:wait"]
    assert bull.bull.name == "users.send_welcome_email"
    assert "inspect_queue" in report.verdict.next_step


async def test_pushed_job_absent_from_redis_is_pushed_not_consumed(db, r, outbox_settings, tools_for) -> None:
    job_id = sim.insert_job(db, age_s=900)
    sim.runner_push_job(db, r, job_id, pushed_age_s=800)
    r.delete(f"bull:{QUEUE}:{job_id}", f"bull:{QUEUE}:wait")  # Redis lost it (flush/eviction)
    async with tools_for(outbox_settings()) as tools:
        report = await tools.trace_job(job_id)
    assert report.verdict.code == "pushed_not_consumed"
    assert "lost" in report.verdict.sentence
    assert hop(report, "bullmq_job").state == "absent"


async def test_failed_handler_is_handler_failed_and_shows_the_failure_event(db, r, outbox_settings, tools_for) -> None:
    job_id = sim.insert_job(db, age_s=600)
    sim.runner_push_job(db, r, job_id, pushed_age_s=590)
    sim.worker_take(db, r, job_id, QUEUE)
    sim.worker_fail(db, r, job_id, QUEUE, "SMTP connection refused")
    event_id, event_type = sim.outcome_event_of(db, job_id)
    assert event_type == "user:job:outbox:failure"
    async with tools_for(outbox_settings()) as tools:
        report = await tools.trace_job(job_id)
    assert report.verdict.code == "handler_failed"
    assert "SMTP connection refused" in report.verdict.sentence
    bull = hop(report, "bullmq_job")
    assert bull.state == "failed" and bull.bull.failed_reason == "SMTP connection refused"
    assert bull.bull.attempts_made == 3
    assert hop(report, "job_audit").state == "FAILED"
    outcome = hop(report, "outcome_event")
    assert outcome.row.id == event_id and outcome.state == "PENDING"
    assert any(f.code == "event_pending" for f in report.findings)


async def test_completed_job_still_in_outbox_is_success_not_cleaned(db, r, outbox_settings, tools_for) -> None:
    job_id = sim.insert_job(db, age_s=3600)
    sim.runner_push_job(db, r, job_id, pushed_age_s=3500)
    sim.worker_take(db, r, job_id, QUEUE, age_s=3400)
    sim.worker_complete(db, r, job_id, QUEUE)
    # ages of job_audit rows come from started_at (the worker never writes its updated_at)
    db.execute("UPDATE job_audit SET started_at = now() - interval '1 hour' WHERE job_id = %s", (job_id,))
    event_id, event_type = sim.outcome_event_of(db, job_id)
    assert event_type == "user:job:outbox:success"
    (stream, entry), = sim.runner_push_event(db, r, event_id)
    sim.ensure_group(r, stream, GROUP)
    assert sim.consumer_read(r, stream, GROUP, "pp-1") == [entry]
    sim.consumer_ack(r, stream, GROUP, entry)  # acknowledged, yet the DELETE did not happen
    async with tools_for(outbox_settings()) as tools:
        report = await tools.trace_job(job_id)
    assert report.verdict.code == "success_not_cleaned"
    assert report.verdict.severity == "error"
    assert hop(report, "completion_guard").state == "set"
    assert hop(report, "bullmq_job").state == "absent"  # removeOnComplete
    group = hop(report, "outcome_event.group")
    assert group.state == "acknowledged" and group.delivery.group == GROUP
    assert hop(report, "outcome_event.stream_entry").entry.entry_id == entry


async def test_success_event_in_dlq_is_named_instead(db, r, outbox_settings, tools_for) -> None:
    job_id = sim.insert_job(db, age_s=3600)
    sim.runner_push_job(db, r, job_id)
    sim.worker_take(db, r, job_id, QUEUE)
    sim.worker_complete(db, r, job_id, QUEUE)
    event_id, _ = sim.outcome_event_of(db, job_id)
    (stream, entry), = sim.runner_push_event(db, r, event_id)
    sim.ensure_group(r, stream, GROUP)
    sim.consumer_read(r, stream, GROUP, "pp-1")
    sim.consumer_dead_letter(r, stream, GROUP, entry, "jobs_outbox delete failed: deadlock")
    async with tools_for(outbox_settings()) as tools:
        report = await tools.trace_job(job_id)
    assert report.verdict.code == "in_dlq"
    assert "deadlock" in report.verdict.sentence
    assert "dlq_replay" in report.verdict.next_step


async def test_no_success_event_without_the_audit_trigger(db, r, outbox_settings, tools_for) -> None:
    db.execute("DROP TRIGGER job_audit_status_trigger ON job_audit")
    job_id = sim.insert_job(db, age_s=600)
    sim.runner_push_job(db, r, job_id)
    sim.worker_take(db, r, job_id, QUEUE)
    sim.worker_complete(db, r, job_id, QUEUE)
    async with tools_for(outbox_settings()) as tools:
        report = await tools.trace_job(job_id)
    assert report.verdict.code == "success_not_cleaned"
    assert "no success event" in report.verdict.sentence
    assert "notify_job_audit_status_change" in report.verdict.sentence


async def test_full_success_is_ok(db, r, outbox_settings, tools_for) -> None:
    job_id = sim.insert_job(db, age_s=60)
    sim.runner_push_job(db, r, job_id)
    sim.worker_take(db, r, job_id, QUEUE)
    sim.worker_complete(db, r, job_id, QUEUE)
    event_id, _ = sim.outcome_event_of(db, job_id)
    (stream, entry), = sim.runner_push_event(db, r, event_id)
    sim.ensure_group(r, stream, GROUP)
    sim.consumer_read(r, stream, GROUP, "pp-1")
    sim.consumer_ack(r, stream, GROUP, entry)
    sim.success_post_processor_delete(db, job_id)
    async with tools_for(outbox_settings()) as tools:
        report = await tools.trace_job(job_id)
    assert report.verdict.code == "ok"
    assert hop(report, "jobs_outbox").found is False
    assert hop(report, "job_audit").state == "COMPLETED"
    assert hop(report, "outcome_event.group").state == "acknowledged"


async def test_old_naming_variant_is_found(db, r, outbox_settings, tools_for) -> None:
    """Rows written by the older trigger use 'job.outbox.success'."""
    db.execute("DROP TRIGGER job_audit_status_trigger ON job_audit")
    job_id = sim.insert_job(db, age_s=600)
    sim.runner_push_job(db, r, job_id)
    sim.worker_take(db, r, job_id, QUEUE)
    sim.worker_complete(db, r, job_id, QUEUE)
    event_id = sim.insert_event(db, type="job.outbox.success", targets=["ms-user"],
                                payload=sim.outcome_payload(job_id))
    async with tools_for(outbox_settings()) as tools:
        report = await tools.trace_job(job_id)
    outcome = hop(report, "outcome_event")
    assert outcome.row.id == event_id and outcome.row.type == "job.outbox.success"
    assert report.verdict.code == "event_pending"


async def test_audit_processing_for_long_is_stuck_processing(db, r, outbox_settings, tools_for) -> None:
    job_id = sim.insert_job(db, age_s=3600)
    sim.runner_push_job(db, r, job_id, pushed_age_s=3500)
    sim.worker_take(db, r, job_id, QUEUE, age_s=3400)
    async with tools_for(outbox_settings()) as tools:
        report = await tools.trace_job(job_id)
    assert report.verdict.code == "stuck_processing"
    assert report.verdict.hop == "job_audit"
    assert hop(report, "bullmq_job").state == "active"


async def test_rows_gone_but_guard_set_is_purged(db, r, outbox_settings, tools_for) -> None:
    job_id = str(uuid.uuid4())
    r.set(f"job:completed:{job_id}", "true", ex=86400)
    async with tools_for(outbox_settings()) as tools:
        report = await tools.trace_job(job_id)
    assert report.verdict.code == "purged"
    assert "job:completed:" in report.verdict.sentence
    assert hop(report, "completion_guard").state == "set"


async def test_rows_gone_but_outcome_event_left_is_purged(db, r, outbox_settings, tools_for) -> None:
    job_id = str(uuid.uuid4())
    sim.insert_event(db, type="user:job:outbox:success", status="COMPLETED", targets=["user:job:outbox:success"],
                     payload=sim.outcome_payload(job_id))
    async with tools_for(outbox_settings()) as tools:
        report = await tools.trace_job(job_id, service=None)
    assert report.verdict.code == "purged"
    assert report.service == "user"


async def test_unknown_job_is_not_found_and_mentions_purge(db, r, outbox_settings, tools_for) -> None:
    async with tools_for(outbox_settings()) as tools:
        report = await tools.trace_job(str(uuid.uuid4()))
    assert report.verdict.code == "not_found"
    assert "purged" in report.verdict.sentence and "86400" in report.verdict.sentence


async def test_job_is_found_in_the_right_service_when_service_is_omitted(
    make_outbox_db, r, outbox_settings, tools_for, redis_url, down_dsn
) -> None:
    import psycopg

    other = make_outbox_db()
    with psycopg.connect(other, autocommit=True) as conn:
        job_id = sim.insert_job(conn, emitter="ms-event", target="event-queue", age_s=3600)
    settings = outbox_settings(services={"user": {"postgres": make_outbox_db()}, "event": {"postgres": other},
                                         "ranking": {"postgres": down_dsn}})
    async with tools_for(settings) as tools:
        report = await tools.trace_job(job_id, service=None)
    assert report.service == "event"
    assert report.verdict.code == "pending_in_outbox"
    assert [p.service for p in report.unavailable] == ["ranking"]
    assert report.searched_services == ["event", "user"]  # only the services really searched


async def test_redis_down_still_reports_sql_hops(db, outbox_settings, tools_for) -> None:
    from server.demo.embedded import free_port

    job_id = sim.insert_job(db, status="COMPLETED", age_s=900)
    settings = outbox_settings(redis={"url": f"redis://127.0.0.1:{free_port()}/0"})
    async with tools_for(settings) as tools:
        report = await tools.trace_job(job_id)
    assert hop(report, "jobs_outbox").state == "COMPLETED"
    assert hop(report, "bullmq_job").state == "unknown"
    assert [p.service for p in report.unavailable] == ["redis"]
    assert report.verdict.code == "pushed_not_consumed"


async def test_a_named_service_that_is_down_is_the_answer(outbox_settings, tools_for, down_dsn) -> None:
    from server.errors import ServiceUnavailable

    settings = outbox_settings(services={"ranking": {"postgres": down_dsn}})
    async with tools_for(settings) as tools:
        with pytest.raises(ServiceUnavailable, match="service 'ranking'"):  # not a not_found verdict
            await tools.trace_job(str(uuid.uuid4()), service="ranking")
        with pytest.raises(ServiceUnavailable, match="service 'ranking'"):
            await tools.trace_event(str(uuid.uuid4()), service="ranking")
        report = await tools.trace_job(str(uuid.uuid4()), service=None)
    # not found where it was searched, but ranking could not be: that is no "not found"
    assert report.verdict.code == "inconclusive" and "ranking" in report.verdict.sentence
    assert report.searched_services == []
