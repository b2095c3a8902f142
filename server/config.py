"""Settings: the user's ``mesh.toml`` plus ``MESH_*`` environment overrides, validated by pydantic.

Which file may set what is decided in :mod:`server.config_sources`: the user's config file
(``--config``, ``$MESH_CONFIG``, ``~/.config/mesh-mcp/mesh.toml``) and the environment decide
everything; the workspace's own ``mesh.toml`` holds ``[conventions]`` only.

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

from server.config_env import READ_ELSEWHERE, env_origin, env_path, unknown_variables, without_unknown
from server.config_file import read_config_toml
from server.config_sources import CONFIG_FILE_NAME, inside, refuse_workspace_keys, user_config_path
from server.conventions import (
    ColumnNames,
    Conventions,
    StaticConventions,
    Statuses,
    TableNames,
)
from server.errors import ConfigError
from server.redis_settings import RedisInstanceSettings, RedisSettings
from server.state_paths import default_state_dir

__all__ = [
    "ApprovalSettings",
    "ColumnNames",
    "ConfigError",
    "Conventions",
    "HttpSettings",
    "Limits",
    "RedisInstanceSettings",
    "RedisSettings",
    "ServiceSettings",
    "Settings",
    "StaticConventions",
    "Statuses",
    "TableNames",
    "load_settings",
]


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


class Limits(_Strict):
    """Caps and thresholds: every read is bounded by these."""

    max_rows: int = Field(default=500, ge=1, le=100_000, description="row cap of any SQL read")
    default_rows: int = Field(default=50, ge=1, le=10_000, description="rows per page when a tool is not told")
    statement_timeout_ms: int = Field(default=5000, ge=10, le=600_000, description="statement timeout of SQL reads")
    connect_timeout_s: float = Field(default=3.0, gt=0, le=120, description="PostgreSQL and Redis connect timeout")
    redis_timeout_s: float = Field(default=3.0, gt=0, le=120, description="Redis command timeout")
    payload_max_bytes: int = Field(
        default=4096, ge=64, le=10_000_000, description="JSON payloads are cut at this size (with truncated=true)"
    )
    max_count: int = Field(default=500, ge=1, le=100_000, description="cap of COUNT in Redis reads")
    scan_max_iterations: int = Field(default=200, ge=1, le=100_000, description="SCAN calls per discovery")
    scan_count: int = Field(default=1000, ge=10, le=100_000, description="COUNT hint of each SCAN call")
    stream_window_ms: int = Field(
        default=120_000, ge=0, le=86_400_000, description="stream search window around a row's time"
    )
    pending_ageing_s: int = Field(default=300, ge=1, description="a PENDING row older than this is stuck")
    processing_ageing_s: int = Field(default=300, ge=1, description="a PROCESSING row older than this is stuck")
    failed_alert_count: int = Field(default=1, ge=1, description="FAILED rows from which outbox_health alerts")
    max_plan_messages: int = Field(default=100, ge=1, le=10_000, description="messages one remediation plan touches")
    dead_consumer_idle_ms: int = Field(
        default=300_000, ge=1_000, le=7 * 86_400_000,
        description="a consumer idle longer than this while holding pending entries is dead",
    )
    bull_list_scan_max: int = Field(
        default=10_000, ge=10, le=1_000_000, description="entries LPOS scans in a BullMQ list to find a job"
    )
    lag_max_age_ms: int = Field(
        default=300_000, ge=0, le=7 * 86_400_000,
        description="a group whose oldest undelivered entry waits longer than this is lagging",
    )
    stream_sample: int = Field(
        default=50, ge=1, le=10_000, description="pending entries inspect_stream examines per group"
    )
    replay_confirm_timeout_ms: int = Field(
        default=30_000, ge=500, le=600_000, description="apply_remediation waits this long for a replay"
    )
    sql_deadline_margin_ms: int = Field(
        default=2000, ge=100, le=600_000,
        description="client-side deadline of a SQL read = its statement timeout + this margin",
    )
    pg_keepalives_idle_s: int = Field(
        default=30, ge=1, le=7200, description="TCP keepalive idle time of PostgreSQL connections"
    )
    stream_read_whole_max: int = Field(
        default=10_000, ge=0, le=1_000_000,
        description="a trace reads a stream shorter than this whole (bounded pages) when the window missed",
    )
    stream_window_max_ms: int = Field(
        default=86_400_000, ge=0, le=7 * 86_400_000,
        description="a trace widens its stream window step by step up to this (clocks, time zones)",
    )
    delayed_overdue_ms: int = Field(
        default=60_000, ge=0, le=7 * 86_400_000,
        description="a BullMQ delayed job past its due time by more than this is not promoted",
    )
    index_watch: bool = Field(
        default=True,
        description="the server watches the workspace folders (Linux inotify) so that a call on an unchanged "
        "workspace skips the freshness walk; false: every call walks the workspace",
    )
    index_warm_at_start: bool = Field(
        default=True,
        description="mesh-mcp serve loads the static index and checks the workspace in the background at start-up",
    )
    summary_items: int = Field(
        default=5, ge=1, le=1000,
        description='items of each list a detail="summary" result keeps (the rest are counted in omitted)',
    )
    related_skills_max: int = Field(
        default=6, ge=0, le=100,
        description="related_skills listed per result, strongest first (the others are counted in "
        "related_skills_more)",
    )
    related_skills_index_wait_s: float = Field(
        default=2.0, ge=0, le=120,
        description="a trace waits this long for the static index to name its types' sites (for paths globs); "
        "past it the trace links skills by names only and says so",
    )


class ApprovalSettings(_Strict):
    mode: Literal["local", "signature"] = Field(
        default="local", description="local (HMAC, zero setup) or signature (Ed25519 approver keys)"
    )
    secret_file: str | None = Field(
        default=None, description="HMAC secret for local mode (default ~/.config/mesh-mcp/approval.key)"
    )
    approvers: dict[str, str] = Field(
        default_factory=dict, description="approver id -> Ed25519 public key (base64 raw or PEM)"
    )
    token_ttl_s: int = Field(default=600, ge=30, le=86_400, description="approval tokens expire after this")
    plan_ttl_s: int = Field(default=3600, ge=60, le=7 * 86_400, description="plans expire after this")
    refusal_window_s: int = Field(
        default=60, ge=1, le=3600,
        description="refusals of unknown plan ids are bounded per window of this many seconds "
        "(docs/remediation.md, \"Refusals of unknown plans: bounded\")",
    )
    refusal_full_records: int = Field(
        default=5, ge=1, le=100,
        description="refusals of unknown plan ids recorded in full per window; the rest are counted in one "
        "refusals_coalesced record",
    )
    trust_file: str | None = Field(
        default=None,
        description="signature mode: the trust file listing the approvers (default /etc/mesh-mcp/trust.toml, "
        "else ~/.config/mesh-mcp/trust.toml); never from MESH_* variables nor the workspace's mesh.toml",
    )
    allow_unprotected_approvers: bool = Field(
        default=False,
        description="set only by `serve --allow-unprotected-approvers`: apply even when the trust file is "
        "writable by the server's user (every plan and server_info then says so)",
    )
    audit_copy_file: str | None = Field(
        default=None, description="also append every audit record to this file (e.g. one made append-only)"
    )
    audit_syslog: bool = Field(default=False, description="also send every audit record to syslog (POSIX)")


class HttpSettings(_Strict):
    """Streamable HTTP mode (``mesh-mcp serve --http``): its bearer token and allowed hosts."""

    token_file: str | None = Field(
        default=None,
        description="file holding the bearer token HTTP clients must send (MESH_HTTP_TOKEN wins over it)",
    )
    allowed_hosts: list[str] = Field(
        default_factory=list,
        description="Host header values accepted when bound to a non-loopback address (host:port, '*' port "
        "wildcard allowed); empty = any host, the token still required",
    )
    allowed_origins: list[str] = Field(
        default_factory=list,
        description="Origin header values accepted when bound to a non-loopback address (empty = any)",
    )


class Settings(_Strict):
    workspace: Path | None = None
    state_dir: Path | None = Field(
        default=None,
        description="where plans, backups and audit go (default: a per-user folder outside the workspace, "
        "$XDG_STATE_HOME/mesh-mcp/<workspace hash>; never inside the workspace)",
    )
    services: dict[str, ServiceSettings] = Field(default_factory=dict)
    redis: RedisSettings = RedisSettings()
    conventions: Conventions = Conventions()
    limits: Limits = Limits()
    approval: ApprovalSettings = ApprovalSettings()
    http: HttpSettings = HttpSettings()
    enable_remediation: bool = False
    config_file: Path | None = Field(default=None, description="the user's config file these settings came from")
    workspace_config_file: Path | None = Field(
        default=None, description="the workspace's mesh.toml whose [conventions] were read (nothing else of it)"
    )

    @property
    def resolved_state_dir(self) -> Path:
        """``state_dir``, else a per-user folder outside the workspace (:func:`default_state_dir`)."""
        if self.state_dir is not None:
            return self.state_dir
        return default_state_dir(self.workspace if self.workspace is not None else Path.cwd())

    def emitter_of(self, service: str) -> str:
        """The emitter rows of ``service`` carry: its ``[services.<name>] emitter``, else the service's name with
        ``[conventions] service_prefix`` (:meth:`Conventions.service_name`: ``event`` -> ``ms-event``)."""
        svc = self.services.get(service)
        if svc is not None and svc.emitter:
            return svc.emitter
        return self.conventions.service_name(service)


def _parse_env_value(raw: str) -> Any:
    try:
        return tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        return raw


def _env_overrides(environ: dict[str, str]) -> dict[str, Any]:
    """Turn ``MESH_A__B=...`` variables into a nested dict."""
    out: dict[str, Any] = {}
    for key, raw in environ.items():
        if not key.startswith("MESH_") or key.startswith(("MESH_TEST_", "MESH_DEMO_")):
            continue
        # the token is read by server.http_auth, never stored; MESH_STANDALONE is serve's own switch
        if key in READ_ELSEWHERE:
            continue
        parts = env_path(key)
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


def unknown_env_variables(environ: dict[str, str] | None = None) -> list[str]:
    """The ``MESH_*`` variables naming no setting: ignored with a warning (see :mod:`server.config_env`)."""
    return unknown_variables(Settings, os.environ if environ is None else environ)


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


def find_config_file(workspace: Path | None, explicit: Path | None,
                     environ: dict[str, str] | None = None) -> Path | None:
    """The user's config file to read: ``--config``, ``$MESH_CONFIG``, or the one in the user's config
    folder when it exists (``server.config_sources.user_config_path``). Never ``<workspace>/mesh.toml``:
    that one is :func:`workspace_config_file`, and may hold ``[conventions]`` only."""
    env = os.environ if environ is None else environ
    if explicit is not None:
        return explicit
    if env.get("MESH_CONFIG"):
        return Path(env["MESH_CONFIG"]).expanduser()
    own = user_config_path(env)
    return own if own is not None and own.is_file() else None


def workspace_config_file(workspace: Path | None) -> Path | None:
    """``<workspace>/mesh.toml`` when it exists (naming hints only: ``server.config_sources``)."""
    if workspace is not None and (workspace / CONFIG_FILE_NAME).is_file():
        return workspace / CONFIG_FILE_NAME
    return None


def _read_toml(path: Path, workspace: Path | None = None) -> dict[str, Any]:
    """The user's file, or with ``workspace`` the workspace's own (read by the guarded reader)."""
    if workspace is None and not path.is_file():
        raise ConfigError(f"{path}: config file not found (pass --config with an existing file)")
    return read_config_toml(path, workspace)  # UTF-8 with or without a BOM; another encoding is one line


def _read_sources(ws: Path | None, config_file: Path | None,
                  env: dict[str, str]) -> tuple[dict[str, Any], Path | None, Path | None, Path | None]:
    """``(merged file data, user file, workspace file, workspace)``: the user's file decides everything,
    the workspace's ``mesh.toml`` only ``[conventions]`` (the user's file wins over it)."""
    path = find_config_file(ws, config_file, env)
    data: dict[str, Any] = {}
    if path is not None:
        data = _read_toml(path)
        if "workspace" in data and isinstance(data["workspace"], str):
            data["workspace"] = str((path.parent / data["workspace"]).expanduser().resolve())
    if ws is None and isinstance(data.get("workspace"), str):
        ws = Path(data["workspace"])
    if path is not None and ws is not None and inside(path, ws):  # named, but the agent can edit it
        refuse_workspace_keys(data, path, named=True, environ=env)
        return data, None, path, ws
    ws_file = workspace_config_file(ws)
    if ws_file is not None and path is not None and os.path.realpath(ws_file) == os.path.realpath(path):
        ws_file = None
    if ws_file is not None:
        ws_data = _read_toml(ws_file, ws)
        refuse_workspace_keys(ws_data, ws_file, environ=env)
        data = _deep_merge(ws_data, data)
    return data, path, ws_file, ws


def load_settings(
    *,
    config_file: Path | str | None = None,
    workspace: Path | str | None = None,
    environ: dict[str, str] | None = None,
    overrides: dict[str, Any] | None = None,
) -> Settings:
    """Read the user's config file (if any) and the workspace's naming hints, apply ``MESH_*`` variables
    then ``overrides``, validate.

    Raises ``ConfigError`` with one line naming the file and the key at fault.
    """
    env = dict(os.environ if environ is None else environ)
    ws = Path(workspace).expanduser().resolve() if workspace is not None else None
    if ws is None and env.get("MESH_WORKSPACE"):
        ws = Path(env["MESH_WORKSPACE"]).expanduser().resolve()
    data, path, ws_file, _ = _read_sources(ws, Path(config_file).expanduser() if config_file else None, env)
    origin = str(path or ws_file) if (path or ws_file) else "configuration"
    if ws_file is not None:
        data["workspace_config_file"] = str(ws_file.resolve())
    file_data = data
    env = without_unknown(Settings, env)
    env_data = _env_overrides(env)
    if env_data:
        origin = f"{origin} + MESH_* environment" if path else "MESH_* environment"
    data = _deep_merge(data, env_data)
    if ws is not None:
        data["workspace"] = str(ws)
    if overrides:
        data = _deep_merge(data, overrides)
    if path is not None:
        data["config_file"] = str(path.resolve())
    from server.approval.trust import apply_trust_policy  # the approval gate's sources (signature mode)

    data = apply_trust_policy(data, file_data=file_data, env_data=env_data, overrides=overrides or {},
                              config_file=path, workspace=data.get("workspace"))
    try:
        settings = Settings.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_format_validation_error(exc, env_origin(exc, env, origin))) from None
    if settings.workspace is not None and not settings.workspace.is_dir():
        raise ConfigError(f"{origin}: workspace '{settings.workspace}' is not a directory")
    if settings.workspace is not None and settings.state_dir is not None \
            and inside(settings.state_dir, settings.workspace):
        raise ConfigError(
            f"{origin}: state_dir '{settings.state_dir}' is inside the workspace '{settings.workspace}', which may "
            "not decide where the audit log and backups live: set state_dir to a folder outside it, or leave it "
            "unset for the per-user default"
        )
    return settings
