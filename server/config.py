"""Settings: ``mesh.toml`` plus ``MESH_*`` environment overrides, validated by pydantic.

Every name of the diagnosed system (tables, columns, Redis key patterns, call and
decorator names) is a setting in ``[conventions]``; the defaults match the target
system's documentation. Loading never connects to anything.

Environment overrides use ``MESH_`` then the dotted path with ``__`` between parts,
e.g. ``MESH_REDIS__URL`` or ``MESH_SERVICES__USER__POSTGRES``; ``MESH_WORKSPACE`` and
``MESH_REDIS_URL`` are accepted as short forms. Values are parsed as TOML when they
look like TOML values (numbers, booleans, arrays), else taken as strings.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

CONFIG_FILE_NAME = "mesh.toml"


class ConfigError(Exception):
    """The configuration cannot be used; the message names the key and the file."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ServiceSettings(_Strict):
    """One microservice: its PostgreSQL database holding the outbox tables."""

    postgres: str = Field(description="libpq DSN or postgresql:// URL of the service database")
    emitter: str | None = Field(
        default=None, description="emitter name written by this service (defaults to ms-<service>)"
    )

    @field_validator("postgres")
    @classmethod
    def _dsn_shape(cls, value: str) -> str:
        value = value.strip()
        if not value:
            raise ValueError("empty DSN")
        if "://" in value:
            scheme = value.split("://", 1)[0]
            if scheme not in ("postgres", "postgresql"):
                raise ValueError(f"unsupported scheme {scheme!r}: use postgresql://user@host:port/db")
        elif "=" not in value:
            raise ValueError("not a DSN: use postgresql://user@host:port/db or 'host=... dbname=...'")
        return value


class RedisSettings(_Strict):
    url: str = Field(default="redis://127.0.0.1:6379/0", description="redis:// or rediss:// or unix:// URL")

    @field_validator("url")
    @classmethod
    def _url_shape(cls, value: str) -> str:
        if not value.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError("must start with redis://, rediss:// or unix://")
        return value


class TableNames(_Strict):
    jobs_outbox: str = "jobs_outbox"
    event_queue: str = "event_queue"
    job_audit: str = "job_audit"


class Statuses(_Strict):
    pending: str = "PENDING"
    processing: str = "PROCESSING"
    completed: str = "COMPLETED"
    failed: str = "FAILED"


class ColumnNames(_Strict):
    """Column names of the outbox tables (a name applies to every table that has the column)."""

    id: str = "id"
    status: str = "status"
    attempts: str = "attempts"
    last_error: str = "lastError"
    type: str = "type"
    emitter: str = "emitter"
    emitter_id: str = "emitterId"
    target: str = "target"
    payload: str = "payload"
    scheduled_at: str = "scheduled_at"
    created_at: str = "created_at"
    updated_at: str = "updated_at"
    trace_id: str = "traceId"
    traceparent: str = "traceparent"
    version: str = "version"
    target_services: str = "target_services"
    correlation_id: str = "correlation_id"
    processed_at: str = "processed_at"
    job_id: str = "job_id"
    job_type: str = "job_type"
    worker_id: str = "worker_id"
    current_attempt: str = "current_attempt"
    started_at: str = "started_at"
    finished_at: str = "finished_at"
    result_payload: str = "result_payload"
    error_message: str = "error_message"
    error_stack: str = "error_stack"


