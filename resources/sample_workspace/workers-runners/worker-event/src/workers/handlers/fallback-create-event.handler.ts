import { Injectable } from '@nestjs/common';
import { EventQueueEntity } from '@demo/database';
import { getEventForJob, JobMessagingType } from '@demo/messaging';
import type { JobOf } from '@demo/workers';

import { EventService } from '../../events/event.service';
import type { IJobHandler } from './job-handler.interface';

@Injectable()
export class FallbackCreateEventHandler implements IJobHandler<typeof JobMessagingType.FALLBACK_CREATE_EVENT> {
  readonly jobType = JobMessagingType.FALLBACK_CREATE_EVENT;

  constructor(private readonly events: EventService) {}

  async handle(job: JobOf<typeof JobMessagingType.FALLBACK_CREATE_EVENT>) {
    const { userId, payload } = job.data.payload;
    const event = await this.events.create(userId, payload);
    // indirect producer: the event type comes from JOB_TO_EVENT_MAPPING
    await this.events.emit(
      EventQueueEntity.createEvent({
        type: getEventForJob(job.name),
        emitter: 'worker-event',
        emitterId: userId,
        payload: { before: null, after: event },
        targetServices: ['event:created'],
      }),
    );
    return { originalPayload: job.data.payload };
  }
}
