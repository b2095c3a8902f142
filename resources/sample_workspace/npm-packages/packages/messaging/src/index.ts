export * from './jobs';
export * from './events/event/types';
export * from './websockets/event/types';
export * from './streams/streams';
export * from './mappings/job-to-event.mapping';