class StaticConventions(_Strict):
    """Names the static index looks for in the TypeScript code."""

    messaging_package: str = "npm-packages/packages/messaging"
    merged_job_object: list[str] = ["JobMessagingType"]
    job_registry: list[str] = ["JobRegistry"]
    create_job_calls: list[str] = ["createJob"]
    fallback_calls: list[str] = ["withFallback"]
    create_event_calls: list[str] = ["createEvent", "createFollowUp"]
    outbox_entities: list[str] = ["JobsOutboxEntity", "EventQueueEntity"]
    processor_decorators: list[str] = ["Processor"]
    worker_base_classes: list[str] = ["BaseWorker"]
    handler_type_fields: list[str] = ["jobType"]
    handler_methods: list[str] = ["handle"]
    handler_interfaces: list[str] = ["IJobHandler"]
    post_processor_base_classes: list[str] = [
        "SinglePostProcessor",
        "BatchPostProcessor",
        "BasePostProcessor",
        "PostProcessor",
    ]
    post_processor_filter_methods: list[str] = ["shouldProcess"]
    post_processor_type_fields: list[str] = ["eventTypes", "handledTypes", "supportedTypes", "types"]
    post_processor_stream_fields: list[str] = ["stream", "streamName", "streamKey"]
    post_processor_group_fields: list[str] = ["group", "groupName", "consumerGroup"]
    mapping_table_suffixes: list[str] = ["_MAPPING", "_MAP"]
    sql_event_functions: list[str] = ["create_event_queue_record"]
    migration_query_calls: list[str] = ["query"]
    direct_queue_calls: list[str] = ["add", "addBulk"]
    direct_queue_classes: list[str] = ["Queue", "FlowProducer"]
    job_type_suffixes: list[str] = ["JobType", "JobMessagingType"]
    event_type_suffixes: list[str] = ["EventType", "EventMessagingType", "Events"]
    ws_type_markers: list[str] = ["Ws", "WS", "WebSocket", "Websocket"]
    queue_suffixes: list[str] = ["Queue"]
    stream_enum_names: list[str] = ["Streams", "Stream"]
    skip_dirs: list[str] = ["node_modules", "dist", "build", "coverage", ".git", ".mesh"]
    test_path_markers: list[str] = [
        "/tests/",
        "/test/",
        "/__tests__/",
        "/e2e/",
        "/controllers/tests/",
        ".spec.",
        ".test.",
        ".e2e-spec.",
    ]
    known_emitters: list[str] = []
    # field names inside the object passed to createJob / createEvent (added by issue 3)
    type_fields: list[str] = ["type"]
    job_target_fields: list[str] = ["target"]
    target_services_fields: list[str] = ["targetServices", "target_services"]
    emitter_fields: list[str] = ["emitter"]
    # verify_flow (issue 8): shapes of handlers, workers, Nest modules and transactions
    job_data_field: str = "data"
    job_payload_field: str = "payload"
    job_envelope_fields: list[str] = ["payload", "traceparent", "traceId"]
    original_payload_key: str = "originalPayload"
    bare_error_classes: list[str] = ["Error"]
    module_decorators: list[str] = ["Module"]
    module_provider_fields: list[str] = ["providers"]
    inject_queue_decorators: list[str] = ["InjectQueue"]
    transaction_calls: list[str] = ["transaction"]
    start_transaction_calls: list[str] = ["startTransaction"]
    commit_transaction_calls: list[str] = ["commitTransaction"]
    transaction_param_types: list[str] = ["EntityManager", "QueryRunner"]


class Conventions(_Strict):
    """Every name of the diagnosed system; defaults follow target-system.md."""

    tables: TableNames = TableNames()
    columns: ColumnNames = ColumnNames()
    statuses: Statuses = Statuses()
    audit_trigger: str = "notify_job_audit_status_change"
    # job outcome event types written by the audit trigger; {domain} is the emitter without "ms-"
    job_success_types: list[str] = ["job.outbox.success", "{domain}:job:outbox:success"]
    job_failure_types: list[str] = [
        "job.outbox.failed",
        "{domain}:job:outbox:failure",
        "{domain}:job:outbox:failed",
    ]
    stream_prefix: str = "stream:"
    dlq_suffix: str = "-dlq"
    stream_maxlen: int = 10000
    retry_key: str = "retry:post-processor:{group}:{message_id}"
    retry_attempt_suffix: str = ":attempt"
    retry_last_error_suffix: str = ":lastError"
    retry_queue_key: str = "retry-queue:post-processor:{group}"
    idempotency_key: str = "idempotency:post-processor:{group}:{message_id}"
    idempotency_ttl_s: int = 86400
    max_retries: int = 5
    claim_interval_ms: int = 30000
    claim_min_idle_ms: int = 60000
    # field names of a dead-letter entry and of a stream entry (event type and event id)
    dlq_message_id_field: str = "messageId"
    dlq_error_field: str = "error"
    dlq_payload_field: str = "payload"
    dlq_timestamp_field: str = "timestamp"
    event_type_field: str = "type"
    event_id_field: str = "id"
    # remediation replays (issue 7): the stream field holding the event JSON, the envelope fields
    # rebuilt from that event when the original entry was trimmed, and the key of the DLQ payload
    # object (the post-processor's ParseResult) that holds the event JSON text
    event_body_field: str = "event"
    stream_envelope_fields: list[str] = [
        "emitter", "emitterId", "correlationId", "traceId", "traceparent", "version", "createdAt", "payload",
    ]
    dlq_event_key: str = "payload"
    bullmq_prefix: str = "bull"
    # BullMQ structures holding job ids, per state (lists, then sorted sets), under <prefix>:<queue>:
    bullmq_state_lists: list[str] = ["wait", "active", "paused"]
    bullmq_state_sorted_sets: list[str] = ["delayed", "prioritized", "waiting-children", "failed", "completed"]
    # payload keys of a job-outcome event_queue row that hold the jobs_outbox id
    job_outcome_id_keys: list[str] = ["jobId"]
    job_completed_key: str = "job:completed:{job_id}"
    job_attempts: int = 3
    retention_s: int = 86400
    static: StaticConventions = StaticConventions()


