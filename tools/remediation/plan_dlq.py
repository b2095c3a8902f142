"""Plan for dead letters (runbook steps 1, 4, 5): ``dlq_replay``.

Export the dead letters, replay each with XADD of its original fields (the exact entry
when it is still in the source stream, else rebuilt from the dead letter: id, type,
envelope fields and event JSON), wait until the target group processed every replay,
only then XDEL them from the DLQ, delete the retry keys and the idempotency lock, ZREM the
retry queue, and reconcile the event_queue rows that are FAILED (guarded UPDATE).

A dead letter an earlier plan already replayed (audit log) is not replayed again: once
that replay is confirmed, only its cleanup is planned.
"""

from __future__ import annotations

import json
from typing import Any

from server.approval.audit import audit_log
from server.config import Conventions
from server.connections import Connections
from tools.remediation import redis_reads as rr
from tools.remediation.model import (
    Check,
    ConfirmOp,
    DelOp,
    EntryRef,
    ExportOp,
    ReplayMessage,
    XAddOp,
    XDelOp,
    ZRemOp,
)
from tools.remediation.plan_base import STREAM_ID_RE, PlanBuilder, Request, check
from tools.remediation.plan_outbox import add_event_reconcile
from tools.remediation.plan_streams import pick_group, resolve_stream
from tools.remediation.replays import prior_replays, replay_state
from tools.streams.dlq import DeadLetter, parse_dlq_entry
from tools.streams.keys import (
    dlq_key,
    idempotency_key,
    retry_attempt_key,
    retry_key,
    retry_last_error_key,
    retry_queue_key,
)


def _event_of(conv: Conventions, dead: DeadLetter) -> tuple[dict[str, Any] | None, Any]:
    """``(event, event_text)``: the event JSON a dead letter's payload (the ParseResult) holds."""
    doc = dead.payload if isinstance(dead.payload, dict) else None
    event_text = doc.get(conv.dlq_event_key) if doc else None
    try:
        event = json.loads(event_text) if isinstance(event_text, str) else None
    except ValueError:
        event = None
    return (event if isinstance(event, dict) else None), event_text


def _emitter(conv: Conventions, dead: DeadLetter) -> str | None:
    """The service that emitted a dead letter's event: the event JSON's ``emitter`` (the ParseResult
    itself has none), else a top-level one."""
    event, _ = _event_of(conv, dead)
    doc = dead.payload if isinstance(dead.payload, dict) else {}
    value = (event or {}).get("emitter") or doc.get("emitter")
    return value if isinstance(value, str) and value else None


def _rebuild_fields(conv: Conventions, dead: DeadLetter) -> tuple[list[tuple[str, str]] | None, str]:
    """Stream fields rebuilt from a dead letter's payload (the post-processor's ParseResult)."""
    doc = dead.payload if isinstance(dead.payload, dict) else None
    event, event_text = _event_of(conv, dead)
    if event is None:
        return None, "the dead letter does not hold the event JSON (it did not parse when it failed)"
    out: list[tuple[str, str]] = []
    for name in (conv.event_id_field, conv.event_type_field):
        value = doc.get(name) if doc and doc.get(name) is not None else event.get(name)
        if value is not None:
            out.append((name, str(value)))
    for name in conv.stream_envelope_fields:
        value = event.get(name)
        if value is not None and name not in (conv.event_id_field, conv.event_type_field):
            out.append((name, value if isinstance(value, str) else json.dumps(value, separators=(",", ":"),
                                                                            ensure_ascii=False)))
    out.append((conv.event_body_field, event_text))  # type: ignore[arg-type]
    return out, ""


async def _replay_fields(
    redis: Any, conv: Conventions, stream: str, dead: DeadLetter
) -> tuple[list[tuple[str, str]] | None, str, str]:
    """``(fields, source, problem)``: the original entry's exact fields, else rebuilt ones."""
    original = await rr.read_entry(redis, stream, dead.message_id or "")
    if original is not None:
        pairs = rr.fields_pairs(original)
        if all(isinstance(k, str) and isinstance(v, str) for k, v in pairs):
            return [(k, v) for k, v in pairs], "stream", ""
        return None, "", "its original entry holds non-UTF-8 bytes, which a JSON plan cannot carry"
    fields, problem = _rebuild_fields(conv, dead)
    if fields is None:
        return None, "", f"its original entry was trimmed from {stream} and {problem}"
    return fields, "dlq_payload", ""


