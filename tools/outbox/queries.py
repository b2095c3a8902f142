"""SQL of the runtime tools, built with ``psycopg.sql``.

Table and column names come from ``[conventions]`` through :class:`TableSchema` and are
always quoted as identifiers; every value (status, type, id, ages, cursor, limits) is a
bound parameter. Nothing here runs a query: callers pass the composed statements to
``Connections.read`` (read-only transaction, statement timeout, row cap).

Every row query selects the table's real columns, with big ``json``/``jsonb``/``text``
values cut in SQL (``left(col::text, cap)``) and their full byte length beside them, so
a page never drags megabytes of payload across the wire; plus computed ages.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from server.config import Conventions
from server.lazy_modules import LazyModule
from tools.outbox.outcome_paths import id_paths, path_sql
from tools.outbox.schema_discovery import TableSchema

sql = LazyModule("psycopg.sql")

AGE = "__mesh_age_s"
UPDATED_AGE = "__mesh_updated_age_s"
STARTED_AGE = "__mesh_started_age_s"
SCHEDULED_IN = "__mesh_scheduled_in_s"
CREATED_MS = "__mesh_created_ms"
UPDATED_MS = "__mesh_updated_ms"
PROCESSED_MS = "__mesh_processed_ms"
LENGTH_PREFIX = "__mesh_len:"

CUT_TYPES = ("json", "jsonb", "text")


def _ident(name: str) -> sql.Identifier:
    return sql.Identifier(name)


def _age(col: str) -> sql.Composed:
    return sql.SQL("EXTRACT(EPOCH FROM (now() - {}))::float8").format(_ident(col))


def _epoch_ms(col: str) -> sql.Composed:
    return sql.SQL("(EXTRACT(EPOCH FROM {}::timestamptz) * 1000)::bigint").format(_ident(col))


def select_list(schema: TableSchema, cap_bytes: int) -> sql.Composed:
    """Every column of the table (long values cut), then computed ages and epoch milliseconds."""
    parts: list[sql.Composable] = []
    for name, data_type in schema.columns.items():
        col = _ident(name)
        if data_type in CUT_TYPES:
            parts.append(sql.SQL("left({}::text, {}) AS {}").format(col, sql.Literal(cap_bytes), col))
            parts.append(sql.SQL("octet_length({}::text) AS {}").format(col, _ident(LENGTH_PREFIX + name)))
        else:
            parts.append(col)
    created = schema.col("created_at")
    if created:
        parts.append(sql.SQL("{} AS {}").format(_age(created), _ident(AGE)))
        parts.append(sql.SQL("{} AS {}").format(_epoch_ms(created), _ident(CREATED_MS)))
    updated = schema.col("updated_at")
    if updated:
        parts.append(sql.SQL("{} AS {}").format(_age(updated), _ident(UPDATED_AGE)))
        parts.append(sql.SQL("{} AS {}").format(_epoch_ms(updated), _ident(UPDATED_MS)))
    started = schema.col("started_at") if schema.kind == "job_audit" else None
    if started:
        parts.append(sql.SQL("{} AS {}").format(_age(started), _ident(STARTED_AGE)))
    processed = schema.col("processed_at")
    if processed:
        parts.append(sql.SQL("{} AS {}").format(_epoch_ms(processed), _ident(PROCESSED_MS)))
    scheduled = schema.col("scheduled_at")
    if scheduled:
        parts.append(
            sql.SQL("EXTRACT(EPOCH FROM ({} - now()))::float8 AS {}").format(_ident(scheduled), _ident(SCHEDULED_IN))
        )
    return sql.SQL(", ").join(parts)


@dataclass(frozen=True)
class PageFilters:
    status: str | None = None
    type: str | None = None
    id: Any = None
    """id value already typed for the id column (uuid.UUID for a uuid column)"""
    job_id: str | None = None
    """job_audit only: also match job_id (the jobs_outbox id)"""
    older_than_s: float | None = None


@dataclass(frozen=True)
class Keyset:
    """Position after the last row of the previous page, ordered by (created_at, service, id) descending."""

    created_at: datetime
    service: str
    id: Any


def page_query(
    schema: TableSchema, service: str, filters: PageFilters, keyset: Keyset | None, limit: int, cap_bytes: int
) -> tuple[sql.Composed, list[Any]]:
    """Newest-first page of ``schema``'s table with ``filters``, strictly after ``keyset``."""
    where: list[sql.Composable] = []
    params: list[Any] = []
    created = _ident(schema.col("created_at") or "created_at")
    id_col = _ident(schema.col("id") or "id")
    if filters.status is not None:
        where.append(sql.SQL("{} = %s").format(_ident(schema.col("status") or "status")))
        params.append(filters.status)
    if filters.type is not None:
        tcol = schema.col(schema.type_role)
        if tcol is None:
            where.append(sql.SQL("false"))
        else:
            where.append(sql.SQL("{} = %s").format(_ident(tcol)))
            params.append(filters.type)
    if filters.id is not None or filters.job_id is not None:
        alternatives: list[sql.Composable] = []
        if filters.id is not None:
            alternatives.append(sql.SQL("{} = %s").format(id_col))
            params.append(filters.id)
        job_col = schema.col("job_id")
        if filters.job_id is not None and job_col:
            alternatives.append(sql.SQL("{} = %s").format(_ident(job_col)))
            params.append(filters.job_id)
        where.append(sql.SQL("(") + sql.SQL(" OR ").join(alternatives or [sql.SQL("false")]) + sql.SQL(")"))
    if filters.older_than_s is not None:
        where.append(sql.SQL("{} < now() - make_interval(secs => %s)").format(created))
        params.append(filters.older_than_s)
    if keyset is not None:
        if service < keyset.service:
            where.append(sql.SQL("{} <= %s").format(created))
            params.append(keyset.created_at)
        elif service > keyset.service:
            where.append(sql.SQL("{} < %s").format(created))
            params.append(keyset.created_at)
        else:
            where.append(sql.SQL("({}, {}) < (%s, %s)").format(created, id_col))
            params.extend([keyset.created_at, keyset.id])
    query = sql.SQL("SELECT {cols} FROM {table}{where} ORDER BY {created} DESC, {id} DESC LIMIT %s").format(
        cols=select_list(schema, cap_bytes),
        table=_ident(schema.name),
        where=(sql.SQL(" WHERE ") + sql.SQL(" AND ").join(where)) if where else sql.SQL(""),
        created=created,
        id=id_col,
    )
    params.append(limit)
    return query, params


