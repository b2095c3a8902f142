"""Run one plan step against Redis or PostgreSQL, backing up first.

Each runner returns a :class:`StepOutcome` or raises: :class:`Drift` (the world moved:
the step did not run, or stopped safely part-way, as the detail says),
:class:`~tools.remediation.backups.BackupError`, or
:class:`~server.errors.ServiceUnavailable` (Redis or a database went away). Every
deletion (XDEL, DEL, ZREM, XACK, a BullMQ job leaving ``failed``, a SQL UPDATE) happens
only after its backup was written and read back.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from server.approval.audit import AuditLog
from server.config import Settings
from server.connections import Connections
from server.errors import MeshError
from server.lazy_modules import LazyModule
from server.redis_clients import is_cluster
from tools.remediation import redis_reads as rr
from tools.remediation.backups import BackupFile
from tools.remediation.model import (
    BullRequeueStalledOp,
    BullRetryOp,
    ConfirmOp,
    DelOp,
    ExportOp,
    SqlDeleteOp,
    SqlUpdateOp,
    Step,
    StepResult,
    XAckOp,
    XAddOp,
    XClaimOp,
    XDelOp,
    ZRemOp,
)
from tools.remediation.operations import (
    bull_key,
    bull_requeue_stalled_commands,
    bull_retry_commands,
    sql_bound_params,
    sql_delete_statement,
    sql_select_statement,
    sql_update_statement,
)
from tools.remediation.replays import replay_state
from tools.remediation.slots import slot_groups

redis_exceptions = LazyModule("redis.exceptions")

CONFIRM_POLL_S = 0.25


class Drift(MeshError):
    """The state changed under the step; the detail says what was (not) done."""


@dataclass
class StepOutcome:
    detail: str
    targets: list[str] = field(default_factory=list)
    output: dict[str, Any] = field(default_factory=dict)
    backup_records: int = 0


@dataclass
class RunContext:
    settings: Settings
    connections: Connections
    backups: BackupFile
    results: dict[int, StepResult]
    audit: AuditLog
    approver: str
    replay_log: list[dict[str, str]] = field(default_factory=list)


async def _entry_record(redis: Any, key: str, entry_id: str) -> tuple[str, str, Any]:
    fields = await rr.read_entry(redis, key, entry_id)
    data = {"key": key, "id": entry_id, "fields": None if fields is None else rr.fields_pairs(fields)}
    if fields is None:
        data["missing"] = True
    return ("stream_entry", f"{key} {entry_id}", data)


async def _export(ctx: RunContext, step: Step, op: ExportOp) -> StepOutcome:
    redis = ctx.connections.redis()
    records = [await _entry_record(redis, e.key, e.id) for e in op.entries]
    for p in op.pending:
        records += await _pending_records(redis, p.stream, p.group, [p.id])
    count = ctx.backups.write(step.number, records)
    return StepOutcome(f"saved {count} record(s) to the backup", [r[1] for r in records], backup_records=count)


async def _pending_records(redis: Any, stream: str, group: str, ids: list[str]) -> list[tuple[str, str, Any]]:
    records = []
    for entry_id in ids:
        info = await rr.pending_of(redis, stream, group, entry_id)
        records.append(
            ("pending", f"{stream} {group} {entry_id}", {"stream": stream, "group": group, "id": entry_id,
                                                         "pending": info and info.model_dump()})
        )
    return records


async def _xclaim(ctx: RunContext, step: Step, op: XClaimOp) -> StepOutcome:
    redis = ctx.connections.redis()
    count = ctx.backups.write(step.number, await _pending_records(redis, op.stream, op.group, op.ids))
    claimed = [rr.text(i) for i in await redis.xclaim(op.stream, op.group, op.consumer, op.min_idle_ms, op.ids,
                                                       justid=True)]
    missing = [i for i in op.ids if i not in claimed]
    if missing:
        raise Drift(f"claimed {len(claimed)} of {len(op.ids)} entries to {op.consumer}; not claimable (acknowledged "
                    f"or re-delivered meanwhile): {', '.join(missing)}")
    return StepOutcome(f"claimed {len(claimed)} entr(ies) to consumer {op.consumer}", claimed,
                       {"claimed": claimed}, count)


async def _xack(ctx: RunContext, step: Step, op: XAckOp) -> StepOutcome:
    redis = ctx.connections.redis()
    records = await _pending_records(redis, op.stream, op.group, op.ids)
    records += [await _entry_record(redis, op.stream, i) for i in op.ids]
    count = ctx.backups.write(step.number, records)
    acked = int(await redis.xack(op.stream, op.group, *op.ids))
    if acked != len(op.ids):
        raise Drift(f"acknowledged {acked} of {len(op.ids)} entries (the others were acknowledged meanwhile)")
    return StepOutcome(f"acknowledged {acked} entr(ies) in group {op.group}", op.ids, {"acked": acked}, count)


def _planned_digests(step: Step, kind: str, key_arg: str) -> dict[str, str]:
    """``{key: digest}`` of the step's ``kind`` checks: the exact state the human approved."""
    return {str(c.args[key_arg]): str(c.args["digest"]) for c in step.checks if c.kind == kind and "digest" in c.args}


