"""Plans for pending entries of Redis Streams consumer groups: dead consumers, stale locks.

Also the helpers every stream plan shares (:func:`resolve_stream`, :func:`pick_group`);
``dlq_replay`` lives in :mod:`tools.remediation.plan_dlq`.

``claim_dead_consumer`` (step 2): entries pending at consumers idle longer than
``[limits] dead_consumer_idle_ms`` are exported, their stale idempotency locks deleted,
then XCLAIMed (min-idle, JUSTID) to the most recently active live consumer; entries whose
message was trimmed from the stream are XACKed instead (nothing left to process).

``clear_stale_lock`` (step 2, pitfall): a lock held by a message still pending longer than
``claim_interval_ms`` makes the next re-read look "already processed"; delete it, and
claim the entry to a live consumer when its owner is dead.
"""

from __future__ import annotations

from typing import Any

from server.config import Conventions
from server.connections import Connections
from server.errors import InvalidArgument, NotFound
from tools.remediation import redis_reads as rr
from tools.remediation.model import (
    Check,
    DelOp,
    EntryRef,
    ExportOp,
    PendingRef,
    XAckOp,
    XClaimOp,
)
from tools.remediation.plan_base import PlanBuilder, Request, check
from tools.streams.keys import (
    idempotency_key,
    is_dlq,
    source_of_dlq,
)


async def resolve_stream(redis: Any, conv: Conventions, name: str) -> str:
    """The stream key meant by ``name``: itself, its source when it is a DLQ key, or prefixed."""
    candidates = [source_of_dlq(conv, name)] if is_dlq(conv, name) else [name]
    if not candidates[0].startswith(conv.stream_prefix):
        candidates.append(conv.stream_prefix + candidates[0])
    for key in candidates:
        if rr.text(await redis.type(key)) == "stream":
            return key
    raise NotFound(f"no stream {name!r} (tried {', '.join(candidates)}): list_streams shows the streams")


def pick_group(groups: list[dict[str, Any]], group: str | None, stream: str) -> str:
    names = [g["name"] for g in groups]
    if not names:
        raise NotFound(f"stream {stream} has no consumer group: nothing would process a replay or a claim")
    if group is not None:
        if group not in names:
            raise NotFound(f"group {group!r} is not a group of {stream}; its groups: {', '.join(names)}")
        return group
    if len(names) == 1:
        return names[0]
    raise InvalidArgument(f"stream {stream} has several consumer groups ({', '.join(names)}): pass group")


async def _pending_targets(b: PlanBuilder, redis: Any, stream: str, group: str, ids: list[str] | None,
                           owners: list[str] | None) -> list[rr.PendingInfo]:
    limits = b.settings.limits
    cap = limits.max_plan_messages
    if ids is not None:
        found = []
        for entry_id in ids:
            info = await rr.pending_of(redis, stream, group, entry_id)
            if info is None:
                b.warnings.append(f"{entry_id} is not pending in group {group}")
            elif owners is not None and info.consumer not in owners:
                b.warnings.append(f"{entry_id} is pending at {info.consumer}, which is not a dead consumer: skipped")
            else:
                found.append(info)
        b.candidates_found = len(found)
        return found
    out: list[rr.PendingInfo] = []
    for owner in owners if owners is not None else [None]:
        # pages of [limits] max_count until cap + 1 entries (enough to know the plan is cut) or the end
        got: list[rr.PendingInfo] = []
        while len(got) <= cap:
            want = min(limits.max_count, cap + 1 - len(got))
            page = await rr.pending_range(redis, stream, group, count=want, consumer=owner,
                                          after=got[-1].id if got else None)
            got += page
            if len(page) < want:
                break
        out += got
    b.candidates_found = len(out)
    b.truncated = len(out) > cap
    return out[:cap]


async def _claim_steps(b: PlanBuilder, redis: Any, stream: str, group: str, entries: list[rr.PendingInfo],
                       live: rr.ConsumerInfo | None, lock_checks: dict[str, Check], min_idle: int,
                       claimable: set[str], ack_trimmed: bool) -> None:
    """Export, delete locks, XCLAIM ``claimable`` entries to ``live`` (XACK the trimmed ones when
    ``ack_trimmed``): the shared tail of the two pending-entries plans."""
    conv = b.settings.conventions
    owner_checks = [check("pending_owner", stream=stream, group=group, id=p.id, consumer=p.consumer,
                           min_idle_ms=min_idle) for p in entries]
    present = [p for p in entries if await rr.read_entry(redis, stream, p.id) is not None]
    trimmed = [p for p in entries if p not in present] if ack_trimmed else []
    b.add(action="export", description=f"save {len(entries)} pending entr(ies) of group {group} and their messages",
          operation=ExportOp(entries=[EntryRef(key=stream, id=p.id) for p in present],
                             pending=[PendingRef(stream=stream, group=group, id=p.id) for p in entries]),
          target=f"{stream} group {group}", precondition="each entry still pending at the same consumer",
          checks=owner_checks, backup="the pending entries (owner, idle, deliveries) and message fields",
          reversible=True)
    if lock_checks:
        keys = list(lock_checks)
        b.add(action="delete_stale_locks",
              description=f"delete {len(keys)} stale idempotency lock(s) so the re-read is not skipped as done",
              operation=DelOp(keys=keys), target=", ".join(keys),
              precondition="each lock unchanged and its message still pending at the same consumer",
              checks=list(lock_checks.values()) + owner_checks, backup="value and TTL of each lock (RESTORE-able)",
              reversible=True)
        b.keys += len(keys)
    claim = [p for p in present if live is not None and p.id in claimable and p.consumer != live.name]
    if claim and live is not None:
        b.add(action="xclaim", description=f"claim {len(claim)} entr(ies) to live consumer {live.name}",
              operation=XClaimOp(stream=stream, group=group, consumer=live.name, min_idle_ms=min_idle,
                                 ids=[p.id for p in claim]),
              target=f"{stream} group {group}", precondition=f"still pending at their owner and idle >= {min_idle} "
              f"ms; {live.name} still alive",
              checks=[c for c in owner_checks if c.args["id"] in {p.id for p in claim}]
              + [check("consumer_live", stream=stream, group=group, consumer=live.name,
                        max_idle_ms=b.settings.limits.dead_consumer_idle_ms)],
              backup="the pending entries (owner, idle, deliveries)", reversible=True)
        b.notes.append(f"{live.name} re-reads its pending list on start, after a claim or from the retry queue "
                       f"(claim_interval_ms {conv.claim_interval_ms}): restart it if the entries do not move")
    if trimmed:
        b.add(action="xack", description=f"acknowledge {len(trimmed)} entr(ies) whose message was trimmed",
              operation=XAckOp(stream=stream, group=group, ids=[p.id for p in trimmed]),
              target=f"{stream} group {group}", precondition="still pending (nothing left to process: trimmed)",
              checks=[c for c in owner_checks if c.args["id"] in {p.id for p in trimmed}],
              backup="the pending entries", reversible=False)
    b.messages = len(claim) + len(trimmed)
    b.streams.add(stream)


