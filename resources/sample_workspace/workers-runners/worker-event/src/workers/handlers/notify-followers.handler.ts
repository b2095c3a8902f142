import { Injectable } from '@nestjs/common';
import { JobMessagingType } from '@demo/messaging';
import type { JobOf } from '@demo/workers';

import type { IJobHandler } from './job-handler.interface';

// Written, but no worker routes it: NOTIFY_FOLLOWERS jobs are never executed.
@Injectable()
export class NotifyFollowersHandler implements IJobHandler<typeof JobMessagingType.NOTIFY_FOLLOWERS> {
  readonly jobType = JobMessagingType.NOTIFY_FOLLOWERS;

  async handle(job: JobOf<typeof JobMessagingType.NOTIFY_FOLLOWERS>) {
    return { originalPayload: job.data.payload };
  }
}
