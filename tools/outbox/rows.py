"""Turn raw outbox rows into :class:`OutboxRow`: JSON-ready values, cut payloads, ages, hints.

Hints restate the trace runbook's diagnosis table for the row's state:

| state | hint |
| --- | --- |
| jobs_outbox PENDING, ageing | outbox runner stopped or cannot reach the DB |
| jobs_outbox / event_queue PROCESSING, ageing | runner died between claim and push |
| jobs_outbox COMPLETED, no job_audit row | in BullMQ but not consumed: worker stopped or wrong queue |
| job_audit FAILED | handler error |
| job_audit COMPLETED, jobs_outbox row still there | success event not processed |
| event_queue PENDING, ageing | outbox runner stopped or Redis unreachable |
| event_queue COMPLETED | pushed; if no effect, the consumer side (group, filter, PEL, DLQ) |

"Ageing" means older than ``[limits] pending_ageing_s`` / ``processing_ageing_s``.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from server.config import Limits, Statuses
from tools.outbox import queries
from tools.outbox.model import OutboxRow
from tools.outbox.schema_discovery import TableSchema
from tools.streams.values import capped

AUDIT_MISSING = "__missing__"


@dataclass(frozen=True)
class RowTimes:
    """Epoch milliseconds and relative times computed by the database for one row."""

    created_ms: int | None
    updated_ms: int | None
    processed_ms: int | None
    age_s: float | None
    updated_age_s: float | None
    scheduled_in_s: float | None
    started_age_s: float | None = None
    """job_audit: seconds since started_at (the worker's upsert of the latest attempt)"""


def json_ready(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, bytes | memoryview):
        return bytes(value).hex()
    if isinstance(value, list | tuple):
        return [json_ready(v) for v in value]
    if isinstance(value, dict):
        return {str(k): json_ready(v) for k, v in value.items()}
    return value


def times_of(raw: dict[str, Any]) -> RowTimes:
    """The computed times of a row selected with :func:`queries.select_list` (None when the column is absent)."""
    return RowTimes(
        created_ms=raw.get(queries.CREATED_MS),
        updated_ms=raw.get(queries.UPDATED_MS),
        processed_ms=raw.get(queries.PROCESSED_MS),
        age_s=raw.get(queries.AGE),
        updated_age_s=raw.get(queries.UPDATED_AGE),
        scheduled_in_s=raw.get(queries.SCHEDULED_IN),
        started_age_s=raw.get(queries.STARTED_AGE),
    )


def since_of(schema: TableSchema, times: RowTimes) -> tuple[float | None, str | None]:
    """Seconds a row has been in its state and the column that says so (never a NULL column).

    jobs_outbox / event_queue: ``updated_at`` (the runner stamps each claim and push), else
    ``created_at``. job_audit: ``started_at`` (the worker's upsert), else ``created_at``: the real
    worker never writes job_audit's ``updated_at``.
    """
    if schema.kind == "job_audit":
        candidates = (("started_at", times.started_age_s), ("created_at", times.age_s))
    else:
        candidates = (("updated_at", times.updated_age_s), ("created_at", times.age_s))
    for role, value in candidates:
        if value is not None and schema.col(role):
            return round(value, 3), schema.col(role)
    return None, None


def shape_row(service: str, schema: TableSchema, raw: dict[str, Any], cap_bytes: int) -> OutboxRow:
    """``raw`` (a row of a :mod:`queries` select list) as an :class:`OutboxRow` without a hint."""
    columns: dict[str, Any] = {}
    cut_names: list[str] = []
    for name, data_type in schema.columns.items():
        value = raw.get(name)
        if data_type in queries.CUT_TYPES and value is not None:
            length = raw.get(queries.LENGTH_PREFIX + name) or 0
            text, was_cut = capped(value, cap_bytes)
            if was_cut or length > cap_bytes:
                cut_names.append(name)
                columns[name] = text
            elif data_type in ("json", "jsonb"):
                try:
                    columns[name] = json.loads(value)
                except ValueError:
                    columns[name] = value
            else:
                columns[name] = value
        else:
            columns[name] = json_ready(value)
    times = times_of(raw)

    def by_role(role: str) -> Any:
        col = schema.col(role)
        return columns.get(col) if col else None

    job_id = by_role("job_id") if schema.kind == "job_audit" else by_role("id")
    since_s, since_column = since_of(schema, times)
    return OutboxRow(
        service=service,
        table=schema.kind,  # type: ignore[arg-type]
        id=str(by_role("id")),
        job_id=str(job_id) if job_id is not None and schema.kind != "event_queue" else None,
        status=by_role("status"),
        type=by_role(schema.type_role),
        created_at=by_role("created_at"),
        updated_at=by_role("updated_at"),
        age_s=round(times.age_s, 3) if times.age_s is not None else None,
        updated_age_s=round(times.updated_age_s, 3) if times.updated_age_s is not None else None,
        since_s=since_s,
        since_column=since_column,
        columns=columns,
        truncated=bool(cut_names),
        truncated_columns=cut_names,
    )


HINT_ROLES = ("last_error", "target", "error_message", "target_services")


def hint_columns(schema: TableSchema) -> dict[str, str]:
    """Roles :func:`hint_for` reads, mapped to the table's real column names."""
    return {role: col for role in HINT_ROLES if (col := schema.col(role))}


def _ageing(age: float | None, threshold: int) -> bool:
    return age is not None and age > threshold


def hint_for(
    row: OutboxRow,
    times: RowTimes,
    statuses: Statuses,
    limits: Limits,
    *,
    audit_status: str | None = None,
    column: dict[str, str] | None = None,
) -> str | None:
    """The diagnosis-table reading of ``row``'s state.

    ``audit_status`` (jobs_outbox rows only) is the job_audit status of the job, or
    :data:`AUDIT_MISSING` when it has no job_audit row; None when unknown.
    ``column`` maps roles (``last_error``, ``target``, ``error_message``,
    ``target_services``) to real column names.
    """
    column = column or {}
    status = row.status
    age = row.age_s
    since_change, since_col = row.since_s, row.since_column
    if since_change is None:  # a row not shaped by shape_row: the same rule on its own fields
        if row.table != "job_audit" and row.updated_age_s is not None:
            since_change, since_col = row.updated_age_s, "updated_at"
        else:
            since_change, since_col = age, "created_at"

    def value(role: str) -> Any:
        name = column.get(role)
        return row.columns.get(name) if name else None

    last_error = value("last_error")
    err = f" Last error: {str(last_error)[:200]}" if last_error else ""
    if row.table in ("jobs_outbox", "event_queue"):
        what = "job" if row.table == "jobs_outbox" else "event"
        cause = "cannot reach the database" if row.table == "jobs_outbox" else "Redis is unreachable"
        if status == statuses.pending:
            if times.scheduled_in_s is not None and times.scheduled_in_s > 0:
                return f"PENDING, scheduled to run in {times.scheduled_in_s:.0f}s: not late."
            if _ageing(age, limits.pending_ageing_s):
                return (
                    f"PENDING for {age:.0f}s (> {limits.pending_ageing_s}s): the outbox runner is stopped or {cause}."
                )
            return f"PENDING for {age or 0:.0f}s: waiting for the outbox runner (not late yet)."
        if status == statuses.processing:
            if _ageing(since_change, limits.processing_ageing_s):
                return (
                    f"PROCESSING for {since_change:.0f}s since its {since_col} (> {limits.processing_ageing_s}s): the "
                    "runner died between "
                    f"claiming the row and pushing the {what}."
                )
            return "PROCESSING: claimed by the outbox runner, being pushed."
        if status == statuses.failed:
            return f"FAILED: the outbox runner gave up pushing the {what}.{err}"
        if status == statuses.completed and row.table == "jobs_outbox":
            target = value("target")
            queue = f" '{target}'" if target else ""
            if audit_status == AUDIT_MISSING:
                return (
                    f"COMPLETED (pushed to BullMQ queue{queue}) but no job_audit row: not consumed, the worker is "
                    "stopped or the target queue is wrong."
                )
            if audit_status == statuses.completed:
                return (
                    "COMPLETED and job_audit COMPLETED, yet the row is still here: the success event was not "
                    "processed (stream or common post-processor)."
                )
            if audit_status == statuses.failed:
                return "Pushed; job_audit FAILED: the handler failed (trace_job for the error)."
            if audit_status == statuses.processing:
                return "Pushed; job_audit PROCESSING: a worker is running it (or died while running it)."
            return f"COMPLETED means pushed to BullMQ queue{queue}, not executed: only job_audit says if it ran."
        if status == statuses.completed:
            targets = value("target_services")
            to = f" to {', '.join(map(str, targets))}" if isinstance(targets, list) and targets else ""
            return (
                f"COMPLETED: pushed{to}. If it had no effect, look at the consumer side (group, shouldProcess "
                "filter, PEL, DLQ): trace_event."
            )
        return None
    # job_audit
    if status == statuses.failed:
        message = value("error_message")
        detail = f": {str(message)[:200]}" if message else ""
        return f"FAILED: the handler raised an error{detail}. See the worker logs."
    if status == statuses.processing:
        if _ageing(since_change, limits.processing_ageing_s):
            return (f"PROCESSING for {since_change:.0f}s since its {since_col}: the worker died while running the "
                    "job, it hangs, or the job finished but its audit row could not be closed (trace_job tells which).")
        return "PROCESSING: a worker is running the job."
    if status == statuses.completed:
        return "COMPLETED: the handler succeeded; its success event should delete the jobs_outbox row."
    if status == statuses.pending:
        return "PENDING: recorded by the worker, not started."
    return None
