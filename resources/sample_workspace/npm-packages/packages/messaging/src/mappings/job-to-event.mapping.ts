import { JobMessagingType } from '../jobs';
import { EventEventMessagingType } from '../events/event/types';
import { WsEventMessagingType } from '../websockets/event/types';

// A fallback job, once run, emits the event listed here (an indirect producer: the
// handler calls getEventForJob(job.name), so the event type never appears next to it).
export const JOB_TO_EVENT_MAPPING = {
  [JobMessagingType.FALLBACK_CREATE_EVENT]: EventEventMessagingType.EVENT_CREATED_BY_FALLBACK,
} as const;

// Which websocket message ws-service sends for a domain event.
export const EVENT_TO_WS_EVENT_MAPPING = {
  [EventEventMessagingType.EVENT_CREATED]: WsEventMessagingType.EVENT_CREATED,
  [EventEventMessagingType.EVENT_CREATED_BY_FALLBACK]: WsEventMessagingType.EVENT_CREATED,
} as const;

export function getEventForJob(jobType: string): string | undefined {
  return (JOB_TO_EVENT_MAPPING as Record<string, string>)[jobType];
}