class Limits(_Strict):
    max_rows: int = Field(default=500, ge=1, le=100_000)
    default_rows: int = Field(default=50, ge=1, le=10_000)
    statement_timeout_ms: int = Field(default=5000, ge=10, le=600_000)
    connect_timeout_s: float = Field(default=3.0, gt=0, le=120)
    redis_timeout_s: float = Field(default=3.0, gt=0, le=120)
    payload_max_bytes: int = Field(default=4096, ge=64, le=10_000_000)
    max_count: int = Field(default=500, ge=1, le=100_000)
    scan_max_iterations: int = Field(default=200, ge=1, le=100_000)
    scan_count: int = Field(default=1000, ge=10, le=100_000)
    stream_window_ms: int = Field(default=120_000, ge=0, le=86_400_000)
    pending_ageing_s: int = Field(default=300, ge=1)
    processing_ageing_s: int = Field(default=300, ge=1)
    failed_alert_count: int = Field(default=1, ge=1)
    max_plan_messages: int = Field(default=100, ge=1, le=10_000)
    # a consumer idle longer than this while holding pending entries is reported as dead
    dead_consumer_idle_ms: int = Field(default=300_000, ge=1_000, le=7 * 86_400_000)
    # entries LPOS scans from each end of a BullMQ list (wait/active/paused) to find a job id
    bull_list_scan_max: int = Field(default=10_000, ge=10, le=1_000_000)
    # a consumer group whose oldest undelivered stream entry waits longer than this is reported as lagging
    lag_max_age_ms: int = Field(default=300_000, ge=0, le=7 * 86_400_000)
    # pending entries, retry-queue members and trimmed ids inspect_stream examines per consumer group
    stream_sample: int = Field(default=50, ge=1, le=10_000)
    # apply_remediation waits at most this long for a replayed message to be processed (issue 7)
    replay_confirm_timeout_ms: int = Field(default=30_000, ge=500, le=600_000)


class ApprovalSettings(_Strict):
    mode: Literal["local", "signature"] = "local"
    secret_file: str | None = Field(
        default=None, description="HMAC secret for local mode (default ~/.config/mesh-mcp/approval.key)"
    )
    approvers: dict[str, str] = Field(
        default_factory=dict, description="approver id -> Ed25519 public key (base64 raw or PEM)"
    )
    token_ttl_s: int = Field(default=600, ge=30, le=86_400)
    plan_ttl_s: int = Field(default=3600, ge=60, le=7 * 86_400)


class Settings(_Strict):
    workspace: Path | None = None
    state_dir: Path | None = Field(default=None, description="where plans, backups and audit go (.mesh/)")
    services: dict[str, ServiceSettings] = Field(default_factory=dict)
    redis: RedisSettings = RedisSettings()
    conventions: Conventions = Conventions()
    limits: Limits = Limits()
    approval: ApprovalSettings = ApprovalSettings()
    enable_remediation: bool = False
    config_file: Path | None = Field(default=None, description="the file these settings came from")

    @property
    def resolved_state_dir(self) -> Path:
        """``state_dir`` or ``<workspace>/.mesh`` or ``./.mesh``."""
        if self.state_dir is not None:
            return self.state_dir
        base = self.workspace if self.workspace is not None else Path.cwd()
        return base / ".mesh"

    def emitter_of(self, service: str) -> str:
        svc = self.services.get(service)
        if svc is not None and svc.emitter:
            return svc.emitter
        return service if service.startswith("ms-") else f"ms-{service}"


