// Messages ws-service pushes to browsers.
export enum WsEventMessagingType {
  EVENT_CREATED = 'ws:event-created',
  EVENT_CREATION_FAILED = 'ws:event-creation-failed',
}
