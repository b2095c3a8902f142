import { Injectable } from '@nestjs/common';
import { JobMessagingType } from '@demo/messaging';
import type { JobOf } from '@demo/workers';
import { InternalServerError } from '@demo/errors';

import { GeocodingClient } from '../../geocoding/geocoding.client';
import type { IJobHandler } from './job-handler.interface';

@Injectable()
export class GeocodeEventHandler implements IJobHandler<typeof JobMessagingType.GEOCODE_EVENT> {
  readonly jobType = JobMessagingType.GEOCODE_EVENT;

  constructor(private readonly geocoding: GeocodingClient) {}

  async handle(job: JobOf<typeof JobMessagingType.GEOCODE_EVENT>) {
    const { eventId, address } = job.data.payload;
    const location = await this.geocoding.lookup(address);
    if (!location) {
      throw new InternalServerError(`no geocoding result for event ${eventId}`, 'GEOCODING_NO_RESULT');
    }
    return { originalPayload: job.data.payload };
  }
}
