import { JobsOutboxEntity } from '@demo/database';
import { JobMessagingType, UsersQueue } from '@demo/messaging';

// Test-only endpoint: the only place that produces SEND_WELCOME_EMAIL, so that job
// never runs in production.
export class EventTestController {
  async sendWelcomeEmail(userId: string, email: string) {
    return JobsOutboxEntity.createJob({
      type: JobMessagingType.SEND_WELCOME_EMAIL,
      target: UsersQueue.USERS,
      emitter: 'ms-event',
      emitterId: userId,
      payload: { userId, email },
      scheduledAt: new Date(),
    });
  }
}
