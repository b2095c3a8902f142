"""``[conventions]``: every name of the diagnosed system, as a setting.

Tables, columns, statuses, Redis key patterns, stream entry fields, and the call,
decorator, field and base-class names the static index looks for in the TypeScript
code. The defaults follow the target system's documentation; a deployment that renames
something overrides it in ``mesh.toml`` (or ``MESH_CONVENTIONS__...``). Patterns use
``{group}``, ``{message_id}``, ``{job_id}`` and ``{domain}`` (the emitter without ``service_prefix``,
``ms-`` by default: :meth:`Conventions.domain_of`, the one place that rule is applied).

Who may set which: the workspace's own ``mesh.toml`` may set names only (strings and lists of
strings: tables, columns, streams, prefixes, key patterns). Numbers, thresholds, flags and the
few names that decide what remediation treats as running (:data:`USER_ONLY_NAMES`) come from the
user's config only: :func:`user_only_conventions` lists them by type, so a new numeric convention
is covered without listing it. Key patterns keep their placeholders (:data:`KEY_PATTERN_PLACEHOLDERS`)
wherever they come from: a pattern without them would name one key for every job or message.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from server.lint_conventions import LintConventions

KEY_PATTERN_PLACEHOLDERS: dict[str, tuple[str, ...]] = {
    "retry_key": ("{group}", "{message_id}"),
    "retry_queue_key": ("{group}",),
    "idempotency_key": ("{group}", "{message_id}"),
    "job_completed_key": ("{job_id}",),
}
"""Each key pattern and the placeholders it must hold (filled by ``tools.streams.keys.fill``)."""

USER_ONLY_NAMES = frozenset({"bullmq_lock_suffix"})
"""String conventions that are not naming hints: the lock suffix decides which active BullMQ jobs look
stalled (and so which ones requeue moves back to wait). Set in the user's config only."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _d(default: Any, description: str) -> Any:
    """A field with a default and the description the settings reference prints."""
    return Field(default=default, description=description)


class TableNames(_Strict):
    jobs_outbox: str = _d("jobs_outbox", "the job outbox table (one row per job to push to BullMQ)")
    event_queue: str = _d("event_queue", "the event outbox table (never event_outbox)")
    job_audit: str = _d("job_audit", "the table workers write each job's execution into")


class Statuses(_Strict):
    pending: str = _d("PENDING", "status of a row waiting for the outbox runner")
    processing: str = _d("PROCESSING", "status of a row claimed by the runner (or a job running in a worker)")
    completed: str = _d("COMPLETED", "status after the push (jobs_outbox) or the execution (job_audit)")
    failed: str = _d("FAILED", "status of a row or job that failed")


class ColumnNames(_Strict):
    """Column names of the outbox tables (a name applies to every table that has the column)."""

    id: str = _d("id", "primary key (uuid); jobs_outbox.id is also the BullMQ job id")
    status: str = _d("status", "row status")
    attempts: str = _d("attempts", "push attempts of the runner")
    last_error: str = _d("lastError", "last push error (camelCase: quoted in SQL)")
    type: str = _d("type", "job or event type (the string value of the enum member)")
    emitter: str = _d("emitter", "the service that wrote the row (ms-<domain>)")
    emitter_id: str = _d("emitterId", "id of the entity or user that caused the row")
    target: str = _d("target", "jobs_outbox: the BullMQ queue the job is pushed to")
    payload: str = _d("payload", "jsonb payload")
    scheduled_at: str = _d("scheduled_at", "jobs_outbox: not pushed before this time")
    created_at: str = _d("created_at", "row creation time")
    updated_at: str = _d("updated_at", "last status change")
    trace_id: str = _d("traceId", "old trace field (uuid)")
    traceparent: str = _d("traceparent", "W3C trace context; NULL is normal for rows written by SQL triggers")
    version: str = _d("version", "event_queue: payload version")
    target_services: str = _d("target_services", "event_queue: the streams (targets) the event is pushed to")
    correlation_id: str = _d("correlation_id", "event_queue: correlation id (scatter-gather)")
    processed_at: str = _d("processed_at", "event_queue: push time")
    job_id: str = _d("job_id", "job_audit: the jobs_outbox id of the job")
    job_type: str = _d("job_type", "job_audit: the job type")
    worker_id: str = _d("worker_id", "job_audit: the worker that ran the job")
    current_attempt: str = _d("current_attempt", "job_audit: attempt number")
    started_at: str = _d("started_at", "job_audit: start of the execution")
    finished_at: str = _d("finished_at", "job_audit: end of the execution")
    result_payload: str = _d("result_payload", "job_audit: what the handler returned")
    error_message: str = _d("error_message", "job_audit: the handler's error")
    error_stack: str = _d("error_stack", "job_audit: the handler's stack trace")


