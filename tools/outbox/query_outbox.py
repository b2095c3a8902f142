"""``query_outbox``: rows of jobs_outbox / event_queue / job_audit, newest first, paginated.

Pagination is by keyset on ``(created_at, service, id)`` descending: the opaque cursor
carries the last row's position and a fingerprint of the query, so a page never skips
or repeats rows when new ones arrive, and a cursor cannot be replayed with other filters.
With ``service=None`` every configured service is queried concurrently and the pages are
merged; a service that cannot be reached is named in ``unavailable`` while the others
answer.
"""

from __future__ import annotations

import base64
import hashlib
import json
import uuid
from datetime import UTC, datetime
from typing import Any

from server.config import Settings
from server.connections import Connections
from server.errors import InvalidArgument, MeshError, NotFound
from tools.arg_bounds import MAX_OLDER_THAN_S
from tools.outbox import queries
from tools.outbox.fan_out import each_service
from tools.outbox.model import OutboxRow, QueryOutboxResult
from tools.outbox.rows import AUDIT_MISSING, hint_columns, hint_for, shape_row, times_of
from tools.outbox.schema_discovery import TABLE_KINDS, SchemaCatalog, TableSchema

CURSOR_VERSION = 1


def normalise_status(settings: Settings, status: str | None) -> str | None:
    if status is None:
        return None
    known = settings.conventions.statuses.model_dump().values()
    for value in known:
        if status == value or status.upper() == value.upper():
            return value
    raise InvalidArgument(f"unknown status {status!r}: use one of {', '.join(known)}")


def validate_table(table: str) -> str:
    if table not in TABLE_KINDS:
        raise InvalidArgument(f"unknown table {table!r}: use one of {', '.join(TABLE_KINDS)}")
    return table


def validate_text(name: str, value: str | None, max_len: int) -> str | None:
    if value is None:
        return None
    if not value or len(value) > max_len:
        raise InvalidArgument(f"{name} must be 1 to {max_len} characters long")
    if "\x00" in value:
        raise InvalidArgument(f"{name} must not contain NUL characters")
    return value


