import { EVENT_TO_WS_EVENT_MAPPING, EventEventMessagingType, Streams } from '@demo/messaging';
import { BatchPostProcessor, StreamMessage } from '@demo/post-processors';

// Consumer group `ws-service` on stream:event:created: one websocket message per event,
// chosen by EVENT_TO_WS_EVENT_MAPPING.
export class WsEventPostProcessor extends BatchPostProcessor {
  readonly stream = Streams.EVENT_CREATED;
  readonly group = 'ws-service';
  readonly eventTypes = [EventEventMessagingType.EVENT_CREATED, EventEventMessagingType.EVENT_CREATED_BY_FALLBACK];

  async processEvents(messages: StreamMessage[]): Promise<void> {
    for (const message of messages) {
      const wsType = EVENT_TO_WS_EVENT_MAPPING[message.type as keyof typeof EVENT_TO_WS_EVENT_MAPPING];
      await this.gateway.send(message.payload.after.organizerId, wsType, message.payload.after);
    }
  }
}
