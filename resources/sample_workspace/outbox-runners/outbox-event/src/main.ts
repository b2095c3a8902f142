import { OutboxRunner } from '@demo/outbox';

// No logic of its own: the shared runner claims batches with FOR UPDATE SKIP LOCKED,
// pushes jobs to BullMQ (job id = jobs_outbox.id) and events to stream:<target>.
new OutboxRunner({
  database: process.env.DATABASE_URL,
  redis: process.env.REDIS_URL,
  emitter: 'ms-event',
  pollIntervalMs: 1000,
  purge: { completedOlderThanMs: 86_400_000 },
}).start();