async def _del(ctx: RunContext, step: Step, op: DelOp) -> StepOutcome:
    """Back up, then DEL the keys in one MULTI/EXEC under WATCH (one per slot on a cluster).

    The snapshots are taken after WATCH: if any key changes between its backup and the
    DEL (a consumer re-took a lock, a retry counter moved), EXEC aborts and nothing of
    that transaction is deleted, so what is deleted is exactly what was backed up. A key
    whose value differs from the approved digest is not deleted either. On a Redis
    Cluster a transaction holds one slot's keys, so the keys are grouped by slot and each
    group gets its own WATCH / backup / read-back / MULTI / EXEC (see
    :mod:`tools.remediation.slots`); a drift stops the step at that slot and says which
    keys earlier slots already deleted.
    """
    redis = ctx.connections.redis()
    planned = _planned_digests(step, "key_unchanged", "key")
    groups = slot_groups(op.keys) if is_cluster(redis) else [list(op.keys)]
    deleted, count, done_keys = 0, 0, []
    for keys in groups:
        done = f" (already deleted, other slots: {', '.join(done_keys)})" if done_keys else ""
        nothing = "nothing of this slot was deleted" if done_keys else "nothing was deleted"
        async with redis.pipeline(transaction=True) as pipe:
            await pipe.watch(*keys)
            records = []
            for key in keys:
                snap = await rr.key_snapshot(pipe, key)
                if snap is not None and key in planned and snap.digest != planned[key]:
                    raise Drift(f"key {key} changed since the plan was approved; {nothing}{done}")
                records.append(("key", key, snap.model_dump() if snap else {"key": key, "missing": True}))
            count += ctx.backups.write(step.number, records)
            pipe.multi()
            pipe.delete(*keys)
            try:
                (removed,) = await pipe.execute()
            except redis_exceptions.WatchError:
                raise Drift(f"a key changed between its backup and the DEL; {nothing}{done}") from None
        deleted += int(removed)
        done_keys += keys
    slots_note = f" in {len(groups)} cluster slot transactions" if len(groups) > 1 else ""
    return StepOutcome(f"deleted {deleted} key(s) ({len(op.keys) - deleted} already gone){slots_note}", op.keys,
                       {"deleted": deleted}, count)


async def _xadd(ctx: RunContext, step: Step, op: XAddOp) -> StepOutcome:
    redis = ctx.connections.redis()
    replayed: list[dict[str, str]] = []
    for message in op.messages:
        new_id = rr.text(await redis.xadd(op.stream, dict(message.fields), id="*", maxlen=op.maxlen,
                                          approximate=True))
        entry = {"dlq_key": message.dlq_key, "dlq_id": message.dlq_id, "message_id": message.message_id,
                 "new_id": new_id, "stream": op.stream}
        replayed.append(entry)
        ctx.replay_log.append(entry)  # known to the caller even if Redis fails on a later message
        ctx.audit.record("replayed", plan_id=ctx.backups.plan_id, plan_sha256=ctx.backups.plan_sha256,
                         approver=ctx.approver, step=step.number, action=step.action, result="done",
                         detail=f"{message.dlq_key} {message.dlq_id} replayed as {new_id}", **entry)
    ids = [r["new_id"] for r in replayed]
    return StepOutcome(f"replayed {len(ids)} message(s) into {op.stream} as {', '.join(ids)}", ids,
                       {"replayed": replayed})


async def _confirm(ctx: RunContext, step: Step, op: ConfirmOp) -> StepOutcome:
    replay = ctx.results.get(op.replay_step)
    new_ids = [r["new_id"] for r in (replay.output.get("replayed", []) if replay else [])]
    if not new_ids:
        raise Drift(f"step {op.replay_step} replayed nothing")
    deadline = time.monotonic() + op.timeout_ms / 1000
    while True:
        redis = ctx.connections.redis()
        states = {i: await replay_state(redis, ctx.settings, op.stream, op.group, i) for i in new_ids}
        failed = [d for s, d in states.values() if s in ("dead_lettered", "group_missing")]
        if failed:
            raise Drift("; ".join(failed) + ": fix the cause before replaying again; the original dead letter was kept")
        waiting = [d for s, d in states.values() if s != "confirmed"]
        if not waiting:
            return StepOutcome(f"{len(new_ids)} replay(s) processed by group {op.group}", new_ids,
                               {"confirmed": True, "ids": new_ids})
        if time.monotonic() >= deadline:
            raise Drift(f"not confirmed within {op.timeout_ms} ms: " + "; ".join(waiting)
                        + ". The dead letters were kept; check again later and propose the cleanup")
        await asyncio.sleep(CONFIRM_POLL_S)


