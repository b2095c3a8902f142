"""Texts of the prompts ``diagnose_job``, ``diagnose_event`` and ``remediate_dlq``.

Each prompt walks an agent through mesh-mcp's tools in the order the runbooks prescribe
(static map, then the outbox tables, then Redis, then a proposed repair that a human
approves), with the exact tool calls filled in from the argument and the configuration:
service names, table names, key suffixes and thresholds all come from the settings.
Arguments are validated here (:class:`~server.errors.InvalidArgument`); nothing here
imports MCP, the adapter in ``mcp_resources`` turns a :class:`PromptText` into messages.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from server.config import Settings
from server.errors import InvalidArgument

UUID_PATTERN = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
MAX_REF_LENGTH = 200
MAX_STREAM_LENGTH = 512


@dataclass(frozen=True)
class PromptText:
    """The instructions of one prompt, and the skill to attach as context."""

    text: str
    skill: str


def _clean_ref(value: str, what: str, max_length: int) -> str:
    value = (value or "").strip()
    if not value:
        raise InvalidArgument(f"{what} is empty: pass an id or a type name")
    if len(value) > max_length:
        raise InvalidArgument(f"{what} is {len(value)} characters long, at most {max_length}")
    if any(ch.isspace() or ord(ch) < 32 for ch in value):
        raise InvalidArgument(f"{what} {value!r} contains whitespace or control characters")
    if '"' in value or "`" in value:
        raise InvalidArgument(f"{what} {value!r} contains quotes; pass the bare id, type or name")
    return value


def _services_clause(settings: Settings) -> tuple[str, str]:
    """(value to put in ``service=...``, a sentence about the configured services)."""
    services = sorted(settings.services)
    if len(services) == 1:
        return services[0], f"The configured service is `{services[0]}`."
    if services:
        listed = ", ".join(f"`{s}`" for s in services)
        return "<service>", (
            f"Configured services: {listed}. Where a call needs `service`, use the one that emits "
            "the item (the `repo` of its producer in analyze_impact, or the service whose tables hold the row)."
        )
    return "<service>", (
        "No service database is configured on this server (server_info() shows the configuration): "
        "the runtime steps will fail until one is added under [services.<name>] in mesh.toml."
    )


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:g} min" if seconds >= 60 else f"{seconds:g} s"


def diagnose_job(job: str, settings: Settings) -> PromptText:
    """Diagnose one job, given its ``jobs_outbox`` id or its job type."""
    job = _clean_ref(job, "job", MAX_REF_LENGTH)
    conv, limits = settings.conventions, settings.limits
    t, st = conv.tables, conv.statuses
    service, services_text = _services_clause(settings)
    by_id = bool(UUID_PATTERN.match(job))
    if by_id:
        identify = (
            f"`{job}` is a job id: the `{t.jobs_outbox}` id, which is also the BullMQ job id and the "
            f"`{t.job_audit}.job_id`.\n\n"
            "1. **Identify it.** Find the row and its type:\n"
            f'   `query_outbox(service="{service}", table="{t.jobs_outbox}", id="{job}")` '
            f'and `query_outbox(service="{service}", table="{t.job_audit}", id="{job}")`.\n'
            "   Note its `type` and `target` (the BullMQ queue).\n"
            "2. **Map it statically.** `analyze_impact(target=\"<type from step 1>\")`: who writes it "
            "(producers, `test_only`), which worker routes its handler, on which queue (`routes`).\n"
        )
        trace_id = job
    else:
        identify = (
            f"`{job}` is a job type (a member name, a qualified name or a string value).\n\n"
            f'1. **Map it statically.** `analyze_impact(target="{job}")`: producers (ignore `test_only` '
            "sites for production), the handler and the worker that routes it, the queue in `routes`, "
            "and `unresolved`. An empty producer list is not proof of absence when the type comes "
            "from a lookup table.\n"
            f'2. **Find instances.** `query_outbox(service="{service}", table="{t.jobs_outbox}", '
            f'type="<string value from matches[].value>", limit=20)`, then '
            f'`query_outbox(service="{service}", table="{t.job_audit}", status="{st.failed}")` '
            "for failures of that type. Pick the job ids to trace.\n"
        )
        trace_id = "<job id>"
    text = f"""Diagnose the background job `{job}` with mesh-mcp. This is a read-only investigation that \
