"""Where a replayed message stands, and which dead letters were replayed before.

:func:`replay_state` tells whether a message added by a replay was processed by the
target group: ``confirmed`` (delivered and acknowledged, not dead-lettered again),
``pending`` (delivered, not acknowledged: being processed or retried), ``undelivered``
(no consumer read it yet), ``dead_lettered`` (it failed again: the DLQ holds an entry
whose ``messageId`` is the replayed id) or ``unknown`` (the DLQ is too long after the replay
to search within the scan bounds: never taken for confirmed). Reads only: XINFO GROUPS,
XPENDING, XRANGE in bounded pages.

:func:`prior_replays` reads the audit log's ``replayed`` records, so a new plan does not
replay again a dead letter an earlier plan already replayed (it proposes the cleanup only
once that replay is confirmed).
"""

from __future__ import annotations

from typing import Any, Literal

from server.audit import AuditLog
from server.config import Settings
from tools.outbox.delivery import scan_dead_letters
from tools.remediation import redis_reads as rr
from tools.streams.ids import StreamId

ReplayState = Literal["confirmed", "pending", "undelivered", "dead_lettered", "group_missing", "unknown"]
AUDIT_TAIL_BYTES = 8 * 1024 * 1024


async def replay_state(redis: Any, settings: Settings, stream: str, group: str, new_id: str) -> tuple[ReplayState, str]:
    """``(state, explanation)`` of the replayed entry ``new_id`` of ``stream`` in ``group``."""
    conv = settings.conventions
    info = next((g for g in await rr.groups_of(redis, stream) if g["name"] == group), None)
    if info is None:
        return "group_missing", f"group {group} of {stream} no longer exists"
    dead, complete = await scan_dead_letters(redis, conv, settings.limits, stream, [new_id])
    if dead:
        return "dead_lettered", f"the replay {new_id} failed again and was dead-lettered as {dead[0].dlq_entry_id}"
    if not complete:
        return "unknown", (f"the dead-letter stream of {stream} holds too many entries after the replay {new_id} to "
                           "check within [limits] scan_max_iterations x max_count: not confirmed")
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
