"""Where each step of a plan runs: the PostgreSQL service and database, or the Redis instance.

A step names a service (SQL) or runs on the plan's Redis instance; what those names mean comes
from the settings (``[services.<name>] postgres``, ``[redis]`` / ``[redis.instances.<name>]``).
:func:`with_targets` writes each step's :attr:`~tools.remediation.model.Step.runs_on` when the
plan is proposed (host, port and database only: no user, no password), so that the plan's
sha256, which the approval token names, binds it. :func:`check_targets` resolves every step
again from the settings of whoever checks (``mesh-mcp approve``, and the server before it
applies) and refuses the plan when a step would run elsewhere than the plan says: a plan file
edited to point its SQL step at another service (hash recomputed) is refused, or, when its
``runs_on`` was edited too, shown on the approve screen as that other database.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from server.config import Settings
from server.errors import RemediationRefused
from server.redaction import redact_dsn
from server.redis_settings import DEFAULT_INSTANCE
from tools.remediation.model import Plan, SqlDeleteOp, SqlUpdateOp, Step


def postgres_endpoint(settings: Settings, service: str) -> str:
    """``PostgreSQL service 'event': database event at db-event:5432`` (no user, no secret)."""
    svc = settings.services.get(service)
    if svc is None:
        return f"PostgreSQL service '{service}' (not configured)"
    try:
        from psycopg.conninfo import conninfo_to_dict

        parts = conninfo_to_dict(svc.postgres)
    except Exception:  # an unparsable DSN is shown redacted, whole
        return f"PostgreSQL service '{service}' at {redact_dsn(svc.postgres)}"
    host = str(parts.get("host") or parts.get("hostaddr") or "(libpq default host)")
    port = str(parts.get("port") or "5432")
    db = str(parts.get("dbname") or "(libpq default database)")
    return f"PostgreSQL service '{service}': database {db} at {host}:{port}"


def redis_endpoint(settings: Settings, instance: str) -> str:
    """``Redis instance 'default' at cache:6379 db 0`` (sentinel: its service and sentinels; no secret)."""
    if instance != DEFAULT_INSTANCE and instance not in settings.redis.instances:
        return f"Redis instance '{instance}' (not configured)"
    cfg = settings.redis.instance(instance)
    if cfg.mode == "sentinel":
        return (f"Redis instance '{instance}': sentinel service '{cfg.service_name}' via "
                f"{', '.join(sorted(cfg.sentinels))}")
    try:
        url = urlsplit(cfg.url)
        where = f"{url.scheme}://{url.hostname or ''}:{url.port or 6379}{url.path or ''}"
        if url.scheme == "unix":
            where = f"unix://{url.path}"
    except ValueError:
        where = redact_dsn(cfg.url)
    return f"Redis instance '{instance}' at {where}" + (" (cluster)" if cfg.mode == "cluster" else "")


def step_target(step: Step, instance: str, settings: Settings) -> str:
    """Where ``step`` runs with ``settings``: its SQL service's database, else the plan's Redis instance."""
    op = step.operation
    if isinstance(op, SqlUpdateOp | SqlDeleteOp):
        return postgres_endpoint(settings, op.service)
    return redis_endpoint(settings, instance)


def with_targets(steps: list[Step], instance: str, settings: Settings) -> list[Step]:
    """``steps`` with their ``runs_on`` set (before the plan is sealed)."""
    return [s.model_copy(update={"runs_on": step_target(s, instance, settings)}) for s in steps]


def check_targets(plan: Plan, settings: Settings) -> None:
    """Refuse ``plan`` when a step would run elsewhere than its ``runs_on`` (bound by the plan's sha256)."""
    for step in plan.steps:
        now = step_target(step, plan.redis_instance, settings)
        if step.runs_on != now:
            was = step.runs_on or "(nowhere: the plan names no target)"
            raise RemediationRefused(
                f"plan {plan.plan_id} step {step.number}: it says it runs on {was}, but with these settings it would "
                f"run on {now} (an edited plan file, or [services] / [redis] changed since it was proposed): "
                "propose the remediation again")
        op = step.operation
        if not isinstance(op, SqlUpdateOp | SqlDeleteOp):
            continue
        checked = {str(c.args.get("service")) for c in step.checks if "service" in c.args}
        if step.target != f"{op.service}.{op.table}" or not checked <= {op.service}:
            raise RemediationRefused(
                f"plan {plan.plan_id} step {step.number}: its target {step.target!r} or its checks "
                f"({', '.join(sorted(checked)) or 'none'}) are not the service and table it changes "
                f"({op.service}.{op.table}): an edited plan file; propose the remediation again")
