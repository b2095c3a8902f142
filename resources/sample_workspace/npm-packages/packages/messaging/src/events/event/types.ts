// Domain events of the event service (event_queue.type, stream entry field `type`).
export enum EventEventMessagingType {
  EVENT_CREATED = 'event.created',
  EVENT_UPDATED = 'event.updated',
  EVENT_CREATED_BY_FALLBACK = 'event.created_by_fallback',
}
