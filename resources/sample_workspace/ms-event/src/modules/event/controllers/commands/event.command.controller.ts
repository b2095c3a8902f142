import { JobMessagingType } from '@demo/messaging';

import { BaseCommandController } from './base.command.controller';
import { EventService } from '../../services/event.service';

export class EventCommandController extends BaseCommandController {
  constructor(private readonly events: EventService) {
    super();
  }

  async createEvent(userId: string, input: { title: string; startsAt: string; address: string }) {
    return this.withFallback(JobMessagingType.FALLBACK_CREATE_EVENT, userId, input, async () =>
      this.events.create(userId, input),
    );
  }

  protected async saveJob(): Promise<void> {
    // persisted through the jobs_outbox repository (omitted in this sample)
  }
}
