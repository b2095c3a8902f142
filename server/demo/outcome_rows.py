"""The demo's job-outcome rows as the audit trigger wrote them, and the outbox runner's stream entry for one."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from psycopg import sql

from server.config import Conventions


@dataclass(frozen=True)
class OutcomeRow:
    """One event_queue row the audit trigger wrote, as the outbox runner reads it."""

    id: str
    type: str
    emitter: str
    emitter_id: str | None
    correlation_id: str | None
    trace_id: str | None
    traceparent: str | None
    version: int
    created_at_ms: int
    target_services: list[str]
    payload: Any


def outcome_columns(conv: Conventions) -> sql.Composable:
    """The RETURNING list of :class:`OutcomeRow`, in its field order."""
    c = conv.columns
    plain = [sql.SQL("{}::text").format(sql.Identifier(name)) for name in (
        c.id, c.type, c.emitter, c.emitter_id, c.correlation_id, c.trace_id, c.traceparent)]
    return sql.SQL(", ").join([
        *plain, sql.Identifier(c.version),
        # a timestamp column holds the session's local time: read it in the session's zone
        sql.SQL("(extract(epoch from {} AT TIME ZONE current_setting('TimeZone')) * 1000)::bigint").format(
            sql.Identifier(c.created_at)),
        sql.Identifier(c.target_services), sql.Identifier(c.payload)])


def outcome_fields(row: OutcomeRow, conv: Conventions) -> dict[str, str]:
    """The runner's entry for a job-outcome row: every field of a stream entry, absent values as ""."""
    message = {
        conv.event_id_field: row.id, conv.event_type_field: row.type, "emitter": row.emitter,
        "emitterId": row.emitter_id or "", "correlationId": row.correlation_id or "", "traceId": row.trace_id or "",
        "traceparent": row.traceparent or "", "version": str(row.version), "createdAt": str(row.created_at_ms),
        "payload": json.dumps(row.payload),
    }
    message[conv.event_body_field] = json.dumps({**message, "payload": row.payload})
    return message