async def _dlq_entries(b: PlanBuilder, redis: Any, dlq: str, ids: list[str] | None) -> list[tuple[str, dict]]:
    limits = b.settings.limits
    cap = limits.max_plan_messages
    if ids is None:
        total = int(await redis.xlen(dlq))
        rows = await redis.xrange(dlq, "-", "+", count=cap)
        b.candidates_found, b.truncated = total, total > cap
        return [(rr.text(i), f) for i, f in rows]
    found: list[tuple[str, dict]] = []
    wanted: set[str] = set()
    for entry_id in ids:
        fields = await rr.read_entry(redis, dlq, entry_id)
        if fields is not None:
            found.append((entry_id, fields))
        else:
            wanted.add(entry_id)  # maybe a messageId rather than a DLQ entry id
    field = b.settings.conventions.dlq_message_id_field.encode()
    start = "-"
    for _ in range(limits.scan_max_iterations):
        if not wanted:
            break
        page = await redis.xrange(dlq, start, "+", count=limits.max_count)
        for raw_id, fields in page:
            message_id = rr.text(fields.get(field, b""))
            if message_id in wanted:
                wanted.discard(message_id)
                found.append((rr.text(raw_id), fields))
        if len(page) < limits.max_count:
            break
        last = rr.text(page[-1][0]).split("-")
        start = f"{last[0]}-{int(last[1]) + 1}"
    b.warnings.extend(f"{i} is neither an entry id nor a messageId of {dlq}" for i in sorted(wanted))
    b.candidates_found = len(found)
    return found


async def build_dlq_replay(b: PlanBuilder, connections: Connections, req: Request) -> None:
    settings, conv = b.settings, b.settings.conventions
    redis = connections.redis()
    stream = await resolve_stream(redis, conv, req.stream or "")
    groups = await rr.groups_of(redis, stream)
    group = pick_group(groups, req.group, stream)
    dlq = dlq_key(conv, stream)
    entries = await _dlq_entries(b, redis, dlq, req.ids)
    b.nothing_to_do = f"no dead letter to replay in {dlq}"
    prior = prior_replays(audit_log(settings), dlq)
    kept: list[tuple[str, str, str, DeadLetter]] = []
    replays: list[ReplayMessage] = []
    originals: list[str] = []
    for dlq_id, fields in entries:
        dead = parse_dlq_entry(fields, dlq_stream=dlq, dlq_id=dlq_id, conventions=conv, max_bytes=None)
        message_id = dead.message_id or ""
        if not STREAM_ID_RE.match(message_id):
            b.warnings.append(f"dead letter {dlq_id} has no usable {conv.dlq_message_id_field}: skipped")
            continue
        previous = prior.get(dlq_id)
        if previous is not None:
            state, why = await replay_state(redis, settings, stream, group, str(previous.get("new_id")))
            if state != "confirmed":
                b.warnings.append(f"dead letter {dlq_id} was already replayed by plan {previous.get('plan_id')} "
                                  f"as {previous.get('new_id')}: {why}; it is not replayed again")
                continue
            b.notes.append(f"dead letter {dlq_id} was replayed as {previous.get('new_id')} by plan "
                           f"{previous.get('plan_id')} and processed: only its cleanup is planned")
        else:
            replay, source, problem = await _replay_fields(redis, conv, stream, dead)
            if replay is None:
                b.warnings.append(f"dead letter {dlq_id} cannot be replayed: {problem}")
                continue
            if source == "stream":
                originals.append(message_id)
            else:
                b.notes.append(f"dead letter {dlq_id}: the original was trimmed; the replay is rebuilt from the "
                               "dead letter's event JSON (id, type, envelope fields and event)")
            replays.append(ReplayMessage(dlq_key=dlq, dlq_id=dlq_id, message_id=message_id, source=source,
                                         fields=replay))  # type: ignore[arg-type]
        kept.append((dlq_id, message_id, rr.digest(rr.fields_pairs(fields)), dead))
    if not kept:
        return
    unchanged = [check("entry_unchanged", key=dlq, id=d, digest=h) for d, _, h, _ in kept]
    b.add(
        action="export",
        description=f"save {len(kept)} dead letter(s) of {dlq} and {len(originals)} original(s) to the backup file",
        operation=ExportOp(entries=[EntryRef(key=dlq, id=d) for d, _, _, _ in kept]
                           + [EntryRef(key=stream, id=m) for m in originals]),
        target=dlq, precondition="each dead letter is still in the DLQ, unchanged", checks=unchanged,
        backup="the dead letters and the original entries, exact fields", reversible=True,
    )
    confirm_checks: list[Check] = []
    export_step = len(b.steps)
    if replays:
        replayed = {m.dlq_id for m in replays}
        replay_step = b.add(
            action="replay",
            description=f"XADD {len(replays)} message(s) back into {stream} with their original fields",
            operation=XAddOp(stream=stream, maxlen=conv.stream_maxlen, messages=replays), target=stream,
            precondition="the dead letters are unchanged, and the cause of the failure was fixed (runbook step 3)",
            checks=[c for c in unchanged if c.args["id"] in replayed]
            + [check("step_ok", step=export_step, output_key=None)],
            backup=None, reversible=False,
        )
        confirm_step = b.add(
            action="confirm_replay",
            description=f"wait until group {group} has processed every replay (acknowledged, not dead-lettered)",
            operation=ConfirmOp(stream=stream, group=group, replay_step=replay_step,
                                timeout_ms=settings.limits.replay_confirm_timeout_ms),
            target=f"{stream} group {group}", precondition=f"step {replay_step} added the replays",
            checks=[check("step_ok", step=replay_step, output_key=None)], backup=None, reversible=True,
        )
        confirm_checks = [check("step_ok", step=confirm_step, output_key="confirmed")]
        b.groups_reached.update(g["name"] for g in groups)
        if len(groups) > 1:
            b.warnings.append(f"a replay is delivered to every group of {stream} "
                              f"({', '.join(g['name'] for g in groups)}), not only {group}: their consumers must "
                              "tolerate a second delivery (idempotence, runbook golden rule 2)")
    b.add(
        action="xdel_dlq", description=f"delete the {len(kept)} handled dead letter(s) from {dlq}",
        operation=XDelOp(key=dlq, ids=[d for d, _, _, _ in kept]), target=dlq,
        precondition="the replays were processed (previous step) and the dead letters are unchanged",
        checks=unchanged + confirm_checks, backup="each dead letter's exact fields, read back before the XDEL",
        reversible=False,
    )
    await _add_retry_cleanup(b, redis, group, [m for _, m, _, _ in kept], confirm_checks)
    event_ids = [d.event_id for _, _, _, d in kept if d.event_id]
    emitters = {e for e in (_emitter(conv, d) for _, _, _, d in kept) if e}
    await add_event_reconcile(b, connections, req.service, event_ids, emitters, confirm_checks)
    b.messages = len(kept)
    b.streams.update({stream, dlq})
    b.summary = (f"replay {len(replays)} dead letter(s) of {dlq} into {stream} for group {group}, then clean up "
                 f"{len(kept)} dead letter(s) and their retry bookkeeping")
    b.notes.append("runbook step 3: approve only once the cause of the failure is fixed; an unfixed replay fails "
                   "again, the confirm step then stops the plan and the dead letter is kept")
    b.notes.append("runbook step 6: record the lesson once the incident is closed")