def rows_by_column(
    schema: TableSchema, role: str, values: list[Any], cap_bytes: int, limit: int
) -> tuple[sql.Composed, list[Any]]:
    """Rows whose ``role`` column is one of ``values`` (newest first).

    The match runs in a MATERIALIZED CTE so the planner picks the index of the lookup
    column, instead of walking a created_at index in order hoping to meet the row early
    (it does that with ``ORDER BY ... LIMIT`` when it misjudges the selectivity).
    """
    query = sql.SQL(
        "WITH hits AS MATERIALIZED (SELECT * FROM {table} WHERE {col} = ANY(%s)) "
        "SELECT {cols} FROM hits ORDER BY {created} DESC LIMIT %s"
    ).format(
        cols=select_list(schema, cap_bytes),
        table=_ident(schema.name),
        col=_ident(schema.col(role) or getattr(schema.names, role)),
        created=_ident(schema.col("created_at") or "created_at"),
    )
    return query, [values, limit]


def outcome_events_query(
    schema: TableSchema, conventions: Conventions, types: list[str], job_id: str, cap_bytes: int, limit: int
) -> tuple[sql.Composed, list[Any]]:
    """Job-outcome rows of event_queue for ``job_id``: type among ``types`` and the value at one of the
    payload's job id paths (``[conventions] job_outcome_id_keys``, ``after.job_id`` by default) = job_id.

    Each path is matched as ``((payload -> 'after') ->> 'job_id') = job_id``, the expression of the
    partial index :mod:`tools.outbox.indexes` recommends (in a MATERIALIZED CTE, as in
    :func:`rows_by_column`).
    """
    payload = schema.col("payload") or "payload"
    matches = [sql.SQL("{} = %s").format(path_sql(payload, path))
               for path in id_paths(conventions.job_outcome_id_keys)]
    if not matches:
        matches = [sql.SQL("false")]
    query = sql.SQL(
        "WITH hits AS MATERIALIZED (SELECT * FROM {table} WHERE {type} = ANY(%s) AND ({matches})) "
        "SELECT {cols} FROM hits ORDER BY {created} ASC LIMIT %s"
    ).format(
        cols=select_list(schema, cap_bytes),
        table=_ident(schema.name),
        type=_ident(schema.col("type") or "type"),
        matches=sql.SQL(" OR ").join(matches),
        created=_ident(schema.col("created_at") or "created_at"),
    )
    return query, [types, *([job_id] * (len(matches) if conventions.job_outcome_id_keys else 0)), limit]


