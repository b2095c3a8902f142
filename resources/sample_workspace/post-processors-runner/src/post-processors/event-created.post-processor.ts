import { JobsOutboxEntity } from '@demo/database';
import { EventEventMessagingType, EventsQueue, JobMessagingType, Streams } from '@demo/messaging';
import { SinglePostProcessor, StreamMessage } from '@demo/post-processors';

// Consumer group `post-processor-event` on stream:event:created: asks for the organizer's
// followers to be notified.
export class EventCreatedPostProcessor extends SinglePostProcessor {
  readonly stream = Streams.EVENT_CREATED;
  readonly group = 'post-processor-event';

  shouldProcess(type: string): boolean {
    return type === EventEventMessagingType.EVENT_CREATED;
  }

  async process(message: StreamMessage): Promise<void> {
    const { after } = message.payload;
    const job = JobsOutboxEntity.createJob({
      type: JobMessagingType.NOTIFY_FOLLOWERS,
      target: EventsQueue.EVENTS,
      emitter: 'post-processor-event',
      emitterId: after.organizerId,
      payload: { eventId: after.id, organizerId: after.organizerId },
      scheduledAt: new Date(),
    });
    await this.outbox.save(job);
  }
}
