// Jobs of the event domain. The string value is the BullMQ job name and the
// jobs_outbox.type column.
export enum EventsJobType {
  GEOCODE_EVENT = 'events.geocode_event',
  NOTIFY_FOLLOWERS = 'events.notify_followers',
  FALLBACK_CREATE_EVENT = 'events.fallback_create_event',
  SYNC_EXTERNAL_CALENDAR = 'events.sync_external_calendar',
}

export interface IGeocodeEventPayload {
  eventId: string;
  address: string;
}

export interface INotifyFollowersPayload {
  eventId: string;
  organizerId: string;
}

export interface IFallbackCreateEventPayload {
  userId: string;
  payload: { title: string; startsAt: string; address: string };
}

export interface ISyncExternalCalendarPayload {
  eventId: string;
  calendarUrl: string;
}
