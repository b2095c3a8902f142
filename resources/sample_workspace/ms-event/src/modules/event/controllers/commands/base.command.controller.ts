import { JobsOutboxEntity } from '@demo/database';
import { EventsQueue, JobMessagingType } from '@demo/messaging';

const NO_FALLBACK_STATUSES = [400, 403, 404, 409];

export abstract class BaseCommandController {
  protected abstract saveJob(job: JobsOutboxEntity): Promise<void>;

  // Runs `action`; when it fails for a reason other than a client error, writes a
  // FALLBACK_* job so that a worker completes the command later.
  protected async withFallback<T>(
    type: JobMessagingType,
    userId: string,
    payload: Record<string, unknown>,
    action: () => Promise<T>,
  ): Promise<T | { status: 206 }> {
    try {
      return await action();
    } catch (error) {
      const status = (error as { status?: number }).status ?? 500;
      if (NO_FALLBACK_STATUSES.includes(status)) throw error;
      await this.saveJob(
        JobsOutboxEntity.createJob({
          type,
          target: EventsQueue.FALLBACK_EVENTS,
          emitter: 'ms-event',
          emitterId: userId,
          payload: { userId, payload },
          scheduledAt: new Date(),
        }),
      );
      return { status: 206 };
    }
  }
}
