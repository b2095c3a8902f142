import { Injectable } from '@nestjs/common';
import { Processor } from '@nestjs/bullmq';
import { EventsQueue, JobMessagingType } from '@demo/messaging';
import { BaseWorker, JobAuditRepository, type JobOf } from '@demo/workers';
import { InternalServerError } from '@demo/errors';

import { FallbackCreateEventHandler } from './handlers/fallback-create-event.handler';

@Injectable()
@Processor(EventsQueue.FALLBACK_EVENTS)
export class FallbackEventWorker extends BaseWorker<JobMessagingType> {
  constructor(auditRepo: JobAuditRepository, private readonly fallbackCreate: FallbackCreateEventHandler) {
    super(auditRepo);
  }

  protected async processJob(job: JobOf<JobMessagingType>) {
    switch (job.name) {
      case JobMessagingType.FALLBACK_CREATE_EVENT:
        return this.fallbackCreate.handle(job);
      default:
        throw new InternalServerError(`Unhandled job type: ${job.name}`, 'UNHANDLED_JOB_TYPE');
    }
  }
}
