// Writes BullMQ job states with the real library, for tests/outbox/test_real_bullmq.py.
// usage: node drive.mjs <command> '<json options>'
//   add      {queue, jobId, name, data, delay?}          -> prints ADDED, exits
//   work     {queue, lockDuration, failFirst?}           -> runs a worker; prints STARTED <jobId> <attempt>
//            when a job starts and then never finishes it (the test kills the process)
//   idle     {queue}                                     -> a connected worker that takes no job (autorun off)
// Connection and prefix come from the options: {host, port, db, prefix}.
import { Queue, Worker } from "bullmq";

const [command, raw] = process.argv.slice(2);
const o = JSON.parse(raw || "{}");
const connection = { host: o.host, port: o.port, db: o.db ?? 0, maxRetriesPerRequest: null };
const prefix = o.prefix ?? "bull";

// the reference pusher's options: 3 attempts, exponential backoff from 1 s, removeOnComplete, job id = row id
const jobOpts = { attempts: 3, backoff: { type: "exponential", delay: 1000 }, removeOnComplete: true };

if (command === "add") {
  const queue = new Queue(o.queue, { connection, prefix });
  await queue.add(o.name, o.data ?? {}, { ...jobOpts, jobId: o.jobId, delay: o.delay ?? 0 });
  await queue.close();
  console.log("ADDED");
  process.exit(0);
} else if (command === "work") {
  const worker = new Worker(
    o.queue,
    async (job) => {
      console.log(`STARTED ${job.id} ${job.attemptsMade + 1}`);
      if (o.failFirst && job.attemptsMade === 0) throw new Error("first attempt fails");
      await new Promise(() => {}); // the handler never returns
    },
    { connection, prefix, lockDuration: o.lockDuration ?? 30000, stalledInterval: o.stalledInterval ?? 30000 },
  );
  worker.on("error", (err) => console.error(err));
  await worker.waitUntilReady();
  console.log("READY");
} else if (command === "idle") {
  const worker = new Worker(o.queue, async () => {}, { connection, prefix, autorun: false });
  await worker.waitUntilReady();
  console.log("READY");
} else {
  console.error(`unknown command ${command}`);
  process.exit(2);
}
