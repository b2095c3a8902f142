"""The outcome shape learnt from the workspace's audit trigger versions (by resolution, not by name)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.outbox import migration_chain as mc
from tools.mesh_index.outcome_shape import derive
from tools.outbox.learnt_shape import learnt_settings

FN = "notify_job_audit_status_change"


def texts_of(folder: Path) -> list[tuple[str, int, str]]:
    out = []
    for path in sorted(folder.rglob("*.ts")):
        for m in re.finditer(r"queryRunner\.query\(\s*`([^`]*)`", path.read_text(encoding="utf-8")):
            out.append((path.relative_to(folder).as_posix(), 1, m.group(1)))
    return out


def test_every_version_of_the_chain_is_read_in_migration_order() -> None:
    shape = derive(texts_of(mc.CHAIN_WORKSPACE), FN)
    assert shape is not None
    got = [(v.path.split("/")[-1].split("-")[0], v.types, v.id_paths, v.emitter_id_is_job_id, v.target_services)
           for v in shape.versions]
    assert got == [
        ("1700000000001", {"COMPLETED": ["job.outbox.success"], "FAILED": ["job.outbox.failed"]}, ["after.job_id"],
         False, ["{emitter}"]),
        ("1710000000000", {"COMPLETED": ["{domain}:job:outbox:success"], "FAILED": ["{domain}:job:outbox:failure"]},
         ["after.job_id"], False, ["{emitter}"]),
        ("1730000000000", {"COMPLETED": ["{domain}:job:outbox:success"], "FAILED": ["{domain}:job:outbox:failure"]},
         ["after.job_id"], True, ["{emitter}"]),
        ("1740000000000", {"COMPLETED": ["{domain}:job:outbox:success"], "FAILED": ["{domain}:job:outbox:failure"]},
         ["after.job_id"], True, ["{type}"]),
    ]
    assert shape.success_types() == ["{domain}:job:outbox:success", "job.outbox.success"]


def test_a_renamed_trigger_shape_is_resolved_not_matched_by_name(tmp_path: Path) -> None:
    """Other variable names, inline branches, another payload key and another prefix removal: the same
    resolution. A payload {jobId: NEW.job_id} gives the flat path jobId."""
    sql = """
      CREATE OR REPLACE FUNCTION notify_job_audit_status_change() RETURNS trigger AS $body$
      DECLARE d text; t text;
      BEGIN
        d := replace(NEW.emitter, 'ms-', '');
        IF NEW.status = 'FAILED' THEN
          t := d || ':job:outbox:failure';
          INSERT INTO event_queue (type, emitter, payload, target_services)
          VALUES (t, NEW.emitter, jsonb_build_object('jobId', NEW.job_id), ARRAY[t]);
        ELSIF NEW.status = 'COMPLETED' THEN
          INSERT INTO event_queue (type, emitter, "emitterId", payload, target_services)
          VALUES (d || ':done', NEW.emitter, NEW.job_id::uuid,
                  jsonb_build_object('row', jsonb_build_object('now', row_to_json(NEW))), ARRAY['audit']);
        END IF;
        RETURN NEW;
      END; $body$ LANGUAGE plpgsql;"""
    shape = derive([("ms-x/src/migrations/common/1800000000000-X.ts", 1, sql)], FN)
    assert shape is not None
    (version,) = shape.versions
    assert version.types == {"FAILED": ["{domain}:job:outbox:failure"], "COMPLETED": ["{domain}:done"]}
    assert version.id_paths == ["jobId", "row.now.job_id"]
    assert version.emitter_id_is_job_id is True
    assert version.target_services == ["{type}", "audit"]


def test_learnt_settings_keep_what_mesh_toml_sets(make_settings) -> None:
    texts = [(p, n, t) for p, n, t in texts_of(mc.CHAIN_WORKSPACE) if "1700000000001" in p]  # only the first version
    learnt = learnt_settings(make_settings(), texts).conventions
    assert learnt.job_success_types == ["job.outbox.success"]
    assert learnt.job_failure_types[0] == "job.outbox.failed"
    assert learnt.job_outcome_id_keys == ["after.job_id"]
    kept = learnt_settings(make_settings(conventions={"job_success_types": ["x:ok"]}), texts).conventions
    assert kept.job_success_types == ["x:ok"]
    plain = make_settings()
    assert learnt_settings(plain, []) is plain


TRIGGER = """import { MigrationInterface, QueryRunner } from 'typeorm';

export class OwnOutcome1800000000000 implements MigrationInterface {
  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE OR REPLACE FUNCTION notify_job_audit_status_change() RETURNS trigger AS $$
      BEGIN
        IF NEW.status = 'COMPLETED' THEN
          INSERT INTO event_queue (type, emitter, payload, target_services)
          VALUES (regexp_replace(NEW.emitter, '^ms-', '') || ':job:done', NEW.emitter,
                  jsonb_build_object('job', jsonb_build_object('ref', NEW.job_id)), ARRAY[NEW.emitter]);
        END IF;
        RETURN NEW;
      END;
      $$ LANGUAGE plpgsql;
    `);
    await queryRunner.query(`
      CREATE TRIGGER job_audit_status_trigger AFTER UPDATE OF status ON job_audit
      FOR EACH ROW EXECUTE FUNCTION notify_job_audit_status_change();
    `);
  }

  public async down(queryRunner: QueryRunner): Promise<void> {}
}
"""


@pytest.mark.anyio
async def test_trace_job_uses_the_shape_the_workspace_trigger_writes(tmp_path: Path, pg_url: str, redis_url: str,
                                                                     make_settings) -> None:
    """A trigger writing {job: {ref: <id>}} with type <d>:job:done: trace_job (with that workspace) finds the
    success row and its state is the verdict; the defaults alone would not find it."""
    import shutil

    import psycopg

    from tests.helpers import in_process_client

    migrations = tmp_path / "ws" / "ms-event" / "src" / "migrations" / "common"
    migrations.mkdir(parents=True)
    shutil.copy(mc.MIGRATIONS_DIR / f"{mc.TABLES}.ts", migrations)
    (migrations / "1800000000000-OwnOutcome.ts").write_text(TRIGGER, encoding="utf-8")
    mc.apply_chain(pg_url, "1800000000000-OwnOutcome", directory=migrations)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        job_id = mc.service_write_job(conn)
        mc.runner_claim_jobs(conn)
        mc.runner_push_job(conn, None, job_id)
        mc.worker_start(conn, None, job_id)
        assert mc.worker_succeed(conn, None, job_id) is None
        conn.execute("UPDATE event_queue SET created_at = created_at - interval '1 hour'")
    settings = make_settings(workspace=str(tmp_path / "ws"), services={"event": {"postgres": pg_url}},
                             redis={"url": redis_url}, limits={"related_skills_index_wait_s": 60})
    async with in_process_client(settings) as client:
        got = await client.call_tool("trace_job", {"job_id": job_id, "service": "event", "detail": "full"})
    report = got.structured_content
    assert report["verdict"]["code"] == "event_pending", report["verdict"]  # (a cold index is waited for 60 s)
    assert [h["row"]["type"] for h in report["hops"] if h["name"] == "outcome_event"] == ["event:job:done"]
