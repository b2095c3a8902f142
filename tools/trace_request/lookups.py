"""The SQL of ``trace_request``: rows of one table matching a correlation id, a trace id, a
business id in the payload, or a row id. Identifiers come from config (``psycopg.sql``),
values are always bound, every query is capped (``LIMIT``) and runs through
:meth:`server.connections.Connections.read` (read-only transaction, statement timeout).

Each lookup runs in a MATERIALIZED CTE holding the match (with its LIMIT), so the planner
uses the lookup column's index instead of walking ``created_at``.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

from server.lazy_modules import LazyModule
from tools.outbox.outcome_paths import id_paths, path_sql
from tools.outbox.queries import select_list
from tools.outbox.schema_discovery import TableSchema

sql = LazyModule("psycopg.sql")

Query = tuple["sql.Composed", list[Any]]


def _wrap(schema: TableSchema, where: sql.Composable, params: list[Any], cap_bytes: int, limit: int) -> Query:
    created = sql.Identifier(schema.col("created_at") or "created_at")
    query = sql.SQL(
        "WITH hits AS MATERIALIZED (SELECT * FROM {table} WHERE {where} LIMIT %s) "
        "SELECT {cols} FROM hits ORDER BY {created} ASC"
    ).format(table=sql.Identifier(schema.name), where=where, cols=select_list(schema, cap_bytes), created=created)
    return query, [*params, limit]


def _typed(schema: TableSchema, role: str, values: list[str]) -> list[Any]:
    """Values typed for the column (uuid columns get uuids; values that cannot be one are dropped)."""
    if schema.type_of(role) != "uuid":
        return list(values)
    out = []
    for value in values:
        try:
            out.append(uuid.UUID(value))
        except ValueError:
            continue
    return out


def by_column(schema: TableSchema, role: str, values: list[str], cap_bytes: int, limit: int) -> Query | None:
    """Rows whose ``role`` column is one of ``values``; None when the column is missing or no value fits."""
    col = schema.col(role)
    typed = _typed(schema, role, values) if col else []
    if not col or not typed:
        return None
    where = sql.SQL("{} = ANY(%s)").format(sql.Identifier(col))
    return _wrap(schema, where, [typed], cap_bytes, limit)


def by_traceparent(schema: TableSchema, trace_ids: list[str], cap_bytes: int, limit: int) -> Query | None:
    """Rows whose traceparent carries one of ``trace_ids`` (the expression the recommended index has)."""
    col = schema.col("traceparent")
    if not col or not trace_ids:
        return None
    expr = sql.SQL("substr({}, 4, 32)").format(sql.Identifier(col))  # the expression indexes.py recommends
    return _wrap(schema, sql.SQL("{} = ANY(%s)").format(expr), [list(trace_ids)], cap_bytes, limit)


def by_trace_uuid(schema: TableSchema, trace_ids: list[str], cap_bytes: int, limit: int) -> Query | None:
    """Rows whose old ``traceId`` column holds one of ``trace_ids`` (32 hex = a uuid)."""
    as_uuids = [str(uuid.UUID(hex=t)) for t in trace_ids]
    return by_column(schema, "trace_id", as_uuids, cap_bytes, limit)


def by_payload(schema: TableSchema, value: str, since_s: float, cap_bytes: int, limit: int) -> Query | None:
    """Rows of the last ``since_s`` seconds whose payload holds ``value`` anywhere (a string, or a
    number when ``value`` is numeric): ``jsonb_path_exists`` with the value bound as a variable."""
    payload = schema.col("payload")
    created = schema.col("created_at")
    if not payload or not created or schema.type_of("payload") not in ("jsonb", "json"):
        return None
    numeric = re.fullmatch(r"-?\d{1,18}(\.\d{1,12})?", value) is not None
    path = "$.** ? (@ == $v || @ == $n)" if numeric else "$.** ? (@ == $v)"
    variables = (sql.SQL("jsonb_build_object('v', %s::text, 'n', %s::numeric)") if numeric
                 else sql.SQL("jsonb_build_object('v', %s::text)"))
    where = sql.SQL(
        "{created} >= now() - make_interval(secs => %s) AND jsonb_path_exists({payload}::jsonb, %s::jsonpath, {vars})"
    ).format(created=sql.Identifier(created), payload=sql.Identifier(payload), vars=variables)
    params: list[Any] = [since_s, path, value] + ([value] if numeric else [])
    return _wrap(schema, where, params, cap_bytes, limit)


OUTCOME_KEYS = "mesh_outcome_keys"
"""Extra column of :func:`outcomes_of_jobs`: the values at the payload's job id paths, in path order."""


