import { Streams } from '@demo/messaging';
import { SinglePostProcessor, StreamMessage } from '@demo/post-processors';

// Common post-processor: a job reported successful by the job_audit trigger no longer
// needs its jobs_outbox row. The trigger's payload is {before, after}: the job id is after.job_id.
export class JobOutboxSuccessPostProcessor extends SinglePostProcessor {
  readonly stream = Streams.EVENT_JOB_OUTBOX_SUCCESS;
  readonly group = 'post-processor-common';
  readonly handledTypes = ['event:job:outbox:success'];

  async process(message: StreamMessage): Promise<void> {
    await this.db.query('DELETE FROM jobs_outbox WHERE id = $1', [message.payload.after.job_id]);
  }
}
