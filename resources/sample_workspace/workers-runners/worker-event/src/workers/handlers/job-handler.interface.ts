import { JobMessagingType, JobRegistry } from '@demo/messaging';
import type { JobOf } from '@demo/workers';

export interface IJobHandler<T extends JobMessagingType = JobMessagingType> {
  readonly jobType: T;
  handle(job: JobOf<T>): Promise<{ originalPayload: JobRegistry[T] }>;
}
