"""Where a replayed message stands, and which dead letters were replayed before.

:func:`replay_state` tells whether a message added by a replay was processed by the
target group: ``confirmed`` (delivered and acknowledged, not dead-lettered again),
``pending`` (delivered, not acknowledged: being processed or retried), ``undelivered``
(no consumer read it yet), ``dead_lettered`` (it failed again: the DLQ holds an entry
whose ``messageId`` is the replayed id) or ``unknown`` (the DLQ is too long after the replay
to search within the scan bounds: never taken for confirmed). Reads only: XINFO GROUPS,
XPENDING, XRANGE in bounded pages.

:func:`prior_replays` reads the audit log's ``replayed`` records (their own index), so a new plan does not
replay again a dead letter an earlier plan already replayed (it proposes the cleanup only
once that replay is confirmed). :func:`earlier_replay` is the apply-time guard: before a
replay step it looks for that replay already done (audit log or target stream).
"""

from __future__ import annotations

from typing import Any, Literal

from server.approval.audit import AuditLog
from server.config import Settings
from tools.outbox.delivery import scan_dead_letters
from tools.remediation import redis_reads as rr
from tools.remediation.model import XAddOp
from tools.streams.ids import StreamId

ReplayState = Literal["confirmed", "pending", "undelivered", "dead_lettered", "group_missing", "unknown"]


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
    for record in audit.events("replayed"):
        if record.get("dlq_key") == dlq and record.get("dlq_id"):
            found[str(record["dlq_id"])] = record
    return found


CLOCK_MARGIN_MS = 300_000
"""How far before the plan's creation the stream scan starts (clock skew between this host and Redis)."""


async def earlier_replay(
    redis: Any, settings: Settings, audit: AuditLog, plan_id: str, op: XAddOp, proposed_ms: int,
    scanned: dict[str, str] | None = None,
) -> str | None:
    """Why replaying ``op`` now would deliver a message a second time, or None.

    Two independent looks, either one stops the apply (precondition drift):

    - the audit log's ``replayed`` records (their own index, which no flood of other records
      can push out: :meth:`~server.approval.audit.AuditLog.events`) hold one of this plan, or
      of one of these dead letters;
    - ``op.stream`` holds, added since the plan was proposed (from ``proposed_ms`` less
      :data:`CLOCK_MARGIN_MS`, and never before the message's dead letter was written, so a
      retry before the failure does not count), an entry carrying the same original id (the
      ``[conventions] event_id_field``) or the exact same fields. The scan is bounded
      (``[limits]`` max_count x scan_max_iterations); a scan that cannot finish stops the
      apply too, since "not seen" would not be proof.

    ``scanned`` (stream -> last entry id checked) lets a second look in the same apply (the
    step's own re-check after the pre-flight) read only what was added since the first.
    """
    wanted = {(m.dlq_key, m.dlq_id) for m in op.messages}
    for record in audit.events("replayed"):
        if record.get("plan_id") == plan_id or (record.get("dlq_key"), record.get("dlq_id")) in wanted:
            return (f"the audit log records that dead letter {record.get('dlq_id')} was already replayed as "
                    f"{record.get('new_id')} (plan {record.get('plan_id')}, {record.get('time')}): a replay is never "
                    "delivered twice; check whether it was processed, then propose the remediation again")
    id_field = settings.conventions.event_id_field
    by_event: dict[str, tuple[StreamId, str]] = {}
    by_fields: dict[str, tuple[StreamId, str]] = {}
    originals = {m.message_id for m in op.messages}
    for m in op.messages:
        since = StreamId.parse(m.dlq_id)
        event_id = next((v for k, v in m.fields if k == id_field), None)
        if event_id is not None:
            by_event[event_id] = (since, m.dlq_id)
        by_fields[rr.digest([list(p) for p in m.fields])] = (since, m.dlq_id)
    start = max(min(StreamId.parse(m.dlq_id) for m in op.messages), StreamId(max(0, proposed_ms - CLOCK_MARGIN_MS), 0))
    limits = settings.limits
    cursor = str(start)
    if scanned is not None and op.stream in scanned and StreamId.parse(scanned[op.stream]) >= start:
        cursor = "(" + scanned[op.stream]
    for _ in range(limits.scan_max_iterations):
        page = await redis.xrange(op.stream, min=cursor, max="+", count=limits.max_count)
        for raw_id, fields in page:
            entry_id = rr.text(raw_id)
            if entry_id in originals:
                continue
            sid = StreamId.parse(entry_id)
            event_id = rr.text(fields.get(id_field.encode(), b"")) if fields.get(id_field.encode()) else None
            hit = by_event.get(event_id) if event_id is not None else None
            hit = hit or by_fields.get(rr.digest(rr.fields_pairs(fields)))
            if hit is not None and sid > hit[0]:
                return (f"{op.stream} already holds entry {entry_id} carrying the same original id "
                        f"{event_id or '(same fields)'} as dead letter {hit[1]}, added after it was dead-lettered: "
                        "it was replayed (or re-sent) already; a replay is never delivered twice")
        if page and scanned is not None:
            scanned[op.stream] = rr.text(page[-1][0])
        if len(page) < limits.max_count:
            return None
        cursor = "(" + rr.text(page[-1][0])
    return (f"could not check {op.stream} for an earlier replay within [limits] scan_max_iterations x max_count "
            "entries: not replaying (seen nothing is no proof); propose again later or raise the limits")
