"""A job "lost with its dead worker" is requeued only if it is still lost when the plan is applied.

``requeue_stuck_job`` plans to put a pushed job's ``jobs_outbox`` row back to PENDING (the runner pushes
it again) when BullMQ knows nothing of the job, its completion guard is unset and its ``job_audit`` row
has been PROCESSING for too long. Between the plan and its apply the job may come back or be picked
up. Then the apply must stop before the UPDATE, name what changed, and write nothing: no row changed,
no backup taken. Each state is real: a database built by the reference migration chain, written the way
the services, runners and workers write, and a real Redis.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
import redis

from server.approval.audit import audit_log
from server.connections import Connections
from tests.outbox import migration_chain as mc
from tests.remediation.conftest import approve
from tests.remediation.test_verdict_next_steps import chain_db, pushed_job, settings_for
from tools.remediation.backups import backup_path
from tools.remediation.executor import apply_plan
from tools.remediation.model import ApplyReport, Plan
from tools.remediation.planner import Request, propose

pytestmark = pytest.mark.anyio

JOB = f"{mc.BULL}:{mc.QUEUE}"


def lose_a_job(url: str, r: redis.Redis) -> str:
    """Pushed, taken by a worker that died 900 s ago; then BullMQ lost the job (hash and list entries gone)."""
    with psycopg.connect(url, autocommit=True) as conn:
        job_id = pushed_job(conn, r)
        mc.worker_start(conn, r, job_id, started_age_s=900)
    r.delete(f"{JOB}:{job_id}", f"{JOB}:{job_id}:lock")
    r.lrem(f"{JOB}:active", 0, job_id)
    r.lrem(f"{JOB}:wait", 0, job_id)
    return job_id


def outbox_row(url: str, job_id: str) -> tuple[str, Any]:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT status, updated_at FROM jobs_outbox WHERE id = %s", (job_id,)).fetchone()
    assert row is not None
    return row[0], row[1]


async def plan_and_apply(settings: Any, job_id: str, meanwhile: Callable[[], None]) -> tuple[Plan, ApplyReport]:
    connections = Connections(settings)
    try:
        plan = await propose(settings, connections, Request("requeue_stuck_job", None, None, "event", None, [job_id]))
        token = approve(settings, plan.plan_id)
        meanwhile()
        return plan, await apply_plan(settings, connections, plan.plan_id, token)
    finally:
        await connections.aclose()


def worker_upsert_again(url: str, job_id: str) -> None:
    """Another worker took the job (BullMQ retried it) and upserted job_audit: still PROCESSING, and old enough."""
    with psycopg.connect(url, autocommit=True) as conn:
        mc.worker_start(conn, None, job_id, worker_id="worker-event-2", attempt=2, started_age_s=800)


def worker_finished(url: str, job_id: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("UPDATE job_audit SET status = 'COMPLETED', finished_at = now() WHERE job_id = %s", (job_id,))


CHANGES: dict[str, tuple[Callable[[str, redis.Redis, str], None], str]] = {
    "a lock key appears": (
        lambda url, r, j: r.set(f"{JOB}:{j}:lock", "worker-event-2", px=30_000),
        "has a lock again (bull:event-queue:{j}:lock): a worker holds it"),
    "the job hash reappears": (
        lambda url, r, j: r.hset(f"{JOB}:{j}", mapping={"name": "t", "data": "{}"}),
        "is back in BullMQ: its job hash bull:event-queue:{j} exists again"),
    "it is listed active": (
        lambda url, r, j: r.lpush(f"{JOB}:active", j),
        "is in BullMQ's active list again (bull:event-queue:active)"),
    "it is in the completed set": (
        lambda url, r, j: r.zadd(f"{JOB}:completed", {j: 1}),
        "is in BullMQ's completed set again (bull:event-queue:completed)"),
    "the completion guard is set": (
        lambda url, r, j: r.set(f"job:completed:{j}", "true", ex=86_400),
        "job:completed:{j} exists now (the worker's completion guard: the job ran)"),
    "job_audit is upserted by another worker": (
        lambda url, r, j: worker_upsert_again(url, j),
        "the job_audit row of job {j} changed since the plan was made (a worker took the job again"),
    "job_audit is COMPLETED": (
        lambda url, r, j: worker_finished(url, j),
        "the job_audit row of job {j} is now COMPLETED, not PROCESSING"),
}


@pytest.mark.parametrize("change", list(CHANGES))
async def test_apply_refuses_when_the_lost_job_came_back(change: str, tmp_path: Path, make_pg_db, redis_url: str,
                                                         redis_client: redis.Redis) -> None:
    url = chain_db(make_pg_db, mc.LATEST)
    job_id = lose_a_job(url, redis_client)
    before = outbox_row(url, job_id)
    settings = settings_for(tmp_path, url, redis_url)
    act, said = CHANGES[change]

    plan, report = await plan_and_apply(settings, job_id, lambda: act(url, redis_client, job_id))

    (step,) = plan.steps
    assert (step.action, step.operation.set_status, [r.id for r in step.operation.rows]) == (
        "requeue_sql", "PENDING", [job_id])
    assert report.status == "stopped", report.summary_text()
    assert report.steps[0].status == "drift"
    assert said.format(j=job_id) in report.steps[0].detail
    assert report.summary.startswith("STOPPED before any change: step 1 (requeue_sql): ")
    assert outbox_row(url, job_id) == before  # nothing was written: still COMPLETED, same updated_at
    assert not backup_path(settings, plan.plan_id).exists()  # not even a backup was taken
    drifts = [e for e in audit_log(settings).read() if e["event"] == "step" and e["plan_id"] == plan.plan_id]
    assert [(e["result"], said.format(j=job_id) in e["detail"]) for e in drifts] == [("drift", True)]


async def test_a_job_still_lost_is_requeued(tmp_path: Path, make_pg_db, redis_url: str,
                                            redis_client: redis.Redis) -> None:
    url = chain_db(make_pg_db, mc.LATEST)
    job_id = lose_a_job(url, redis_client)
    settings = settings_for(tmp_path, url, redis_url)

    plan, report = await plan_and_apply(settings, job_id, lambda: None)

    assert [c.kind for c in plan.steps[0].checks] == ["row_matches", "bull_job_absent", "key_absent",
                                                      "audit_row_matches"]
    assert plan.steps[0].precondition.startswith("each row still COMPLETED with the same updated_at; and, as when "
                                                 "planned, BullMQ still knows nothing of each job")
    assert report.status == "completed", report.summary_text()
    assert outbox_row(url, job_id)[0] == "PENDING"