async def _add_retry_cleanup(b: PlanBuilder, redis: Any, group: str, message_ids: list[str],
                             extra: list[Check]) -> None:
    conv = b.settings.conventions
    keys: list[str] = []
    checks: list[Check] = []
    for message_id in message_ids:
        for key in (retry_key(conv, group, message_id), retry_attempt_key(conv, group, message_id),
                    retry_last_error_key(conv, group, message_id), idempotency_key(conv, group, message_id)):
            snap = await rr.key_snapshot(redis, key)
            if snap is not None:
                keys.append(key)
                checks.append(check("key_unchanged", key=key, digest=snap.digest, allow_missing=True))
    if keys:
        b.add(action="delete_retry_keys", description=f"delete {len(keys)} retry/idempotency key(s) of group {group}",
              operation=DelOp(keys=keys), target=", ".join(keys), precondition="each key unchanged (or expired)",
              checks=checks + extra, backup="type, value, TTL and DUMP of each key (RESTORE-able)", reversible=True)
    queue = retry_queue_key(conv, group)
    members = [m for m in message_ids if await redis.zscore(queue, m) is not None]
    if members:
        b.add(action="zrem_retry_queue", description=f"remove {len(members)} message(s) from {queue}",
              operation=ZRemOp(key=queue, members=members), target=queue, precondition="still scheduled (or gone)",
              checks=[check("zset_member", key=queue, member=m, allow_missing=True) for m in members] + extra,
              backup="each member with its score", reversible=True)
    b.keys += len(keys) + len(members)