class StaticConventions(_Strict):
    """Names the static index and verify_flow look for in the TypeScript code."""

    messaging_package: str = _d("npm-packages/packages/messaging", "the contracts package (job/event/queue types)")
    merged_job_object: list[str] = _d(["JobMessagingType"], "objects merging every domain's job types by spread")
    job_registry: list[str] = _d(["JobRegistry"], "interfaces mapping each job type to its payload")
    create_job_calls: list[str] = _d(["createJob"], "calls that write a jobs_outbox row")
    fallback_calls: list[str] = _d(["withFallback"], "helpers that write a FALLBACK job when the wrapped call fails")
    create_event_calls: list[str] = _d(["createEvent", "createFollowUp"], "calls that write an event_queue row")
    outbox_entities: list[str] = _d(["JobsOutboxEntity", "EventQueueEntity"], "classes the create calls belong to")
    processor_decorators: list[str] = _d(["Processor"], "decorator binding a worker class to a BullMQ queue")
    worker_base_classes: list[str] = _d(["BaseWorker"], "base class of BullMQ workers")
    handler_type_fields: list[str] = _d(["jobType"], "handler field naming the job type it handles")
    handler_methods: list[str] = _d(["handle"], "handler method that runs a job")
    handler_interfaces: list[str] = _d(["IJobHandler"], "interfaces job handlers implement")
    post_processor_base_classes: list[str] = _d(
        ["SinglePostProcessor", "BatchPostProcessor", "BasePostProcessor", "PostProcessor"],
        "base classes of Redis Streams consumers",
    )
    post_processor_filter_methods: list[str] = _d(["shouldProcess"], "post-processor method filtering event types")
    post_processor_type_fields: list[str] = _d(
        ["eventTypes", "handledTypes", "supportedTypes", "types"], "post-processor fields listing accepted types"
    )
    post_processor_stream_fields: list[str] = _d(["stream", "streamName", "streamKey"], "fields naming the stream")
    post_processor_group_fields: list[str] = _d(["group", "groupName", "consumerGroup"], "fields naming the group")
    mapping_table_suffixes: list[str] = _d(["_MAPPING", "_MAP"], "names of type-to-type mapping tables end so")
    sql_event_functions: list[str] = _d(["create_event_queue_record"], "SQL functions triggers call to write events")
    migration_query_calls: list[str] = _d(["query"], "calls whose string argument is SQL (queryRunner.query)")
    direct_queue_calls: list[str] = _d(["add", "addBulk"], "BullMQ calls that push a job without the outbox")
    direct_queue_classes: list[str] = _d(["Queue", "FlowProducer"], "BullMQ classes whose instances push jobs")
    job_type_suffixes: list[str] = _d(["JobType", "JobMessagingType"], "enum/object names holding job types")
    event_type_suffixes: list[str] = _d(
        ["EventType", "EventMessagingType", "Events"], "enum/object names holding event types"
    )
    ws_type_markers: list[str] = _d(["Ws", "WS", "WebSocket", "Websocket"], "name parts of websocket message types")
    queue_suffixes: list[str] = _d(["Queue"], "enum names holding BullMQ queue names")
    stream_enum_names: list[str] = _d(["Streams", "Stream"], "enum names holding stream names")
    skip_dirs: list[str] = _d(
        ["node_modules", "dist", "build", "coverage", ".git", ".mesh"], "folders never indexed"
    )
    test_path_markers: list[str] = _d(
        ["/tests/", "/test/", "/__tests__/", "/e2e/", "/controllers/tests/", ".spec.", ".test.", ".e2e-spec."],
        "a file whose path contains one of these is test-only",
    )
    known_emitters: list[str] = _d([], "emitters to resolve SQL-built names for, beyond those found in code")
    type_fields: list[str] = _d(["type"], "field of the createJob/createEvent argument holding the type")
    job_target_fields: list[str] = _d(["target"], "field of the createJob argument holding the queue")
    target_services_fields: list[str] = _d(
        ["targetServices", "target_services"], "field of the createEvent argument holding the target streams"
    )
    emitter_fields: list[str] = _d(["emitter"], "field of the create argument holding the emitter")
    job_data_field: str = _d("data", "the BullMQ job's data field (job.data)")
    job_payload_field: str = _d("payload", "the envelope field holding the payload (job.data.payload)")
    job_envelope_fields: list[str] = _d(["payload", "traceparent", "traceId"], "fields of the job envelope")
    original_payload_key: str = _d("originalPayload", "key a handler returns its payload under, for the audit")
    bare_error_classes: list[str] = _d(["Error"], "error classes a worker should not throw (untyped errors)")
    module_decorators: list[str] = _d(["Module"], "decorator of NestJS modules")
    module_provider_fields: list[str] = _d(["providers"], "module field listing providers")
    inject_queue_decorators: list[str] = _d(["InjectQueue"], "decorator injecting a BullMQ queue")
    transaction_calls: list[str] = _d(["transaction"], "calls running a callback in a DB transaction")
    start_transaction_calls: list[str] = _d(["startTransaction"], "calls opening a transaction")
    commit_transaction_calls: list[str] = _d(["commitTransaction"], "calls committing a transaction")
    transaction_param_types: list[str] = _d(
        ["EntityManager", "QueryRunner"], "parameter types that carry the caller's transaction"
    )
    ws_send_calls: list[str] = _d(
        ["notifyUser", "notifyUsers", "broadcast", "broadcastExcept", "emit", "sendToUser", "sendToUsers",
         "sendToRoom"],
        "calls that send a websocket message (its type is any argument resolving to a value)",
    )
    ws_send_receivers: list[str] = _d(
        ["gateway", "server", "socket", "sockets", "io", "notification", "notifications", "notifier", "ws",
         "websocket", "websockets", "room", "realtime"],
        "words of a ws send call's receiver (this.notificationService, this.gateway.server.to(room)), camelCase split",
    )
    repository_create_calls: list[str] = _d(
        ["create"], "repository calls building an event_queue row from an object with type and targetServices/emitter"
    )
    config_event_type_keys: list[str] = _d(
        ["successEvent", "failureEvent"], "JSON config keys holding an event type a service writes (per trigger)"
    )
    test_setup_markers: list[str] = _d(
        ["global-setup", "globalSetup", "global.setup", "setup-tests", "setupTests", "jest.setup", "vitest.setup"],
        "file names of test set-up scripts (a migration folder only they run is a test-only copy)",
    )