def outcomes_of_jobs(schema: TableSchema, id_keys: list[str], types: list[str], job_ids: list[str], cap_bytes: int,
                     limit: int) -> Query | None:
    """Job-outcome rows of event_queue of several jobs at once: type among ``types`` and the value at a
    payload job id path (``after.job_id``: see :mod:`tools.outbox.outcome_paths`) among ``job_ids``. Each
    path is matched as ``((payload -> 'after') ->> 'job_id') = ANY(ids)``: the partial expression index
    of :mod:`tools.outbox.indexes` serves it."""
    payload, type_col = schema.col("payload"), schema.col("type")
    if not payload or not type_col or not id_keys or not types or not job_ids:
        return None
    paths = id_paths(id_keys)
    matches = sql.SQL(" OR ").join(sql.SQL("{} = ANY(%s)").format(path_sql(payload, path)) for path in paths)
    keys = sql.SQL(", ").join(path_sql(payload, path) for path in paths)
    created = sql.Identifier(schema.col("created_at") or "created_at")
    query = sql.SQL(
        "WITH hits AS MATERIALIZED (SELECT * FROM {table} WHERE {type} = ANY(%s) AND ({matches}) LIMIT %s) "
        "SELECT {cols}, jsonb_build_array({keys}) AS {extra} FROM hits ORDER BY {created} ASC"
    ).format(table=sql.Identifier(schema.name), type=sql.Identifier(type_col), matches=matches,
             cols=select_list(schema, cap_bytes), keys=keys, extra=sql.Identifier(OUTCOME_KEYS), created=created)
    return query, [list(types), *([list(job_ids)] * len(paths)), limit]


def job_ids_of_outcomes(schema: TableSchema, id_keys: list[str], event_ids: list[str]) -> Query | None:
    """The values at the payload's job id paths of the outcome rows ``event_ids`` (read whole, never cut:
    a payload past the size cap still gives its job id)."""
    payload = schema.col("payload")
    typed = _typed(schema, "id", event_ids) if schema.col("id") else []
    if not payload or not id_keys or not typed:
        return None
    keys = sql.SQL(", ").join(path_sql(payload, path) for path in id_paths(id_keys))
    query = sql.SQL("SELECT jsonb_build_array({keys}) AS {extra} FROM {table} WHERE {id} = ANY(%s)").format(
        keys=keys, extra=sql.Identifier(OUTCOME_KEYS), table=sql.Identifier(schema.name),
        id=sql.Identifier(schema.col("id") or "id"))
    return query, [typed]


def rows_of_jobs(schema: TableSchema, job_ids: list[str], cap_bytes: int, limit: int) -> Query | None:
    """job_audit rows of several jobs (newest first)."""
    col = schema.col("job_id")
    typed = _typed(schema, "job_id", job_ids) if col else []
    if not schema.exists or not col or not typed:
        return None
    created = sql.Identifier(schema.col("created_at") or "created_at")
    query = sql.SQL(
        "WITH hits AS MATERIALIZED (SELECT * FROM {table} WHERE {col} = ANY(%s) LIMIT %s) "
        "SELECT {cols} FROM hits ORDER BY {created} DESC"
    ).format(table=sql.Identifier(schema.name), col=sql.Identifier(col), cols=select_list(schema, cap_bytes),
             created=created)
    return query, [typed, limit]