def _parse_env_value(raw: str) -> Any:
    try:
        return tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        return raw


def _env_overrides(environ: dict[str, str]) -> dict[str, Any]:
    """Turn ``MESH_A__B=...`` variables into a nested dict."""
    out: dict[str, Any] = {}
    short = {"MESH_WORKSPACE": "workspace", "MESH_REDIS_URL": "redis__url", "MESH_STATE_DIR": "state_dir"}
    for key, raw in environ.items():
        if not key.startswith("MESH_") or key.startswith("MESH_TEST_"):
            continue
        if key in ("MESH_CONFIG",):
            continue
        path = short.get(key) or key[len("MESH_") :].lower()
        parts = [p for p in path.split("__") if p]
        if not parts:
            continue
        cursor = out
        for part in parts[:-1]:
            cursor = cursor.setdefault(part, {})
            if not isinstance(cursor, dict):
                raise ConfigError(f"environment variable {key}: conflicts with another MESH_* variable")
        value: Any = raw if parts[-1] in ("workspace", "state_dir", "url", "postgres") else _parse_env_value(raw)
        cursor[parts[-1]] = value
    return out


def _deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _format_validation_error(err: ValidationError, origin: str) -> str:
    first = err.errors()[0]
    loc = ".".join(str(p) for p in first["loc"]) or "(root)"
    kind = first["type"]
    if kind == "extra_forbidden":
        return f"{origin}: unknown key '{loc}' (check the spelling; see docs/configuration.md)"
    msg = first["msg"].removeprefix("Value error, ")
    more = f" (and {len(err.errors()) - 1} more problem(s))" if len(err.errors()) > 1 else ""
    return f"{origin}: invalid value for '{loc}': {msg}{more}"


def find_config_file(workspace: Path | None, explicit: Path | None) -> Path | None:
    """The config file to read: ``--config``, ``$MESH_CONFIG``, or ``<workspace>/mesh.toml``."""
    if explicit is not None:
        return explicit
    env = os.environ.get("MESH_CONFIG")
    if env:
        return Path(env)
    if workspace is not None and (workspace / CONFIG_FILE_NAME).is_file():
        return workspace / CONFIG_FILE_NAME
    return None


def load_settings(
    *,
    config_file: Path | str | None = None,
    workspace: Path | str | None = None,
    environ: dict[str, str] | None = None,
    overrides: dict[str, Any] | None = None,
) -> Settings:
    """Read the config file (if any), apply ``MESH_*`` variables then ``overrides``, validate.

    Raises ``ConfigError`` with one line naming the file and the key at fault.
    """
    env = dict(os.environ if environ is None else environ)
    ws = Path(workspace).expanduser().resolve() if workspace is not None else None
    if ws is None and env.get("MESH_WORKSPACE"):
        ws = Path(env["MESH_WORKSPACE"]).expanduser().resolve()
    path = find_config_file(ws, Path(config_file).expanduser() if config_file else None)
    data: dict[str, Any] = {}
    origin = "configuration"
    if path is not None:
        origin = str(path)
        if not path.is_file():
            raise ConfigError(f"{path}: config file not found (pass --config with an existing file)")
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
        if "workspace" in data and isinstance(data["workspace"], str):
            data["workspace"] = str((path.parent / data["workspace"]).expanduser().resolve())
    try:
        env_data = _env_overrides(env)
    except ConfigError:
        raise
    if env_data:
        origin = f"{origin} + MESH_* environment" if path else "MESH_* environment"
    data = _deep_merge(data, env_data)
    if ws is not None:
        data["workspace"] = str(ws)
    if overrides:
        data = _deep_merge(data, overrides)
    if path is not None:
        data["config_file"] = str(path.resolve())
    try:
        settings = Settings.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_format_validation_error(exc, origin)) from None
    if settings.workspace is not None and not settings.workspace.is_dir():
        raise ConfigError(f"{origin}: workspace '{settings.workspace}' is not a directory")
    return settings
