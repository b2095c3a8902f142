"""Where a replayed message stands, and which dead letters were replayed before.

:func:`replay_state` tells whether a message added by a replay was processed by the
target group: ``confirmed`` (delivered and acknowledged, not dead-lettered again),
``pending`` (delivered, not acknowledged: being processed or retried), ``undelivered``
(no consumer read it yet) or ``dead_lettered`` (it failed again: the DLQ holds an entry
whose ``messageId`` is the replayed id). Reads only: XINFO GROUPS, XPENDING, XRANGE.

:func:`prior_replays` reads the audit log's ``replayed`` records, so a new plan does not
replay again a dead letter an earlier plan already replayed (it proposes the cleanup only
once that replay is confirmed).
"""

from __future__ import annotations

from typing import Any, Literal

from server.audit import AuditLog
from server.config import Settings
from tools.remediation import redis_reads as rr
from tools.streams.ids import StreamId
from tools.streams.keys import dlq_key

ReplayState = Literal["confirmed", "pending", "undelivered", "dead_lettered", "group_missing"]
AUDIT_TAIL_BYTES = 8 * 1024 * 1024


async def replay_state(redis: Any, settings: Settings, stream: str, group: str, new_id: str) -> tuple[ReplayState, str]:
    """``(state, explanation)`` of the replayed entry ``new_id`` of ``stream`` in ``group``."""
    conv = settings.conventions
    info = next((g for g in await rr.groups_of(redis, stream) if g["name"] == group), None)
    if info is None:
        return "group_missing", f"group {group} of {stream} no longer exists"
    start = f"{StreamId.parse(new_id).ms}-0"
    field = conv.dlq_message_id_field.encode()
    rows = await redis.xrange(dlq_key(conv, stream), min=start, max="+", count=settings.limits.max_count)
    for dlq_id, fields in rows:
        if rr.text(fields.get(field, b"")) == new_id:
            return "dead_lettered", f"the replay {new_id} failed again and was dead-lettered as {rr.text(dlq_id)}"
    pending = await rr.pending_of(redis, stream, group, new_id)
    if pending is not None:
        return "pending", (
            f"the replay {new_id} is pending at consumer {pending.consumer} "
            f"({pending.deliveries} deliveries, idle {pending.idle_ms} ms)"
        )
    if StreamId.parse(new_id) > StreamId.parse(info["last-delivered-id"]):
        return "undelivered", f"the replay {new_id} was not read by group {group} yet (is a consumer running?)"
    return "confirmed", f"the replay {new_id} was delivered to group {group} and acknowledged"


def prior_replays(audit: AuditLog, dlq: str) -> dict[str, dict[str, Any]]:
    """DLQ entry id -> the latest ``replayed`` audit record of an entry of ``dlq``."""
    found: dict[str, dict[str, Any]] = {}
    for record in audit.read(max_bytes=AUDIT_TAIL_BYTES):
        if record.get("event") == "replayed" and record.get("dlq_key") == dlq and record.get("dlq_id"):
            found[str(record["dlq_id"])] = record
    return found
