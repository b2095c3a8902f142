import { MigrationInterface, QueryRunner } from 'typeorm';

// Domain migration: every update of an event row emits `event.updated` through the outbox.
export class EventUpdatedTrigger1700000000100 implements MigrationInterface {
  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TRIGGER event_updated_trigger AFTER UPDATE ON events
      FOR EACH ROW EXECUTE FUNCTION create_event_queue_record('event.updated', 'ms-event')
    `);
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TRIGGER IF EXISTS event_updated_trigger ON events`);
  }
}
