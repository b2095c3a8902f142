import { Inject, Injectable } from '@nestjs/common';
import { Processor } from '@nestjs/bullmq';
import { EventsQueue, JobMessagingType } from '@demo/messaging';
import { BaseWorker, JobAuditRepository, type JobOf } from '@demo/workers';
import { InternalServerError } from '@demo/errors';

import { GeocodeEventHandler } from './handlers/geocode-event.handler';
import type { IJobHandler } from './handlers/job-handler.interface';

@Injectable()
@Processor(EventsQueue.EVENTS)
export class EventWorker extends BaseWorker<JobMessagingType> {
  private readonly handlerMap: Map<string, IJobHandler>;

  constructor(
    @Inject(JobAuditRepository) auditRepo: JobAuditRepository,
    @Inject(GeocodeEventHandler) geocode: GeocodeEventHandler,
  ) {
    super(auditRepo);
    const handlers: IJobHandler[] = [geocode];
    this.handlerMap = new Map(handlers.map((handler) => [handler.jobType, handler]));
  }

  protected async processJob(job: JobOf<JobMessagingType>) {
    const handler = this.handlerMap.get(job.name);
    if (!handler) {
      throw new InternalServerError(`Unhandled job type: ${job.name}`, 'UNHANDLED_JOB_TYPE');
    }
    return handler.handle(job);
  }
}