async def _stale_lock_checks(b: PlanBuilder, redis: Any, group: str, entries: list[rr.PendingInfo]) -> dict[str, Check]:
    conv = b.settings.conventions
    out: dict[str, Check] = {}
    for p in entries:
        key = idempotency_key(conv, group, p.id)
        snap = await rr.key_snapshot(redis, key)
        if snap is not None:
            out[key] = check("key_unchanged", key=key, digest=snap.digest, allow_missing=True)
    return out


async def build_claim_dead_consumer(b: PlanBuilder, connections: Connections, req: Request) -> None:
    redis = connections.redis()
    threshold = b.settings.limits.dead_consumer_idle_ms
    stream = await resolve_stream(redis, b.settings.conventions, req.stream or "")
    group = pick_group(await rr.groups_of(redis, stream), req.group, stream)
    consumers = await rr.consumers_of(redis, stream, group)
    dead = [c for c in consumers if c.idle_ms >= threshold and c.pending > 0]
    live = sorted((c for c in consumers if c.idle_ms < threshold), key=lambda c: c.idle_ms)
    b.nothing_to_do = f"no consumer of group {group} idle more than {threshold} ms holds pending entries"
    if not dead:
        return
    if not live:
        b.nothing_to_do = (f"every consumer of group {group} is idle more than {threshold} ms: there is no live "
                           "consumer to claim to; start one (it claims idle entries itself), then re-propose")
        return
    entries = await _pending_targets(b, redis, stream, group, req.ids, [c.name for c in dead])
    entries = [p for p in entries if p.idle_ms >= threshold]
    if not entries:
        return
    locks = await _stale_lock_checks(b, redis, group, entries)
    await _claim_steps(b, redis, stream, group, entries, live[0], locks, threshold,
                       claimable={p.id for p in entries}, ack_trimmed=True)
    b.summary = (f"move {len(entries)} entr(ies) of group {group} from dead consumer(s) "
                 f"{', '.join(c.name for c in dead)} to {live[0].name}")


async def build_clear_stale_lock(b: PlanBuilder, connections: Connections, req: Request) -> None:
    redis = connections.redis()
    conv, limits = b.settings.conventions, b.settings.limits
    stream = await resolve_stream(redis, conv, req.stream or "")
    group = pick_group(await rr.groups_of(redis, stream), req.group, stream)
    b.nothing_to_do = f"no stale idempotency lock on a pending entry of group {group}"
    entries = []
    for p in await _pending_targets(b, redis, stream, group, req.ids, None):
        if p.idle_ms < conv.claim_interval_ms:
            if req.ids is not None:
                b.warnings.append(f"{p.id} was delivered {p.idle_ms} ms ago: it may be processing now; skipped")
            continue
        entries.append(p)
    locks = await _stale_lock_checks(b, redis, group, entries)
    entries = [p for p in entries if idempotency_key(conv, group, p.id) in locks]
    b.candidates_found = len(entries)
    if not entries:
        return
    consumers = await rr.consumers_of(redis, stream, group)
    live = sorted((c for c in consumers if c.idle_ms < limits.dead_consumer_idle_ms), key=lambda c: c.idle_ms)
    dead_names = {c.name for c in consumers if c.idle_ms >= limits.dead_consumer_idle_ms}
    to_claim = [p for p in entries if p.consumer in dead_names]
    await _claim_steps(b, redis, stream, group, entries, live[0] if live else None, locks,
                       conv.claim_interval_ms, claimable={p.id for p in to_claim}, ack_trimmed=False)
    owners = sorted({p.consumer for p in entries if p.consumer not in dead_names})
    if owners:
        b.notes.append(f"live owner(s) {', '.join(owners)} re-read their pending entries on start: restart them "
                       "after this plan so the messages are processed (runbook: delete the lock, then restart)")
    if to_claim and not live:
        b.warnings.append("the entries of dead consumers stay where they are: no live consumer to claim them to")
    b.summary = f"delete {len(locks)} stale idempotency lock(s) of group {group} on {stream}"
