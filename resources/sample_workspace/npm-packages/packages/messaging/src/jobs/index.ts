import {
  EventsJobType,
  IFallbackCreateEventPayload,
  IGeocodeEventPayload,
  INotifyFollowersPayload,
  ISyncExternalCalendarPayload,
} from './events/payloads';
import { ISendWelcomeEmailPayload, UserJobType } from './users/payloads';

export * from './events/payloads';
export * from './events/queue';
export * from './users/payloads';
export * from './users/queue';

// Every domain's job types merged into one object: JobMessagingType.GEOCODE_EVENT and
// EventsJobType.GEOCODE_EVENT name the same job.
export const JobMessagingType = {
  ...UserJobType,
  ...EventsJobType,
} as const;

export type JobMessagingType = (typeof JobMessagingType)[keyof typeof JobMessagingType];

// Job type -> payload interface.
export interface JobRegistry {
  [JobMessagingType.SEND_WELCOME_EMAIL]: ISendWelcomeEmailPayload;
  [JobMessagingType.GEOCODE_EVENT]: IGeocodeEventPayload;
  [JobMessagingType.NOTIFY_FOLLOWERS]: INotifyFollowersPayload;
  [JobMessagingType.FALLBACK_CREATE_EVENT]: IFallbackCreateEventPayload;
  [JobMessagingType.SYNC_EXTERNAL_CALENDAR]: ISyncExternalCalendarPayload;
}
