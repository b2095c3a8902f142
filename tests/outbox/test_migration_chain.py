"""The migration-chain fixture itself: each chain state's trigger writes the rows target-system.md describes."""

from __future__ import annotations

import uuid

import psycopg
import pytest

from tests.outbox import migration_chain as mc
from tests.outbox.migration_chain import chain_dbs  # noqa: F401  (the session's chain databases)


def _run_success(url: str) -> tuple[str, list[dict], psycopg.Error | None]:
    with psycopg.connect(url, autocommit=True) as conn:
        job_id = mc.service_write_job(conn)
        assert mc.runner_claim_jobs(conn) == [job_id]
        mc.runner_push_job(conn, None, job_id)
        mc.worker_start(conn, None, job_id)
        error = mc.worker_succeed(conn, None, job_id)
        return job_id, mc.outcome_rows(conn, job_id), error


def test_sql_is_extracted_from_each_up_only() -> None:
    statements = mc.up_statements(mc.MIGRATIONS_DIR / f"{mc.V1}.ts")
    assert len(statements) == 2
    assert "notify_job_audit_status_change" in statements[0] and "$$" in statements[0]
    assert "AFTER UPDATE OF status ON job_audit" in statements[1]
    assert not any("DROP" in s for s in statements)
    assert mc.migration_names()[0] == mc.TABLES and mc.migration_names()[-1] == mc.LATEST


def test_unknown_migration_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown migration"):
        mc.apply_chain("postgresql://nowhere.invalid/none", "1999-Nothing")


@pytest.mark.parametrize(
    ("upto", "type_", "targets", "emitter_id"),
    [
        (mc.V1, "job.outbox.success", ["ms-event"], None),
        (mc.V2, "event:job:outbox:success", ["ms-event"], None),
        (mc.V3, "event:job:outbox:success", ["ms-event"], "job"),
        (mc.LATEST, "event:job:outbox:success", ["event:job:outbox:success"], "job"),
    ],
)
def test_each_trigger_version_writes_its_row(
    chain_dbs: mc.ChainDatabases, upto: str, type_: str, targets: list[str], emitter_id: str | None  # noqa: F811
) -> None:
    url = chain_dbs.url(upto)
    job_id, rows, error = _run_success(url)
    assert error is None
    assert len(rows) == 1
    row = rows[0]
    assert row["type"] == type_ == mc.outcome_type("COMPLETED", upto)
    assert row["target_services"] == targets
    assert row["payload"]["after"]["job_id"] == job_id and row["payload"]["after"]["status"] == "COMPLETED"
    assert row["payload"]["before"]["status"] == "PROCESSING" and "jobId" not in row["payload"]
    assert row["status"] == "PENDING" and row["version"] == 1
    if emitter_id is None:
        assert row.get("emitterId") in (None, "00000000-0000-0000-0000-000000000000")
    else:
        assert str(row["emitterId"]) == job_id
    with psycopg.connect(url, autocommit=True) as conn:
        audit = conn.execute("SELECT status, started_at, updated_at FROM job_audit WHERE job_id = %s",
                             (job_id,)).fetchone()
    assert audit is not None and audit[0] == "COMPLETED" and audit[1] is not None and audit[2] is None


def test_the_raising_state_keeps_the_audit_row_processing(chain_dbs: mc.ChainDatabases) -> None:  # noqa: F811
    pg_url = chain_dbs.url(mc.RAISING)
    job_id, rows, error = _run_success(pg_url)
    assert isinstance(error, psycopg.errors.NotNullViolation) and "emitterId" in str(error)
    assert rows == []
    with psycopg.connect(pg_url, autocommit=True) as conn:
        assert conn.execute("SELECT status FROM job_audit WHERE job_id = %s", (job_id,)).fetchone() == (
            "PROCESSING",)


def test_a_failing_job_writes_one_failure_row_per_attempt_and_the_post_processor_cleans(
    chain_dbs: mc.ChainDatabases, redis_client  # noqa: F811
) -> None:
    pg_url = chain_dbs.url()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        failed = mc.service_write_job(conn)
        done = mc.service_write_job(conn)
        mc.runner_claim_jobs(conn)
        for job in (failed, done):
            mc.runner_push_job(conn, redis_client, job)
        mc.run_failing_job(conn, redis_client, failed, "geocoder down")
        rows = mc.outcome_rows(conn, failed)
        assert [r["type"] for r in rows] == ["event:job:outbox:failure"] * 3
        assert rows[-1]["payload"]["after"]["error_message"] == "geocoder down"
        assert redis_client.zscore(f"bull:{mc.QUEUE}:failed", failed) is not None
        mc.worker_start(conn, redis_client, done)
        assert mc.worker_succeed(conn, redis_client, done) is None
        assert redis_client.get(f"job:completed:{done}") == b"true"
        (success,) = mc.outcome_rows(conn, done)
        assert mc.runner_claim_events(conn) != []
        pushed = mc.runner_push_event(conn, redis_client, str(success["id"]))
        assert pushed[0][0] == "stream:event:job:outbox:success"
        assert mc.group_consume(redis_client, pushed[0][0], "job-outbox-success") == [pushed[0][1]]
        feedback = mc.success_post_processor(conn, str(success["id"]), feedback_type="event:geocoded",
                                             ws_target="ws:job:success")
        assert conn.execute("SELECT count(*) FROM jobs_outbox WHERE id = %s", (done,)).fetchone() == (0,)
        row = conn.execute('SELECT emitter, "emitterId"::text FROM event_queue WHERE id = %s',
                           (feedback.event_id,)).fetchone()
        assert row == (mc.POST_PROCESSORS_EMITTER, done)
        assert uuid.UUID(feedback.event_id)
