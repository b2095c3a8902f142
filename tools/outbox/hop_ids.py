"""The identifiers a trace hop carries that another tool takes as arguments (job id, stream, group...).

Used by the trace's text (:meth:`tools.outbox.model.TraceReport.summary_text`) and by the
``detail="summary"`` shapes (:mod:`tools.outbox.summary`, :mod:`tools.trace_request.summary`);
it sees the hop model as a type only, so the model can call it without an import cycle.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tools.outbox.model import Hop


def hop_ids(hop: Hop) -> dict[str, str]:
    """The identifiers a hop carries that another tool takes as arguments."""
    ids: dict[str, str] = {}

    def put(key: str, value: object) -> None:
        if value not in (None, "") and key not in ids:
            ids[key] = str(value)

    if hop.row is not None:
        put("service", hop.row.service)
        put("table", hop.row.table)
        put("row_id", hop.row.id)
        put("job_id", hop.row.job_id)
    if hop.bull is not None:
        put("queue", hop.bull.queue)
        put("job_id", hop.bull.job_id)
    if hop.entry is not None:
        put("stream", hop.entry.stream)
        put("entry_id", hop.entry.entry_id)
    if hop.delivery is not None:
        put("stream", hop.delivery.stream)
        put("group", hop.delivery.group)
        put("entry_id", hop.delivery.entry_id)
        if hop.delivery.pending is not None:
            put("consumer", hop.delivery.pending.consumer)
        if hop.delivery.lock_stale or hop.delivery.idempotency.exists:
            put("lock_key", hop.delivery.idempotency.key)
    letters = hop.dead_letters or (hop.delivery.dead_letters if hop.delivery is not None else [])
    if letters:
        put("dlq_stream", letters[0].dlq_stream)
        put("dlq_entry_id", letters[0].dlq_entry_id)
        put("message_id", letters[0].message_id)
    if hop.redis_key is not None:
        put("key", hop.redis_key.get("key"))
    return ids


def hop_ids_text(hop: Hop, shown: str) -> str:
    """`` (ids: key=value, ...)`` for the hop's ids not already in ``shown`` ('' when all are)."""
    extra = [f"{key}={value}" for key, value in hop_ids(hop).items()
             if key not in ("service", "table") and value not in shown]
    return f" (ids: {', '.join(extra)})" if extra else ""