class Conventions(_Strict):
    """Every name of the diagnosed system; defaults follow target-system.md."""

    tables: TableNames = TableNames()
    columns: ColumnNames = ColumnNames()
    statuses: Statuses = Statuses()
    audit_trigger: str = _d("notify_job_audit_status_change", "trigger function writing job outcomes to event_queue")
    job_success_types: list[str] = _d(
        ["job.outbox.success", "{domain}:job:outbox:success"], "event types of a successful job (both versions)"
    )
    job_failure_types: list[str] = _d(
        ["job.outbox.failed", "{domain}:job:outbox:failure", "{domain}:job:outbox:failed"],
        "event types of a failed job (both versions, and the name the failure post-processor expects)",
    )
    job_failure_accepted_types: list[str] = _d(
        ["job.outbox.failed", "{domain}:job:outbox:failed"],
        "event types the common failure post-processor accepts; a failure event of another type (the trigger's "
        "<d>:job:outbox:failure) is acknowledged unprocessed, so no failure feedback is written (P4)",
    )
    service_prefix: str = _d(
        "ms-", "prefix of the microservices' names and emitters (ms-<domain>): a job outcome's {domain} is the "
        "emitter without it, a repository named with it is an emitter; empty: names are domains as they are",
    )
    stream_prefix: str = _d("stream:", "stream key = prefix + target service")
    dlq_suffix: str = _d("-dlq", "dead-letter stream key = full stream key + suffix")
    stream_maxlen: int = _d(10000, "approximate MAXLEN of the runner's XADD")
    retry_key: str = _d("retry:post-processor:{group}:{message_id}", "retry bookkeeping key of a message")
    retry_attempt_suffix: str = _d(":attempt", "suffix of the retry attempt counter key")
    retry_last_error_suffix: str = _d(":lastError", "suffix of the retry last error key")
    retry_queue_key: str = _d("retry-queue:post-processor:{group}", "sorted set of scheduled retries (score = ms)")
    idempotency_key: str = _d("idempotency:post-processor:{group}:{message_id}", "idempotency lock (SET NX EX)")
    idempotency_ttl_s: int = _d(86400, "TTL of the idempotency lock")
    max_retries: int = _d(5, "business failures before a message is dead-lettered")
    claim_interval_ms: int = _d(30000, "how often consumers re-read their pending entries")
    claim_min_idle_ms: int = _d(60000, "consumers claim others' entries idle longer than this")
    dlq_message_id_field: str = _d("messageId", "dead-letter field: id of the message in the source stream")
    dlq_error_field: str = _d("error", "dead-letter field: the error")
    dlq_payload_field: str = _d("payload", "dead-letter field: JSON of the parsed message")
    dlq_timestamp_field: str = _d("timestamp", "dead-letter field: when it was dead-lettered")
    event_type_field: str = _d("type", "stream entry field holding the event type")
    event_id_field: str = _d("id", "stream entry field holding the event_queue id")
    event_body_field: str = _d("event", "stream entry field holding the whole event JSON")
    stream_envelope_fields: list[str] = _d(
        ["emitter", "emitterId", "correlationId", "traceId", "traceparent", "version", "createdAt", "payload"],
        "entry fields rebuilt from the event JSON when a replayed original was trimmed",
    )
    dlq_event_key: str = _d("payload", "key of the dead letter's payload object holding the event JSON text")
    bullmq_prefix: str = _d("bull", "BullMQ key prefix: <prefix>:<queue>:...")
    bullmq_state_lists: list[str] = _d(["wait", "active", "paused"], "BullMQ states kept in lists")
    bullmq_state_sorted_sets: list[str] = _d(
        ["delayed", "prioritized", "waiting-children", "failed", "completed"], "BullMQ states kept in sorted sets"
    )
    job_outcome_id_keys: list[str] = _d(
        ["after.job_id"],
        "JSON paths (dot-separated) in a job-outcome event's payload holding the job id, all searched; the audit "
        "trigger writes {before, after} rows, so after.job_id; a flat key (jobId) is a one-step path",
    )
    job_completed_key: str = _d("job:completed:{job_id}", "the worker's idempotency guard of a finished job")
    job_attempts: int = _d(3, "attempts BullMQ jobs are pushed with")
    retention_s: int = _d(86400, "COMPLETED rows older than this are purged by the runner")
    bullmq_lock_suffix: str = _d("lock", "a running BullMQ job's lock key: <prefix>:<queue>:<jobId>:<suffix>")
    bullmq_stalled_check_key: str = _d(
        "stalled-check", "key a BullMQ worker's stalled checker sets (PX stalledInterval) on each run"
    )
    static: StaticConventions = StaticConventions()
    lint: LintConventions = LintConventions()

    @field_validator(*KEY_PATTERN_PLACEHOLDERS)
    @classmethod
    def _keep_placeholders(cls, value: str, info: ValidationInfo) -> str:
        """A key pattern without its placeholders names one key for every job or message (a guard
        that is always set, a lock every message shares): refused wherever it comes from."""
        missing = [p for p in KEY_PATTERN_PLACEHOLDERS[str(info.field_name)] if p not in value]
        if missing:
            raise ValueError(f"{info.field_name} {value!r} lacks the placeholder {', '.join(missing)}: a key pattern "
                             f"must hold {' and '.join(KEY_PATTERN_PLACEHOLDERS[str(info.field_name)])} "
                             f"(default {cls.model_fields[str(info.field_name)].default!r})")
        return value

    @field_validator("service_prefix")
    @classmethod
    def _service_prefix(cls, value: str) -> str:
        """A prefix of names: at most 64 characters, no whitespace or control character."""
        if len(value) > 64 or any(ch.isspace() or not ch.isprintable() for ch in value):
            raise ValueError(f"service_prefix {value!r} must be at most 64 printable characters without spaces "
                             "(the start of every service and emitter name, such as 'ms-'; '' for none)")
        return value

    def domain_of(self, name: str) -> str:
        """The domain of an emitter or service name: ``name`` without a leading :attr:`service_prefix`
        (``ms-event`` -> ``event``); a name without the prefix is its own domain. Every tool reads the rule here."""
        return name.removeprefix(self.service_prefix) if self.service_prefix else name

    def is_service_name(self, name: str) -> bool:
        """Whether ``name`` (a repository, an emitter) is named like a microservice: it starts with a non-empty
        :attr:`service_prefix` and has a domain after it. With an empty prefix no name is told apart so."""
        return bool(self.service_prefix) and name.startswith(self.service_prefix) and name != self.service_prefix

    def service_name(self, name: str) -> str:
        """The service (emitter) name of a domain or service name: ``event`` -> ``ms-event``; a name that
        already carries the prefix (or any name, with an empty prefix) is kept."""
        return name if not self.service_prefix or name.startswith(self.service_prefix) else self.service_prefix + name

    @field_validator("job_outcome_id_keys")
    @classmethod
    def _id_paths(cls, value: list[str]) -> list[str]:
        """Each entry is a JSON path ``a.b.c`` (an optional leading ``$.`` is dropped) of plain keys."""
        out = []
        for raw in value:
            path = raw.strip().removeprefix("$.")
            steps = path.split(".")
            if len(steps) > 8 or not all(re.fullmatch(r"[A-Za-z0-9_-]{1,63}", step) for step in steps):
                raise ValueError(f"job_outcome_id_keys: {raw!r} is not a JSON path of plain keys such as "
                                 "'after.job_id' (letters, digits, _ or -, separated by dots, at most 8 steps)")
            out.append(path)
        return out


_NAME_TYPES: tuple[Any, ...] = (str, list[str])


def user_only_conventions(model: type[BaseModel] = Conventions, prefix: str = "") -> frozenset[str]:
    """Dotted paths (``stream_maxlen``, ``lint.near_miss_ratio``) of the conventions the workspace's
    ``mesh.toml`` may not set: every field that is not a name (a number, a threshold, a flag: by its
    type, so a new one is covered) and :data:`USER_ONLY_NAMES`."""
    out: set[str] = set()
    for name, field in model.model_fields.items():
        path = f"{prefix}{name}"
        kind = field.annotation
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            out |= user_only_conventions(kind, f"{path}.")
        elif kind not in _NAME_TYPES or path in USER_ONLY_NAMES:
            out.add(path)
    return frozenset(out)