follows the trace-async-flow runbook (attached, also at skill://trace-async-flow). Keep the order \
below: each stage tells you where the next one has to look. {services_text}

{identify}3. **Trace it.** `trace_job(service="{service}", job_id="{trace_id}")` shows every hop and a \
`verdict` naming the first broken link. Read it with this table:
   - `{t.jobs_outbox}` `{st.pending}` for more than {_minutes(limits.pending_ageing_s)}: the outbox runner \
is stopped or cannot reach the database. Nothing in Redis to repair; the runner must be restarted.
   - `{t.jobs_outbox}` `{st.processing}` for more than {_minutes(limits.processing_ageing_s)}: the runner \
died between claim and push. Repair: `propose_remediation(symptom="requeue_stuck_job", \
service="{service}", ids=["{trace_id}"])`.
   - `{t.jobs_outbox}` `{st.completed}` (that means *pushed*, not executed) and no `{t.job_audit}` row: \
the job waits in BullMQ unconsumed. Check `inspect_queue(queue="<target>", job_id="{trace_id}")`: \
waiting means the worker is stopped; absent means `target` names a queue no worker listens to.
   - `{t.job_audit}` `{st.failed}`: the handler threw. `inspect_queue(queue="<target>", \
job_id="{trace_id}")` gives `failedReason`, the stack and the attempts (jobs get {conv.job_attempts}). \
Once the cause is fixed: `propose_remediation(symptom="retry_failed_job", queue="<target>", \
ids=["{trace_id}"])`. Known defect: a failed job sends no failure feedback to the client \
(the failure outcome type does not match its post-processor), so do not look for one.
   - `{t.job_audit}` `{st.completed}` but the `{t.jobs_outbox}` row is still there: the success \
outcome was not processed; follow it with `trace_event` on the outcome row in `{t.event_queue}` \
and `inspect_stream` on its stream, then `propose_remediation(symptom="reconcile_outbox", \
service="{service}", ids=[...])` if needed.
   - no row at all: `{st.completed}` rows older than the retention window ({_minutes(conv.retention_s)}) \
are purged, so an old finished job leaves no trace (`verdict: purged`); a recent one was never written.
4. **Confirm in Redis** only what step 3 points at: `inspect_queue(queue="<target>")` for the queue's \
counts, `inspect_queue(queue="<target>", job_id="{trace_id}")` for the job itself.
5. **Propose, do not repair.** If a repair applies, call `propose_remediation` as above and show the \
plan (`plan_id`, steps, `blast_radius`). Applying it needs a human: they run \
`mesh-mcp approve <plan_id>` in their terminal and hand you a token for `apply_remediation`. \
Never invent a token and never change data by other means.

Finish with: the first broken link, the evidence (tool and field), the likely cause, and the plan \
ids you proposed."""
    return PromptText(text=text, skill="trace-async-flow")


def diagnose_event(event: str, settings: Settings) -> PromptText:
    """Diagnose one event, given its ``event_queue`` id or its event type."""
    event = _clean_ref(event, "event", MAX_REF_LENGTH)
    conv, limits = settings.conventions, settings.limits
    t, st = conv.tables, conv.statuses
    service, services_text = _services_clause(settings)
    if UUID_PATTERN.match(event):
        identify = (
            f"`{event}` is an event id (the `{t.event_queue}` id, also the `id` field of its stream entries).\n\n"
            f'1. **Identify it.** `query_outbox(service="{service}", table="{t.event_queue}", id="{event}")`: '
            "note its `type`, `status` and `target_services`.\n"
            '2. **Map it statically.** `analyze_impact(target="<type from step 1>", depth=2)`: producers, '
            "the consumers (post-processors and their `shouldProcess` filter), the streams in `routes`, and "
            "what the consumers emit next.\n"
        )
        trace_id = event
    else:
        identify = (
            f"`{event}` is an event type.\n\n"
            f'1. **Map it statically.** `analyze_impact(target="{event}", depth=2)`: producers (repositories, '
            "SQL triggers in migrations, mapping tables marked `heuristic`), the consumers and their "
            "`shouldProcess` filter, the streams in `routes`, and the follow-ups.\n"
            f'2. **Find instances.** `query_outbox(service="{service}", table="{t.event_queue}", '
            f'type="<string value from matches[].value>", limit=20)`; pick the ids to trace.\n'
        )
        trace_id = "<event id>"
    stream = f"{conv.stream_prefix}<target>"
    text = f"""Diagnose the event `{event}` with mesh-mcp. This is a read-only investigation that follows \
the trace-async-flow runbook (attached, also at skill://trace-async-flow). Keep the order below. \
{services_text}

{identify}3. **Trace it.** `trace_event(service="{service}", event_id="{trace_id}")`: the row, one stream \
entry per entry of `target_services` (stream `{stream}`), the consumer groups and any dead letter, \
with a `verdict`.
   - `{st.pending}` for more than {_minutes(limits.pending_ageing_s)}: the outbox runner is stopped or \
Redis is unreachable.
   - `{st.completed}` but no effect: the problem is on the consumer side; go to step 4.
   - no row: `{st.completed}` rows older than {_minutes(conv.retention_s)} are purged (`verdict: purged`). \
A `NULL` `traceparent` is normal for rows written by triggers.
4. **Inspect the consumer side**, for each stream of step 3:
   - `inspect_stream(stream="{stream}")`: is the consumer's group there, what is its lag, what \
`anomalies` are reported (dead consumer holding entries, trimmed pending entries, missing group)?
   - `list_pending(stream="{stream}", group="<group>", min_idle_ms={conv.claim_min_idle_ms})`: entries \
nobody acknowledged. Consumers only claim entries idle over {conv.claim_min_idle_ms} ms from *other* \
consumers, so entries of a consumer that is gone stay stuck.
   - `dlq_list(stream="{stream}", contains="{trace_id}")`: after {conv.max_retries} business failures a \
message goes to `{stream}{conv.dlq_suffix}` and is acknowledged; nothing replays it. Infrastructure \
errors never go there: such a message stays pending and is re-read after {conv.claim_interval_ms} ms.
   - check the consumer's `shouldProcess` filter (from step 2) accepts this type.
5. **Propose, do not repair.** Map what you found to a plan:
   - a consumer that is gone holds entries: `propose_remediation(symptom="claim_dead_consumer", \
stream="{stream}", group="<group>")`;
   - an idempotency lock survived an outage (a re-read would be acknowledged with no effect): \
`propose_remediation(symptom="clear_stale_lock", stream="{stream}", group="<group>", ids=["<messageId>"])`, \
before anything re-reads the message;
   - dead letters: use the `remediate_dlq` prompt on that stream;
   - a row left `{st.failed}` after the message was processed: \
`propose_remediation(symptom="reconcile_outbox", service="{service}", ids=["{trace_id}"])`.
   Show each plan. A human approves it with `mesh-mcp approve <plan_id>` and gives you a token for \
`apply_remediation`; never invent one.

Finish with: the first broken link, the evidence (tool and field), the likely cause, and the plan \
ids you proposed."""
    return PromptText(text=text, skill="trace-async-flow")


def source_stream(stream: str, settings: Settings) -> str:
    """The source stream of ``stream`` (a dead-letter stream name is accepted too)."""
    stream = _clean_ref(stream, "stream", MAX_STREAM_LENGTH)
    suffix = settings.conventions.dlq_suffix
    if suffix and stream.endswith(suffix) and len(stream) > len(suffix):
        stream = stream[: -len(suffix)]
    return stream


def remediate_dlq(stream: str, settings: Settings) -> PromptText:
    """Walk the dead letters of ``stream`` through the remediation runbook."""
    source = source_stream(stream, settings)
    conv = settings.conventions
    dlq = f"{source}{conv.dlq_suffix}"
    service, services_text = _services_clause(settings)
    retry_key = conv.retry_key.format(group="<group>", message_id="<messageId>")
    retry_queue = conv.retry_queue_key.format(group="<group>")
    lock_key = conv.idempotency_key.format(group="<group>", message_id="<messageId>")
    text = f"""Remediate the dead letters of the stream `{source}` (dead-letter stream `{dlq}`) with mesh-mcp, \
following the remediate-async-failures runbook (attached, also at skill://remediate-async-failures). \
Nothing is changed without a human's approval of an exact plan. {services_text}

1. **Export and understand.** `dlq_list(stream="{source}")` (page with `cursor` until done). Save every \
dead letter (its `messageId`, `error`, `payload`, `timestamp`) in your notes *before* anything else: \
nothing is deleted that was not saved. Group them by error and say what the root cause is (missing \
entity, schema drift, broken reference...). These are business failures: each one failed \
{conv.max_retries} times. Note the retry bookkeeping (`{retry_key}` with `{conv.retry_attempt_suffix}` and \
`{conv.retry_last_error_suffix}`, and `{retry_queue}`) and whether the original is still in the stream or \
a pending list.
2. **Find the consumer.** `analyze_impact(target="<type of the dead letters>")`: the post-processor that \
consumes it (file, line, `shouldProcess`), and what it emits next.
3. **Free the pending list.** `inspect_stream(stream="{source}")`, then for each group \
`list_pending(stream="{source}", group="<group>", min_idle_ms=300000)`.
   - entries held by a consumer that is gone: `propose_remediation(symptom="claim_dead_consumer", \
stream="{source}", group="<group>")`;
   - a lock `{lock_key}` left by an outage makes the next read a silent no-op: \
`propose_remediation(symptom="clear_stale_lock", stream="{source}", group="<group>", ids=["<messageId>"])` \
before any replay or consumer restart.
4. **Stop until the cause is fixed.** A replay before the fix sends the message straight back to \
`{dlq}`. Tell the human what must be fixed (code or data) and wait for their confirmation.
5. **Replay.** `propose_remediation(symptom="dlq_replay", stream="{source}", group="<group>", \
ids=["<dead-letter entry ids>"])`. Check the plan re-adds every original field (not only the payload), \
confirms processing, then deletes the dead letter and its retry keys. The consumer must be idempotent.
6. **Reconcile the rows.** For each replayed message, `trace_event(service="{service}", \
event_id="<payload id>")`; where the `{conv.tables.event_queue}` (or `{conv.tables.jobs_outbox}` / \
`{conv.tables.job_audit}`) row is left `{conv.statuses.failed}`: \
`propose_remediation(symptom="reconcile_outbox", service="{service}", ids=[...])`.
7. **Hand over.** Show every plan (`plan_id`, steps, `blast_radius`). The human approves each with \
`mesh-mcp approve <plan_id>` and gives you a token; `apply_remediation(plan_id, approval_token, \
dry_run=true)` first, then for real (only on a server started with `--enable-remediation`). Never \
invent a token. Finish by writing down the lesson if the incident revealed a new trap."""
    return PromptText(text=text, skill="remediate-async-failures")