def audit_statuses_query(audit: TableSchema, job_ids: list[str]) -> tuple[sql.Composed, list[Any]]:
    """``job_id, status`` of the job_audit rows of ``job_ids``."""
    job_id = _ident(audit.col("job_id") or "job_id")
    query = sql.SQL("SELECT {j} AS job_id, {s} AS status FROM {t} WHERE {j} = ANY(%s)").format(
        j=job_id, s=_ident(audit.col("status") or "status"), t=_ident(audit.name)
    )
    return query, [job_ids]


# -- outbox_health -----------------------------------------------------------------------


def status_counts_query(schema: TableSchema) -> sql.Composed:
    status = _ident(schema.col("status") or "status")
    return sql.SQL("SELECT {s} AS status, count(*)::bigint AS n FROM {t} GROUP BY {s} ORDER BY {s}").format(
        s=status, t=_ident(schema.name)
    )


def processing_since_column(schema: TableSchema) -> str | None:
    """The column a PROCESSING row's age is counted from: the one its writer stamps when it enters the state.

    jobs_outbox / event_queue: ``updated_at`` (the runner's claim sets it). job_audit: ``started_at``
    (the worker's upsert; the real worker never writes job_audit's ``updated_at``, always NULL), else
    ``created_at``. None when the table has none of them.
    """
    if schema.kind == "job_audit":
        return schema.col("started_at") or schema.col("created_at")
    return schema.col("updated_at") or schema.col("created_at")


def oldest_ages_query(schema: TableSchema, pending: str, processing: str) -> tuple[sql.Composed, list[Any]]:
    """Age (s) of the oldest due PENDING row and of the oldest PROCESSING row (since it entered the state).

    A PENDING row whose ``scheduled_at`` is in the future is not late and is not counted.
    jobs_outbox / event_queue: the PROCESSING age is ``now - updated_at`` (the claim) of the
    oldest-created PROCESSING row: the runner claims in ``created_at`` order, so that row holds the
    oldest claim, and the (status, created_at) index finds it without reading every PROCESSING row;
    a NULL ``updated_at`` counts from ``created_at``. job_audit: ``now - min(coalesce(started_at,
    created_at))`` over its PROCESSING rows (a retried job is re-started, so creation order says
    nothing; the worker never writes its ``updated_at``).
    """
    status = _ident(schema.col("status") or "status")
    created = _ident(schema.col("created_at") or "created_at")
    since = processing_since_column(schema) or "created_at"
    claimed = sql.SQL("coalesce({}, {})").format(_ident(since), created) if since != (
        schema.col("created_at") or "created_at") else created
    id_col = _ident(schema.col("id") or "id")
    scheduled = schema.col("scheduled_at")
    due = sql.SQL(" AND {} <= now()").format(_ident(scheduled)) if scheduled else sql.SQL("")
    if schema.kind == "job_audit":
        oldest = sql.SQL(
            " (SELECT EXTRACT(EPOCH FROM (now() - min({u})))::float8 FROM {t} WHERE {s} = %s) AS processing"
        ).format(u=claimed, t=_ident(schema.name), s=status)
    else:
        oldest = sql.SQL(
            " (SELECT EXTRACT(EPOCH FROM (now() - {u}))::float8 FROM {t} WHERE {s} = %s ORDER BY {c}, {i} LIMIT 1)"
            " AS processing"
        ).format(u=claimed, t=_ident(schema.name), s=status, c=created, i=id_col)
    query = sql.SQL(
        "SELECT (SELECT EXTRACT(EPOCH FROM (now() - min({c})))::float8 FROM {t} WHERE {s} = %s{due}) AS pending,"
    ).format(c=created, t=_ident(schema.name), s=status, due=due) + oldest
    return query, [pending, processing]


def failed_by_type_query(schema: TableSchema, failed: str, limit: int) -> tuple[sql.Composed, list[Any]]:
    status = _ident(schema.col("status") or "status")
    tcol = schema.col(schema.type_role)
    type_expr: sql.Composable = _ident(tcol) if tcol else sql.SQL("'(no type column)'")
    query = sql.SQL(
        "SELECT {ty} AS type, count(*)::bigint AS n FROM {t} WHERE {s} = %s GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT %s"
    ).format(ty=type_expr, t=_ident(schema.name), s=status)
    return query, [failed, limit]
