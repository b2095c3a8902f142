// Redis Streams read by the post-processors. The outbox runner writes an event to
// `stream:<target>` for each entry of event_queue.target_services.
export enum Streams {
  EVENT_CREATED = 'stream:event:created',
  EVENT_UPDATED = 'stream:event:updated',
  EVENT_JOB_OUTBOX_SUCCESS = 'stream:event:job:outbox:success',
}