def as_uuid(value: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(value)
    except ValueError:
        return None


def typed_id(schema: TableSchema, value: str) -> Any:
    """``value`` typed for the table's id column; None when it cannot be an id there."""
    if schema.type_of("id") == "uuid":
        return as_uuid(value)
    return value


def _fingerprint(table: str, service: str | None, filters: dict[str, Any]) -> str:
    blob = json.dumps({"t": table, "s": service, "f": filters}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def encode_cursor(fingerprint: str, created_at: datetime, service: str, row_id: str) -> str:
    data = {"v": CURSOR_VERSION, "q": fingerprint, "c": created_at.isoformat(), "s": service, "i": row_id}
    return base64.urlsafe_b64encode(json.dumps(data, separators=(",", ":")).encode()).decode().rstrip("=")


def decode_cursor(cursor: str, fingerprint: str) -> tuple[datetime, str, str]:
    bad = InvalidArgument(
        "cursor is not valid for this query: pass the next_cursor returned by the previous call with the same "
        "service, table and filters (or omit it for the first page)"
    )
    if len(cursor) > 1024:
        raise bad
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        data = json.loads(base64.urlsafe_b64decode(padded.encode()))
        if data.get("v") != CURSOR_VERSION or data.get("q") != fingerprint:
            raise bad
        return datetime.fromisoformat(data["c"]), str(data["s"]), str(data["i"])
    except InvalidArgument:
        raise
    except (ValueError, KeyError, TypeError):
        raise bad from None


def _sort_key(created: datetime, service: str, row_id: str) -> tuple[datetime, str, str]:
    if created.tzinfo is not None:
        created = created.astimezone(UTC).replace(tzinfo=None)
    return created, service, row_id


async def _audit_statuses(
    connections: Connections, service: str, audit: TableSchema, job_ids: list[str]
) -> dict[str, str]:
    """job_audit status per job id (the jobs_outbox ids of a page), for the rows' hints."""
    if not audit.exists or not job_ids or not audit.has("job_id") or not audit.has("status"):
        return {}
    query, params = queries.audit_statuses_query(audit, job_ids)
    result = await connections.read(service, query, params, max_rows=len(job_ids))
    return {str(r["job_id"]): r["status"] for r in result.rows}


async def _service_page(
    connections: Connections,
    settings: Settings,
    catalog: SchemaCatalog,
    service: str,
    table: str,
    status: str | None,
    type_: str | None,
    row_id: str | None,
    older_than_s: float | None,
    keyset: tuple[datetime, str, str] | None,
    limit: int,
) -> tuple[list[tuple[tuple[datetime, str, str], OutboxRow]], list[str]]:
    tables = await catalog.tables(service)
    schema = tables[table]
    if not schema.exists:
        raise NotFound(
            f"service '{service}': table {schema.name!r} does not exist (check [conventions.tables] {table})"
        )
    missing = schema.missing_required()
    if missing:
        raise MeshError(f"service '{service}': table {schema.name!r} lacks required column(s) {', '.join(missing)}")
    id_value = job_id = None
    if row_id is not None:
        id_value = typed_id(schema, row_id)
        job_id = row_id if table == "job_audit" else None
        if id_value is None and job_id is None:
            raise InvalidArgument(f"id {row_id!r} is not a UUID, and {schema.name}.id is a uuid column")
    filters = queries.PageFilters(status=status, type=type_, id=id_value, job_id=job_id, older_than_s=older_than_s)
    key = None
    if keyset is not None:
        created, key_service, key_id = keyset
        typed = typed_id(schema, key_id) if key_service == service else key_id
        key = queries.Keyset(created_at=created, service=key_service, id=typed)
    cap = settings.limits.payload_max_bytes
    query, params = queries.page_query(schema, service, filters, key, limit + 1, cap)
    result = await connections.read(service, query, params, max_rows=limit + 1)
    shaped: list[tuple[tuple[datetime, str, str], OutboxRow, Any]] = []
    for raw in result.rows:
        row = shape_row(service, schema, raw, cap)
        created = raw[schema.col("created_at") or "created_at"]
        shaped.append((_sort_key(created, service, row.id), row, raw))
    audit: dict[str, str] = {}
    if table == "jobs_outbox":
        audit = await _audit_statuses(connections, service, tables["job_audit"], [r.id for _, r, _ in shaped])
    column = hint_columns(schema)
    out = []
    for key_tuple, row, raw in shaped:
        audit_status = audit.get(row.id, AUDIT_MISSING) if table == "jobs_outbox" else None
        row.hint = hint_for(
            row, times_of(raw), settings.conventions.statuses, settings.limits, audit_status=audit_status,
            column=column,
        )
        out.append((key_tuple, row))
    return out, schema.missing_known()


async def query_outbox(
    connections: Connections,
    settings: Settings,
    catalog: SchemaCatalog,
    *,
    service: str | None,
    table: str,
    status: str | None = None,
    type: str | None = None,
    id: str | None = None,
    older_than_s: float | None = None,
    limit: int | None = None,
    cursor: str | None = None,
) -> QueryOutboxResult:
    """Rows of ``table`` in ``service`` (or every service), newest first, filtered, one page."""
    validate_table(table)
    status = normalise_status(settings, status)
    type_ = validate_text("type", type, 255)
    row_id = validate_text("id", id, 100)
    if older_than_s is not None and not (0 <= older_than_s <= MAX_OLDER_THAN_S):
        raise InvalidArgument(f"older_than_s must be between 0 and {MAX_OLDER_THAN_S} seconds")
    max_rows = settings.limits.max_rows
    limit = settings.limits.default_rows if limit is None else limit
    if not 1 <= limit <= max_rows:
        raise InvalidArgument(f"limit must be between 1 and {max_rows} (the [limits] max_rows cap)")
    services = connections.resolve_services(service)
    filters = {"status": status, "type": type_, "id": row_id, "older_than_s": older_than_s}
    fingerprint = _fingerprint(table, service, filters)
    keyset = decode_cursor(cursor, fingerprint) if cursor else None
    if keyset is not None and keyset[1] not in services:
        raise InvalidArgument("cursor refers to a service that is no longer configured: start again without cursor")

    pages: dict[str, list[tuple[tuple[datetime, str, str], OutboxRow]]] = {}
    missing: dict[str, list[str]] = {}

    async def one(name: str) -> None:
        pages[name], missing_cols = await _service_page(
            connections, settings, catalog, name, table, status, type_, row_id, older_than_s, keyset, limit
        )
        if missing_cols:
            missing[name] = missing_cols

    problems = await each_service(services, one, named=service is not None)
    merged = sorted((item for page in pages.values() for item in page), key=lambda kv: kv[0], reverse=True)
    more = len(merged) > limit
    rows = [row for _, row in merged[:limit]]
    next_cursor = None
    if more and rows:
        last_key = merged[limit - 1][0]
        raw_created = _raw_created(merged[limit - 1][1])
        next_cursor = encode_cursor(fingerprint, raw_created or last_key[0], last_key[1], last_key[2])
    return QueryOutboxResult(
        services=services,
        table=table,  # type: ignore[arg-type]
        filters={k: v for k, v in filters.items() if v is not None},
        rows=rows,
        next_cursor=next_cursor,
        unavailable=problems,
        missing_columns=missing,
    )


def _raw_created(row: OutboxRow) -> datetime | None:
    """The row's created_at as the database returned it (naive or aware), for an exact keyset."""
    if row.created_at is None:
        return None
    return datetime.fromisoformat(row.created_at)
