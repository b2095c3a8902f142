import { MigrationInterface, QueryRunner } from 'typeorm';

// Common migration: the outbox tables and the job_audit trigger that reports each job's outcome.
export class CreateOutboxTables1700000000000 implements MigrationInterface {
  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE IF NOT EXISTS jobs_outbox (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        status varchar(20) NOT NULL DEFAULT 'PENDING',
        attempts int NOT NULL DEFAULT 0,
        "lastError" text,
        type varchar(100) NOT NULL,
        emitter varchar(100) NOT NULL,
        "emitterId" uuid,
        target varchar(100) NOT NULL,
        payload jsonb NOT NULL DEFAULT '{}',
        scheduled_at timestamp NOT NULL DEFAULT now(),
        created_at timestamp NOT NULL DEFAULT now(),
        updated_at timestamp NOT NULL DEFAULT now()
      )
    `);
    await queryRunner.query(`
      CREATE OR REPLACE FUNCTION notify_job_audit_status_change() RETURNS trigger AS $$
      BEGIN
        IF NEW.status = 'COMPLETED' THEN
          INSERT INTO event_queue (type, emitter, "emitterId", payload, version, target_services, updated_at)
          VALUES ('event:job:outbox:success', NEW.emitter, NEW.job_id::uuid,
                  jsonb_build_object('before', to_jsonb(OLD), 'after', to_jsonb(NEW)), 1,
                  ARRAY['event:job:outbox:success'], now());
        ELSIF NEW.status = 'FAILED' THEN
          INSERT INTO event_queue (type, emitter, "emitterId", payload, version, target_services, updated_at)
          VALUES ('event:job:outbox:failure', NEW.emitter, NEW.job_id::uuid,
                  jsonb_build_object('before', to_jsonb(OLD), 'after', to_jsonb(NEW)), 1,
                  ARRAY['event:job:outbox:failure'], now());
        END IF;
        RETURN NEW;
      END;
      $$ LANGUAGE plpgsql
    `);
    await queryRunner.query(`
      CREATE TRIGGER job_audit_status_trigger AFTER UPDATE OF status ON job_audit
      FOR EACH ROW EXECUTE FUNCTION notify_job_audit_status_change()
    `);
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TRIGGER IF EXISTS job_audit_status_trigger ON job_audit`);
  }
}
