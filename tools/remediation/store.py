"""Plans on disk: ``<state_dir>/plans/<plan_id>.json`` (0600, in a 0700 directory).

A plan file is written once by ``propose_remediation`` and never rewritten. Loading
re-validates it strictly and :func:`check_integrity` proves it is the plan that was
proposed: the stored ``plan_sha256`` matches its content and every step's command and
parameters are exactly what its operation renders to. A plan is applied at most once:
:func:`claim_application` creates ``<plan_id>.applied`` exclusively before the first
destructive step and records the outcome there.
"""

from __future__ import annotations

import json
import os
import re
import secrets
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from server.config import Conventions, Settings
from server.errors import InvalidArgument, NotFound, RemediationRefused
from server.state_files import open_state_file
from tools.remediation.model import Plan
from tools.remediation.operations import render, render_params

PLAN_ID_RE = re.compile(r"^p-\d{8}-\d{6}-[0-9a-f]{8}$")


def new_plan_id(now: datetime | None = None) -> str:
    """``p-YYYYMMDD-HHMMSS-<8 random hex>`` (UTC)."""
    moment = now or datetime.now(UTC)
    return f"p-{moment:%Y%m%d-%H%M%S}-{secrets.token_hex(4)}"


def plans_dir(settings: Settings) -> Path:
    return settings.resolved_state_dir / "plans"


def validate_plan_id(plan_id: str) -> str:
    plan_id = plan_id.strip()
    if not PLAN_ID_RE.match(plan_id):
        raise InvalidArgument(
            f"plan_id {plan_id!r} is not a plan id (p-YYYYMMDD-HHMMSS-xxxxxxxx, as returned by propose_remediation)"
        )
    return plan_id


def plan_path(settings: Settings, plan_id: str) -> Path:
    return plans_dir(settings) / f"{validate_plan_id(plan_id)}.json"


def _write_private(path: Path, data: bytes) -> None:
    fd = open_state_file(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL)  # a symlinked plans/ folder is refused
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


def save_plan(settings: Settings, plan: Plan) -> Path:
    """Write a sealed plan; never overwrites an existing file."""
    if not plan.plan_sha256 or plan.plan_sha256 != plan.content_hash():
        raise ValueError("only sealed plans are saved")
    path = plan_path(settings, plan.plan_id)
    _write_private(path, (plan.model_dump_json(indent=2) + "\n").encode("utf-8"))
    return path


def load_plan_file(path: Path) -> Plan:
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise NotFound(f"no plan file {path}") from None
    try:
        return Plan.model_validate_json(raw)
    except ValidationError as exc:
        raise RemediationRefused(
            f"plan file {path} is not a valid plan ({exc.error_count()} problem(s)): it was edited or damaged; "
            "propose the remediation again"
        ) from None


def load_plan(settings: Settings, plan_id: str) -> Plan:
    plan_id = validate_plan_id(plan_id)
    path = plan_path(settings, plan_id)
    if not path.exists():
        raise NotFound(
            f"no plan {plan_id} in {plans_dir(settings)}: propose_remediation creates plans "
            "(and mesh-mcp approve must use the same --config/--workspace as the server)"
        )
    return load_plan_file(path)


def check_integrity(plan: Plan, conventions: Conventions) -> None:
    """Refuse a plan whose content no longer matches its hash or whose commands do not match its operations."""
    if plan.content_hash() != plan.plan_sha256:
        raise RemediationRefused(
            f"plan {plan.plan_id} was edited after it was proposed (its content no longer matches its sha256): "
            "propose the remediation again"
        )
    for step in plan.steps:
        if step.command != render(step.operation, conventions) or step.params != render_params(step.operation):
            raise RemediationRefused(
                f"plan {plan.plan_id} step {step.number}: the command shown differs from the operation that would "
                "run (edited plan, or [conventions] changed since it was proposed): propose it again"
            )


def is_expired(plan: Plan, now: datetime | None = None) -> bool:
    return (now or datetime.now(UTC)) >= datetime.fromisoformat(plan.expires_at)


def applied_path(settings: Settings, plan_id: str) -> Path:
    return plans_dir(settings) / f"{validate_plan_id(plan_id)}.applied"


def application_record(settings: Settings, plan_id: str) -> dict[str, Any] | None:
    path = applied_path(settings, plan_id)
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except ValueError:
        return {"status": "unknown"}


def claim_application(settings: Settings, plan_id: str, approver: str) -> None:
    """Mark the plan as being applied; :class:`RemediationRefused` if it was applied before."""
    record = {"status": "applying", "approver": approver, "started_at": datetime.now(UTC).isoformat()}
    try:
        _write_private(applied_path(settings, plan_id), json.dumps(record).encode("utf-8"))
    except FileExistsError:
        previous = application_record(settings, plan_id) or {}
        raise RemediationRefused(
            f"plan {plan_id} was already applied ({previous.get('status', 'unknown')}, started "
            f"{previous.get('started_at', '?')}): a plan runs once. Propose the remediation again to see "
            "the current state"
        ) from None


def finish_application(settings: Settings, plan_id: str, status: str, summary: str) -> None:
    path = applied_path(settings, plan_id)
    record = application_record(settings, plan_id) or {}
    record.update({"status": status, "finished_at": datetime.now(UTC).isoformat(), "summary": summary[:2000]})
    tmp = path.with_suffix(".applied.tmp")
    tmp.write_text(json.dumps(record), encoding="utf-8")
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)
