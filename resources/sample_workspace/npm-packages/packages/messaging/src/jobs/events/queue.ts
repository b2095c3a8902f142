export enum EventsQueue {
  EVENTS = 'event-queue',
  FALLBACK_EVENTS = 'fallback-event-queue',
}
