"""Where a job-outcome event holds its job id: JSON paths of ``[conventions] job_outcome_id_keys``.

The audit trigger writes ``payload = {before: <old job_audit row>, after: <new job_audit row>}``,
so the job id is at ``after.job_id`` (target-system.md, "The job-outcome row, exactly"); an
older configuration's flat key (``jobId``) is a path of one step. Every path is searched.

One expression per path, the same in the lookups and in the index ``doctor`` recommends:
``((payload -> 'after') ->> 'job_id')``, so a partial expression index
``... WHERE <expression> IS NOT NULL`` serves ``<expression> = ANY(ids)`` (a strict operator
implies the predicate) and holds only the rows that have that path.
"""

from __future__ import annotations

from typing import Any

from server.lazy_modules import LazyModule

sql = LazyModule("psycopg.sql")


def id_paths(keys: list[str]) -> list[tuple[str, ...]]:
    """The configured paths as tuples of keys (validated by the settings)."""
    return [tuple(key.split(".")) for key in keys]


def path_sql(payload: str, path: tuple[str, ...]) -> Any:
    """``((payload -> 'a') ->> 'b')`` as composed SQL (identifiers quoted, keys as literals)."""
    expr = sql.Identifier(payload)
    for step in path[:-1]:
        expr = sql.SQL("({} -> {})").format(expr, sql.Literal(step))
    return sql.SQL("({} ->> {})").format(expr, sql.Literal(path[-1]))


def path_text(quoted_payload: str, path: tuple[str, ...]) -> str:
    """The same expression as DDL text (``quoted_payload`` already quoted as needed)."""
    expr = quoted_payload
    for step in path[:-1]:
        expr = f"({expr} -> {_literal(step)})"
    return f"({expr} ->> {_literal(path[-1])})"


def value_at(payload: Any, path: tuple[str, ...]) -> str | None:
    """The text at ``path`` in a decoded payload (what ``->>`` returns), or None."""
    node = payload
    for step in path:
        if not isinstance(node, dict) or step not in node:
            return None
        node = node[step]
    if node is None or isinstance(node, dict | list):
        return None
    return str(node).lower() if isinstance(node, bool) else str(node)


def _literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"