async def _xdel(ctx: RunContext, step: Step, op: XDelOp) -> StepOutcome:
    redis = ctx.connections.redis()
    count = ctx.backups.write(step.number, [await _entry_record(redis, op.key, i) for i in op.ids])
    deleted = int(await redis.xdel(op.key, *op.ids))
    return StepOutcome(f"deleted {deleted} entr(ies) from {op.key}", op.ids, {"deleted": deleted}, count)


async def _zrem(ctx: RunContext, step: Step, op: ZRemOp) -> StepOutcome:
    redis = ctx.connections.redis()
    records = []
    for member in op.members:
        score = await redis.zscore(op.key, member)
        records.append(("zset_member", f"{op.key} {member}", {"key": op.key, "member": member, "score": score}))
    count = ctx.backups.write(step.number, records)
    removed = int(await redis.zrem(op.key, *op.members))
    return StepOutcome(f"removed {removed} member(s) from {op.key}", op.members, {"removed": removed}, count)


async def _sql_update(ctx: RunContext, step: Step, op: SqlUpdateOp) -> StepOutcome:
    conv = ctx.settings.conventions
    if op.table not in conv.tables.model_dump().values():
        raise Drift(f"table {op.table!r} is not one of [conventions.tables]")
    timeout = str(ctx.settings.limits.statement_timeout_ms)
    async with ctx.connections.pg_write(op.service) as conn, conn.transaction():
        await conn.execute("SELECT set_config('statement_timeout', %s, true)", (timeout,))
        records = []
        for row in op.rows:
            cur = await conn.execute(sql_select_statement(op, conv), (row.id,))
            current = await cur.fetchone()
            if current is None:
                raise Drift(f"row {row.id} of {op.table} is gone; nothing was updated (rolled back)")
            records.append(("sql_row", f"{op.service} {op.table} {row.id}",
                            {"service": op.service, "table": op.table, "row": current}))
        count = ctx.backups.write(step.number, records)
        query = sql_update_statement(op, conv)
        for row, params in zip(op.rows, sql_bound_params(op), strict=True):
            cur = await conn.execute(query, params)
            if cur.rowcount != 1:
                raise Drift(f"the guarded UPDATE of row {row.id} matched {cur.rowcount} rows (its status or "
                            "updated_at changed); the whole transaction was rolled back, nothing was updated")
    ids = [r.id for r in op.rows]
    return StepOutcome(f"updated {len(ids)} row(s) of {op.table} to {op.set_status} in one transaction", ids,
                       {"updated": len(ids)}, count)


async def _sql_delete(ctx: RunContext, step: Step, op: SqlDeleteOp) -> StepOutcome:
    """Lock and back up every row (read back from disk), then the guarded DELETEs, all in one transaction."""
    conv = ctx.settings.conventions
    if op.table not in conv.tables.model_dump().values():
        raise Drift(f"table {op.table!r} is not one of [conventions.tables]")
    timeout = str(ctx.settings.limits.statement_timeout_ms)
    async with ctx.connections.pg_write(op.service) as conn, conn.transaction():
        await conn.execute("SELECT set_config('statement_timeout', %s, true)", (timeout,))
        records = []
        for row_id in op.ids:
            cur = await conn.execute(sql_select_statement(op, conv), (row_id,))
            current = await cur.fetchone()
            if current is None:
                raise Drift(f"row {row_id} of {op.table} is gone; nothing was deleted (rolled back)")
            records.append(("sql_row", f"{op.service} {op.table} {row_id}",
                            {"service": op.service, "table": op.table, "row": current}))
        count = ctx.backups.write(step.number, records)
        query = sql_delete_statement(op, conv)
        for row_id in op.ids:
            cur = await conn.execute(query, (row_id, op.expect_status))
            if cur.rowcount != 1:
                raise Drift(f"the guarded DELETE of row {row_id} matched {cur.rowcount} rows (its status changed); "
                            "the whole transaction was rolled back, nothing was deleted")
    return StepOutcome(f"deleted {len(op.ids)} row(s) of {op.table} in one transaction (backed up first)",
                       list(op.ids), {"deleted": len(op.ids)}, count)


