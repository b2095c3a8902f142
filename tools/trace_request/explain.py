"""The plans of the lookups of ``trace_request`` (``EXPLAIN``, never ``ANALYZE``): which index each
lookup of a service's tables would use. The bench prints them on its big tables and the tests
check that every lookup with its recommended index in place is served by an index scan of it.
"""

from __future__ import annotations

import uuid
from typing import Any

from server.config import Settings
from server.lazy_modules import LazyModule
from tools.outbox.schema_discovery import TableSchema
from tools.trace_request import lookups

sql = LazyModule("psycopg.sql")

SAMPLE_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


def lookup_queries(tables: dict[str, TableSchema], settings: Settings) -> list[tuple[str, lookups.Query]]:
    """(label, query) of every lookup trace_request runs on these tables, with sample values."""
    cap, limit = settings.limits.payload_max_bytes, 100
    sample = str(uuid.uuid4())
    out: list[tuple[str, lookups.Query | None]] = []
    events, jobs, audit = tables["event_queue"], tables["jobs_outbox"], tables["job_audit"]
    if not (events.exists and jobs.exists and audit.exists):
        return []
    out.append((f"{events.name}.correlation_id", lookups.by_column(events, "correlation_id", [sample], cap, limit)))
    for schema in (jobs, events):
        out.append((f"{schema.name}.traceparent", lookups.by_traceparent(schema, [SAMPLE_TRACE], cap, limit)))
        out.append((f"{schema.name}.trace_id", lookups.by_trace_uuid(schema, [SAMPLE_TRACE], cap, limit)))
    out.append((f"{audit.name}.job_id", lookups.rows_of_jobs(audit, [sample], cap, limit)))
    conv = settings.conventions
    out.append((f"{events.name}.outcomes", lookups.outcomes_of_jobs(
        events, conv.job_outcome_id_keys, [*conv.job_success_types, *conv.job_failure_types], [sample], cap, limit)))
    return [(label, q) for label, q in out if q is not None]


def scans(plan: Any) -> list[str]:
    """``Node Type`` (and ``on index``) of every scan of a JSON plan."""
    out: list[str] = []

    def walk(node: dict[str, Any]) -> None:
        kind = node.get("Node Type", "")
        if "Scan" in kind and kind not in ("CTE Scan",):
            out.append(f"{kind} on {node['Index Name']}" if node.get("Index Name") else
                       f"{kind} on {node.get('Relation Name', '?')}")
        for child in node.get("Plans", []):
            walk(child)

    for top in plan:
        walk(top["Plan"])
    return out


def explain_query(query: lookups.Query) -> tuple[sql.Composed, list[Any]]:
    text, params = query
    return sql.SQL("EXPLAIN (FORMAT JSON) {}").format(text), params
