"""Indexes that keep the runtime tools fast on big outbox tables, and which ones are missing.

mesh-mcp never creates an index: ``mesh-mcp doctor`` prints the DDL of the missing ones
(``CREATE INDEX CONCURRENTLY``, safe on a live table) for a human to run in a migration.
Each recommendation says which query it serves. An existing index counts as covering a
recommendation when its key columns start with the recommended ones (the trailing ``id``
tie-breaker may be absent) and, for a partial recommendation, it is partial too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from psycopg import sql

from server.config import Conventions
from tools.outbox.schema_discovery import TableSchema


@dataclass(frozen=True)
class RecommendedIndex:
    table: str
    name: str
    keys: tuple[str, ...]
    """normalised key expressions, e.g. ('status', 'created_at', 'id') or ("(payload->>'jobid')",)"""
    ddl: str
    serves: str
    partial: bool = False


def normalise(expression: str) -> str:
    """Comparable form of an index key: no quotes, spaces, ``::text`` casts or outer parentheses."""
    text = expression.replace('"', "").replace(" ", "").replace("::text", "").lower()
    while text.startswith("((") and text.endswith("))"):
        text = text[1:-1]
    return text


def _name(table: str, parts: list[str]) -> str:
    base = "idx_" + table + "_" + "_".join(re.sub(r"[^a-zA-Z0-9]+", "", p).lower() for p in parts)
    return base[:63]


def _btree(schema: TableSchema, roles: list[str], serves: str) -> RecommendedIndex | None:
    cols = [schema.col(r) for r in roles]
    if any(c is None for c in cols):
        return None
    names = [c for c in cols if c is not None]
    ddl = sql.SQL("CREATE INDEX CONCURRENTLY IF NOT EXISTS {} ON {} ({});").format(
        sql.Identifier(_name(schema.name, names)),
        sql.Identifier(schema.name),
        sql.SQL(", ").join(sql.Identifier(c) for c in names),
    )
    return RecommendedIndex(
        table=schema.name,
        name=_name(schema.name, names),
        keys=tuple(normalise(c) for c in names),
        ddl=ddl.as_string(None),
        serves=serves,
    )


def recommended_indexes(schema: TableSchema, conventions: Conventions) -> list[RecommendedIndex]:
    """Indexes the tools rely on for this table (only those whose columns exist)."""
    if not schema.exists:
        return []
    type_role = "job_type" if schema.kind == "job_audit" else "type"
    wanted = [
        _btree(schema, ["status", "created_at", "id"], "query_outbox status filter; outbox_health oldest ages"),
        _btree(schema, [type_role, "created_at", "id"], "query_outbox type filter; trace_job outcome lookup"),
        _btree(schema, ["created_at", "id"], "query_outbox newest-first listing without filter"),
    ]
    if schema.kind == "job_audit":
        wanted.append(_btree(schema, ["job_id"], "trace_job: job_audit row of a job"))
    payload = schema.col("payload")
    if schema.kind == "event_queue" and payload:
        for key in conventions.job_outcome_id_keys:
            name = _name(schema.name, [payload, key])
            ddl = sql.SQL("CREATE INDEX CONCURRENTLY IF NOT EXISTS {n} ON {t} (({p}->>{k})) WHERE {p} ? {k};").format(
                n=sql.Identifier(name), t=sql.Identifier(schema.name), p=sql.Identifier(payload), k=sql.Literal(key)
            )
            wanted.append(
                RecommendedIndex(
                    table=schema.name,
                    name=name,
                    keys=(normalise(f"({payload}->>'{key}')"),),
                    ddl=ddl.as_string(None),
                    serves="trace_job: job-outcome events of a job",
                    partial=True,
                )
            )
    return [w for w in wanted if w is not None]


def is_covered(recommended: RecommendedIndex, schema: TableSchema) -> bool:
    """Whether an existing index of the table serves ``recommended``."""
    needed = list(recommended.keys)
    minimal = needed[:-1] if len(needed) > 1 and needed[-1] == normalise(schema.col("id") or "id") else needed
    for index in schema.indexes:
        keys = [normalise(k) for k in index.key_columns]
        if index.partial and not recommended.partial:
            continue
        if keys[: len(needed)] == needed or keys[: len(minimal)] == minimal:
            return True
    return False


def missing_indexes(schema: TableSchema, conventions: Conventions) -> list[RecommendedIndex]:
    return [r for r in recommended_indexes(schema, conventions) if not is_covered(r, schema)]
