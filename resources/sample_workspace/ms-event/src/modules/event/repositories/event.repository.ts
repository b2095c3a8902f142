import { EventQueueEntity, JobsOutboxEntity } from '@demo/database';
import { EventEventMessagingType, EventsQueue, JobMessagingType } from '@demo/messaging';
import { EntityManager } from 'typeorm';

import { EventModel } from '../models/event.model';

export class EventRepository {
  constructor(private readonly manager: EntityManager) {}

  // One transaction: the event row, the geocoding job and the domain event commit together.
  async createEvent(input: { title: string; address: string; organizerId: string }): Promise<EventModel> {
    return this.manager.transaction(async (tx) => {
      const event = await tx.getRepository(EventModel).save(input);

      const job = JobsOutboxEntity.createJob({
        type: JobMessagingType.GEOCODE_EVENT,
        target: EventsQueue.EVENTS,
        emitter: 'ms-event',
        emitterId: input.organizerId,
        payload: { eventId: event.id, address: input.address },
        scheduledAt: new Date(),
      });
      await tx.getRepository(JobsOutboxEntity).save(job);

      const created = EventQueueEntity.createEvent({
        type: EventEventMessagingType.EVENT_CREATED,
        emitter: 'ms-event',
        emitterId: input.organizerId,
        payload: { before: null, after: event },
        targetServices: ['event:created'],
      });
      await tx.getRepository(EventQueueEntity).save(created);
      return event;
    });
  }
}
