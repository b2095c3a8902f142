import { Module } from '@nestjs/common';

import { EventWorker } from './workers/event.worker';
import { FallbackEventWorker } from './workers/fallback-event.worker';
import { FallbackCreateEventHandler } from './workers/handlers/fallback-create-event.handler';
import { GeocodeEventHandler } from './workers/handlers/geocode-event.handler';
import { NotifyFollowersHandler } from './workers/handlers/notify-followers.handler';

@Module({
  providers: [EventWorker, FallbackEventWorker, GeocodeEventHandler, FallbackCreateEventHandler, NotifyFollowersHandler],
})
export class AppModule {}
