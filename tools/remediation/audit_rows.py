"""The ``job_audit`` row a "lost job" requeue relies on: read whole, digested.

A pushed job whose BullMQ job is gone and whose ``job_audit`` row has been PROCESSING for
too long was lost with its dead worker (:mod:`tools.remediation.plan_requeue`). The plan
records a digest of that row; at apply time the ``audit_row_matches`` precondition
(:mod:`tools.remediation.preconditions`) reads the row again and compares. The worker never
writes ``updated_at`` (target-system facts), so the whole row is compared, not a stamp: a
worker that took the job again (its upsert rewrites ``worker_id``, ``current_attempt``,
``started_at``) or finished it (``status``, ``finished_at``, ``result_payload``) changes it.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from server.config import Conventions
from server.lazy_modules import LazyModule
from tools.remediation.backups import jsonable_value

sql = LazyModule("psycopg.sql")

AGE_COLUMN = "mesh_since_s"
"""Alias of the row's age (seconds since ``started_at``, else ``created_at``) in :func:`audit_rows_query`."""


def audit_rows_query(conventions: Conventions, *, with_age: bool) -> Any:
    """``SELECT <every column> [, age AS mesh_since_s] FROM job_audit WHERE job_id = ANY(%s)``."""
    cols = conventions.columns
    table = sql.Identifier(conventions.tables.job_audit)
    age = sql.SQL(", EXTRACT(EPOCH FROM (now() - coalesce({st}, {c})))::float8 AS {a}").format(
        st=sql.Identifier(cols.started_at), c=sql.Identifier(cols.created_at), a=sql.Identifier(AGE_COLUMN))
    return sql.SQL("SELECT {t}.*{age} FROM {t} WHERE {j} = ANY(%s)").format(
        t=table, age=age if with_age else sql.SQL(""), j=sql.Identifier(cols.job_id))


def row_digest(row: dict[str, Any]) -> str:
    """SHA-256 of the row's columns (not :data:`AGE_COLUMN`) as canonical JSON."""
    body = {str(k): jsonable_value(v) for k, v in row.items() if k != AGE_COLUMN}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
