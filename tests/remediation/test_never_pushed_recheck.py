"""A row "never pushed" is put back to PENDING only if it is still never pushed when the plan is applied.

``requeue_stuck_job`` plans to put a ``jobs_outbox`` row stuck PROCESSING back to PENDING (the runner
pushes it again) when BullMQ knows nothing of the job (no job hash, no lock key, in none of the queue's
lists and sets), its completion guard is unset and it has no ``job_audit`` row. Between the plan and its
apply the runner may push it after all, or a worker may take it. Then the apply must stop before the
UPDATE, name what changed, and write nothing: no row changed, no backup taken. Each state is real: a
database built by the reference migration chain, written the way the services and runners write, and a
real Redis.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest
import redis

from server.approval.audit import audit_log
from tests.outbox import migration_chain as mc
from tests.remediation.test_lost_job_recheck import outbox_row, plan_and_apply
from tests.remediation.test_verdict_next_steps import chain_db, settings_for
from tools.remediation.backups import backup_path

pytestmark = pytest.mark.anyio

JOB = f"{mc.BULL}:{mc.QUEUE}"


def stuck_unpushed(url: str) -> str:
    """Written by the service, claimed by the runner 900 s ago; the runner died before it pushed the job."""
    with psycopg.connect(url, autocommit=True) as conn:
        job_id = mc.service_write_job(conn, age_s=1000)
        conn.execute("UPDATE jobs_outbox SET status = 'PROCESSING', updated_at = now() - make_interval(secs => 900) "
                     "WHERE id = %s", (job_id,))
    return job_id


def worker_took_it(url: str, job_id: str) -> None:
    """A worker took the job (pushed after all) and upserted its job_audit row before the handler."""
    with psycopg.connect(url, autocommit=True) as conn:
        mc.worker_start(conn, None, job_id, started_age_s=5)


CHANGES: dict[str, tuple[Callable[[str, redis.Redis, str], None], str]] = {
    "a BullMQ job hash appears": (
        lambda url, r, j: r.hset(f"{JOB}:{j}", mapping={"name": mc.JOB_TYPE, "data": "{}"}),
        "job {j} of queue event-queue, planned as never pushed, is back in BullMQ: its job hash "
        "bull:event-queue:{j} exists again"),
    "a lock key appears": (
        lambda url, r, j: r.set(f"{JOB}:{j}:lock", "worker-event-1", px=30_000),
        "job {j} of queue event-queue, planned as never pushed, has a lock again (bull:event-queue:{j}:lock): "
        "a worker holds it"),
    "it is listed in wait": (
        lambda url, r, j: r.lpush(f"{JOB}:wait", j),
        "planned as never pushed, is in BullMQ's wait list again (bull:event-queue:wait)"),
    "the completion guard is set": (
        lambda url, r, j: r.set(f"job:completed:{j}", "true", ex=86_400),
        "job:completed:{j} exists now (the worker's completion guard: the job ran)"),
    "a job_audit row appears": (
        lambda url, r, j: worker_took_it(url, j),
        "job {j} has a job_audit row now (PROCESSING): it was pushed and a worker took it"),
}


@pytest.mark.parametrize("change", list(CHANGES))
async def test_apply_refuses_when_the_row_was_pushed_meanwhile(change: str, tmp_path: Path, make_pg_db,
                                                               redis_url: str, redis_client: redis.Redis) -> None:
    url = chain_db(make_pg_db, mc.LATEST)
    job_id = stuck_unpushed(url)
    before = outbox_row(url, job_id)
    settings = settings_for(tmp_path, url, redis_url)
    act, said = CHANGES[change]

    plan, report = await plan_and_apply(settings, job_id, lambda: act(url, redis_client, job_id))

    (step,) = plan.steps
    assert (step.action, step.operation.set_status, step.operation.expect_status,
            [r.id for r in step.operation.rows]) == ("requeue_sql", "PENDING", "PROCESSING", [job_id])
    assert report.status == "stopped", report.summary_text()
    assert report.steps[0].status == "drift"
    assert said.format(j=job_id) in report.steps[0].detail
    assert report.summary.startswith("STOPPED before any change: step 1 (requeue_sql): ")
    assert outbox_row(url, job_id) == before  # nothing was written: still PROCESSING, same updated_at
    assert not backup_path(settings, plan.plan_id).exists()  # not even a backup was taken
    drifts = [e for e in audit_log(settings).read() if e["event"] == "step" and e["plan_id"] == plan.plan_id]
    assert [(e["result"], said.format(j=job_id) in e["detail"]) for e in drifts] == [("drift", True)]


async def test_a_row_still_never_pushed_is_requeued(tmp_path: Path, make_pg_db, redis_url: str,
                                                    redis_client: redis.Redis) -> None:
    url = chain_db(make_pg_db, mc.LATEST)
    job_id = stuck_unpushed(url)
    settings = settings_for(tmp_path, url, redis_url)

    plan, report = await plan_and_apply(settings, job_id, lambda: None)

    (step,) = plan.steps
    assert [c.kind for c in step.checks] == ["row_matches", "bull_job_absent", "key_absent", "audit_row_absent"]
    assert step.precondition == (
        "each row still PROCESSING with the same updated_at; and, as when planned, BullMQ still knows nothing of "
        "each job (no job hash, no lock key, in no state list or set), its completion guard is unset and it has no "
        "job_audit row")
    assert report.status == "completed", report.summary_text()
    assert outbox_row(url, job_id)[0] == "PENDING"