async def _bullmq_requeue_stalled(ctx: RunContext, step: Step, op: BullRequeueStalledOp) -> StepOutcome:
    """Per job: WATCH the active list, the job hash and its lock; still active without a lock: back up the
    hash, then MULTI/EXEC the move to wait. Any change before EXEC aborts that job's transaction."""
    redis = ctx.connections.redis()
    total = 0
    done: list[str] = []
    active_key = bull_key(op.prefix, op.queue, "active")
    scan = ctx.settings.limits.bull_list_scan_max
    for job_id in op.job_ids:
        job_key = bull_key(op.prefix, op.queue, job_id)
        lock_key = bull_key(op.prefix, op.queue, f"{job_id}:{op.lock_suffix}")
        async with redis.pipeline(transaction=True) as pipe:
            await pipe.watch(active_key, job_key, lock_key)
            if await pipe.lpos(active_key, job_id, maxlen=scan) is None:
                raise Drift(f"job {job_id} left the active list meanwhile; requeued so far: {done or 'none'}")
            if await pipe.exists(lock_key):
                raise Drift(f"job {job_id} has a lock again (a worker holds it); requeued so far: {done or 'none'}")
            fields = await pipe.hgetall(job_key)
            total += await _back_up_then_exec(ctx, step, pipe, job_key, {
                "queue": op.queue, "job_id": job_id, "hash": {rr.text(k): rr.jsonable(v) for k, v in fields.items()},
                "state": "active"}, bull_requeue_stalled_commands(op, job_id), f"job {job_id}", "requeue", "requeued",
                done)
        done.append(job_id)
    return StepOutcome(f"moved {len(done)} stalled job(s) of {op.queue} from active to {op.target_list}", done,
                       {"requeued": done}, total)


async def _back_up_then_exec(ctx: RunContext, step: Step, pipe: Any, key: str, record: dict[str, Any],
                             commands: list[list[str]], what: str, verb: str, past: str,
                             done: list[str]) -> int:
    """Back up ``record`` (the state read under WATCH), then MULTI/EXEC ``commands``; bytes backed up.

    A change to a watched key before EXEC aborts the transaction: nothing is applied, :class:`Drift` says so."""
    written = ctx.backups.write(step.number, [("bull_job", key, record)])
    pipe.multi()
    for cmd in commands:
        pipe.execute_command(*cmd)
    try:
        await pipe.execute()
    except redis_exceptions.WatchError:
        raise Drift(f"{what} changed during its {verb} (nothing applied to it); "
                    f"{past} so far: {done or 'none'}") from None
    return written


async def _bullmq_retry(ctx: RunContext, step: Step, op: BullRetryOp) -> StepOutcome:
    """Per job: WATCH the failed set and the job hash, read and back up the job, then MULTI/EXEC the retry.

    The job is read after WATCH, so the backup is the state the retry replaces; a job that
    left ``failed`` or differs from the approved digest is not touched, and any change
    before EXEC aborts that job's transaction.
    """
    redis = ctx.connections.redis()
    planned = _planned_digests(step, "bull_job_failed", "job_id")
    total = 0
    done: list[str] = []
    failed_key = bull_key(op.prefix, op.queue, "failed")
    for job_id in op.job_ids:
        job_key = bull_key(op.prefix, op.queue, job_id)
        async with redis.pipeline(transaction=True) as pipe:
            await pipe.watch(failed_key, job_key)
            fields = await pipe.hgetall(job_key)
            score = await pipe.zscore(failed_key, job_id)
            if score is None:
                raise Drift(f"job {job_id} left the failed set meanwhile; retried so far: {done or 'none'}")
            if job_id in planned and rr.hash_digest(fields) != planned[job_id]:
                raise Drift(f"job {job_id} changed since the plan was approved; retried so far: {done or 'none'}")
            total += await _back_up_then_exec(ctx, step, pipe, job_key, {
                "queue": op.queue, "job_id": job_id, "hash": {rr.text(k): rr.jsonable(v) for k, v in fields.items()},
                "failed_score": score}, bull_retry_commands(op, job_id), f"job {job_id}", "retry", "retried", done)
        done.append(job_id)
    return StepOutcome(f"moved {len(done)} job(s) of {op.queue} from failed to {op.target_list}", done,
                       {"retried": done}, total)


_RUNNERS = {
    "export": _export,
    "xclaim": _xclaim,
    "xack": _xack,
    "del": _del,
    "xadd": _xadd,
    "confirm": _confirm,
    "xdel": _xdel,
    "zrem": _zrem,
    "sql_update": _sql_update,
    "bullmq_retry": _bullmq_retry,
    "sql_delete": _sql_delete,
    "bullmq_requeue_stalled": _bullmq_requeue_stalled,
}


async def run_step(ctx: RunContext, step: Step) -> StepOutcome:
    """Run ``step`` (Redis failures surface as ServiceUnavailable via ``redis_errors``)."""
    runner = _RUNNERS[step.operation.op]
    async with ctx.connections.redis_errors():
        return await runner(ctx, step, step.operation)
