"""Indexes the lookups of ``trace_request`` need, for ``doctor`` and for the "ran without one" notes.

- ``event_queue (correlation_id)``: the correlation lookup and the expansion of a request;
- ``(substr(traceparent, 4, 32))`` on jobs_outbox and event_queue: the trace id of a traceparent
  (``00-<trace-id>-...``), matched by the same expression;
- ``("traceId")``: the old uuid trace field;
- the payload search (entity_id) is bounded by ``created_at`` (``(created_at, id)``, which
  query_outbox already recommends): it scans the rows of the time window only.
"""

from __future__ import annotations

from tools.outbox.indexes import RecommendedIndex, is_covered, normalise, quote
from tools.outbox.schema_discovery import TableSchema

SERVES = "trace_request"


def traceparent_expression(column: str) -> str:
    return f"substr({quote(column)}, 4, 32)"


def _index(schema: TableSchema, expression: str, label: str, what: str, *, expression_index: bool) -> RecommendedIndex:
    keys = f"({expression})" if expression_index else expression
    return RecommendedIndex(table=schema.name, keys=(normalise(expression),),
                            ddl=f"CREATE INDEX CONCURRENTLY ON {quote(schema.name)} ({keys});",
                            serves=f"{SERVES} ({what})", label=label)


def recommended(schema: TableSchema) -> dict[str, RecommendedIndex]:
    """role -> index, for the lookup columns this table has."""
    if not schema.exists or schema.kind == "job_audit":
        return {}
    out: dict[str, RecommendedIndex] = {}
    corr = schema.col("correlation_id")
    if corr and schema.kind == "event_queue":
        out["correlation_id"] = _index(schema, quote(corr), quote(corr), "correlation id lookup",
                                       expression_index=False)
    tp = schema.col("traceparent")
    if tp:
        expr = traceparent_expression(tp)
        out["traceparent"] = _index(schema, expr, expr, "trace id lookup in traceparent", expression_index=True)
    tid = schema.col("trace_id")
    if tid:
        out["trace_id"] = _index(schema, quote(tid), quote(tid), "trace id lookup in the old traceId",
                                 expression_index=False)
    created = schema.col("created_at")
    if created and schema.col("payload"):
        id_col = quote(schema.col("id") or "id")
        out["payload"] = RecommendedIndex(
            table=schema.name, keys=(normalise(created), normalise(schema.col("id") or "id")),
            ddl=f"CREATE INDEX CONCURRENTLY ON {quote(schema.name)} ({quote(created)}, {id_col});",
            serves=f"{SERVES} (payload search bounded by the time window)", label=quote(created))
    return out


def missing(schema: TableSchema) -> list[RecommendedIndex]:
    """Recommended indexes of trace_request that no index of the table covers (the payload one is
    query_outbox's and reported there)."""
    return [rec for role, rec in recommended(schema).items() if role != "payload" and not is_covered(rec, schema)]


def unindexed(schema: TableSchema, role: str) -> RecommendedIndex | None:
    """The index a lookup on ``role`` wants when the table lacks it (None when covered)."""
    rec = recommended(schema).get(role)
    if rec is None or is_covered(rec, schema):
        return None
    return rec
