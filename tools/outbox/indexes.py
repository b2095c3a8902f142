"""Indexes that keep the runtime tools fast on big outbox tables, and which ones are missing.

mesh-mcp never creates an index: ``mesh-mcp doctor`` prints the DDL of the missing ones
(``CREATE INDEX CONCURRENTLY``, safe on a live table, unnamed so PostgreSQL picks the
name) for a human to put in a migration. Each recommendation says which query it serves.
An existing index covers a recommendation when its key columns start with the
recommended ones (the trailing ``id`` tie-breaker may be absent) and, for a partial
recommendation, it is partial too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from server.config import Conventions
from tools.outbox.outcome_paths import id_paths, path_text
from tools.outbox.schema_discovery import TableSchema

# PostgreSQL's reserved key words (SQL key words appendix, "reserved" in PostgreSQL): they need quotes
RESERVED = frozenset(
    """all analyse analyze and any array as asc asymmetric authorization binary both case cast check collate
    collation column concurrently constraint create cross current_catalog current_date current_role
    current_schema current_time current_timestamp current_user default deferrable desc distinct do else end
    except false fetch for foreign freeze from full grant group having ilike in initially inner intersect into
    is isnull join lateral leading left like limit localtime localtimestamp natural not notnull null offset on
    only or order outer overlaps placing primary references returning right select session_user similar some
    symmetric system_user table tablesample then to trailing true union unique user using variadic verbose when
    where window with""".split()  # noqa: SIM905
)


def quote(name: str) -> str:
    """``name`` as PostgreSQL wants it: bare when it is a plain lower-case word, else double-quoted."""
    if re.fullmatch(r"[a-z_][a-z0-9_$]*", name) and name not in RESERVED:
        return name
    return '"' + name.replace('"', '""') + '"'


def literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


@dataclass(frozen=True)
class RecommendedIndex:
    table: str
    keys: tuple[str, ...]
    """normalised key expressions, e.g. ('status', 'created_at', 'id') or ("payload->>'jobid'",)"""
    ddl: str
    serves: str
    partial: bool = False
    label: str = ""
    """the key columns as written in the DDL, for messages"""


def normalise(expression: str) -> str:
    """Comparable form of an index key: no quotes, spaces, ``::text`` casts or outer parentheses."""
    text = expression.replace('"', "").replace(" ", "").replace("::text", "").lower()
    while text.startswith("(") and text.endswith(")"):
        text = text[1:-1]
    return text


def _btree(
    schema: TableSchema, roles: list[str], serves: str, include: list[str] | None = None
) -> RecommendedIndex | None:
    cols = [schema.col(r) for r in roles]
    names = [c for c in cols if c is not None]
    if len(names) != len(cols):
        return None
    extra = [c for c in (schema.col(r) for r in include or []) if c is not None]
    including = f" INCLUDE ({', '.join(quote(c) for c in extra)})" if extra else ""
    ddl = f"CREATE INDEX CONCURRENTLY ON {quote(schema.name)} ({', '.join(quote(c) for c in names)}){including};"
    return RecommendedIndex(table=schema.name, keys=tuple(normalise(c) for c in names), ddl=ddl, serves=serves,
                            label=", ".join(quote(c) for c in names))


def recommended_indexes(schema: TableSchema, conventions: Conventions) -> list[RecommendedIndex]:
    """Indexes the tools rely on for this table (only those whose columns exist)."""
    if not schema.exists:
        return []
    wanted = [
        # INCLUDE (type): outbox_health counts FAILED rows by type from the index alone
        _btree(schema, ["status", "created_at", "id"], "query_outbox status filter and outbox_health",
               include=[schema.type_role]),
        _btree(schema, [schema.type_role, "created_at", "id"], "query_outbox type filter"),
        _btree(schema, ["created_at", "id"], "query_outbox newest-first listing"),
    ]
    if schema.kind == "job_audit":
        wanted.append(_btree(schema, ["job_id"], "trace_job (job_audit row of a job)"))
    payload = schema.col("payload")
    if schema.kind == "event_queue" and payload:
        for path in id_paths(conventions.job_outcome_id_keys):
            expr = path_text(quote(payload), path)
            wanted.append(
                RecommendedIndex(
                    table=schema.name,
                    keys=(normalise(expr),),
                    ddl=f"CREATE INDEX CONCURRENTLY ON {quote(schema.name)} ({expr}) WHERE {expr} IS NOT NULL;",
                    serves=f"trace_job (job-outcome events of a job, by payload.{'.'.join(path)})",
                    partial=True,
                    label=expr,
                )
            )
    return [w for w in wanted if w is not None]


def is_covered(recommended: RecommendedIndex, schema: TableSchema) -> bool:
    """Whether an existing index of the table serves ``recommended``."""
    needed = list(recommended.keys)
    id_key = normalise(schema.col("id") or "id")
    minimal = needed[:-1] if len(needed) > 2 and needed[-1] == id_key else needed
    for index in schema.indexes:
        keys = [normalise(k) for k in index.key_columns]
        if index.partial and not recommended.partial:
            continue
        if keys[: len(minimal)] == minimal:
            return True
    return False


def missing_indexes(schema: TableSchema, conventions: Conventions) -> list[RecommendedIndex]:
    return [r for r in recommended_indexes(schema, conventions) if not is_covered(r, schema)]


@dataclass(frozen=True)
class RecommendedStatistics:
    """Extended statistics (MCV list) on type and status.

    Without them the planner assumes type and status are independent: for a combination
    that is rare or absent (``type=X AND status=PENDING``) it walks the type index newest
    first expecting matches soon, and reads every row of the type. With the MCV list it
    knows the combination is rare and intersects both indexes instead.
    """

    table: str
    columns: tuple[str, str]
    ddl: str


def recommended_statistics(schema: TableSchema) -> list[RecommendedStatistics]:
    type_col = schema.col(schema.type_role)
    status_col = schema.col("status")
    if not schema.exists or not type_col or not status_col:
        return []
    name = f"{schema.name}_{type_col}_{status_col}"[:63]
    ddl = (f"CREATE STATISTICS {quote(name)} (mcv) ON {quote(type_col)}, {quote(status_col)} "
           f"FROM {quote(schema.name)};")
    return [RecommendedStatistics(table=schema.name, columns=(type_col, status_col), ddl=ddl)]


def missing_statistics(schema: TableSchema) -> list[RecommendedStatistics]:
    """Recommended statistics no existing MCV statistics object of the table covers."""
    out = []
    for rec in recommended_statistics(schema):
        covered = any("m" in st.kinds and set(rec.columns) <= set(st.columns) for st in schema.statistics)
        if not covered:
            out.append(rec)
    return out
