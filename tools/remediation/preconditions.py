"""Re-check, at apply time, what a plan assumed about Redis and the databases.

Each :class:`~tools.remediation.model.Check` kind and its ``args``:

- ``entry_unchanged`` {key, id, digest}: the stream entry still exists with the same fields.
- ``pending_owner`` {stream, group, id, consumer|null, min_idle_ms}: the entry is still
  pending in the group (owned by ``consumer`` when given, idle at least ``min_idle_ms``).
- ``consumer_live`` {stream, group, consumer, max_idle_ms}: the consumer exists and read recently.
- ``key_unchanged`` {key, digest, allow_missing}: the key holds the same value (or is gone,
  when that is harmless: deleting a key that expired loses nothing).
- ``zset_member`` {key, member, allow_missing}: the member is still in the sorted set.
- ``row_matches`` {service, table, id, status, updated_at|null}: the SQL row is still in that state.
- ``bull_job_failed`` {prefix, queue, job_id, digest}: the BullMQ job is still failed, unchanged.
- ``bull_job_stalled`` {prefix, queue, job_id, lock_suffix}: the BullMQ job is still in ``active`` and
  its lock key does not exist (the worker that took it died or lost it).
- ``queue_paused`` {prefix, queue, paused}: the queue's paused state is as planned.
- ``bull_job_absent`` {prefix, queue, job_id, lock_suffix, lists, sorted_sets, verdict?}: BullMQ still knows
  nothing of the job: no job hash, no lock key, the id in none of the queue's state lists and sorted sets
  (those the plan looked at). A job "lost with its dead worker" (or, with ``verdict`` "never pushed", a
  row the runner never pushed) that came back or was picked up fails it; ``verdict`` names the plan's
  verdict in the message (default: lost with its dead worker).
- ``key_absent`` {key, what}: the key does not exist (e.g. the worker's completion guard: the job ran).
- ``audit_row_matches`` {service, table, job_id, status, digest}: the job's ``job_audit`` row is still in
  ``status`` with every column unchanged (:mod:`tools.remediation.audit_rows`).
- ``audit_row_absent`` {service, table, job_id}: the job still has no ``job_audit`` row (a worker that
  took the job upserts one before its handler runs).
- ``step_ok`` {step, output_key|null}: an earlier step of this run is done (and its output
  flag is true). Dynamic: only meaningful during the run, skipped by the pre-flight.

:func:`first_drift` returns the first failing check's explanation, or None.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from server.config import Settings
from server.connections import Connections
from server.lazy_modules import LazyModule
from tools.remediation import redis_reads as rr
from tools.remediation.audit_rows import audit_rows_query, row_digest
from tools.remediation.model import Check, StepResult
from tools.remediation.operations import bull_key

sql = LazyModule("psycopg.sql")


@dataclass
class CheckContext:
    settings: Settings
    connections: Connections
    results: dict[int, StepResult] = field(default_factory=dict)


async def _entry_unchanged(ctx: CheckContext, a: dict[str, Any]) -> str | None:
    current = await rr.entry_digest(ctx.connections.redis(), a["key"], a["id"])
    if current is None:
        return f"entry {a['id']} of {a['key']} is gone"
    if current != a["digest"]:
        return f"entry {a['id']} of {a['key']} changed since the plan was made"
    return None


async def _pending_owner(ctx: CheckContext, a: dict[str, Any]) -> str | None:
    info = await rr.pending_of(ctx.connections.redis(), a["stream"], a["group"], a["id"])
    if info is None:
        return f"entry {a['id']} is no longer pending in group {a['group']} of {a['stream']} (acknowledged since?)"
    if a.get("consumer") and info.consumer != a["consumer"]:
        return f"entry {a['id']} is now pending at consumer {info.consumer}, not {a['consumer']}"
    if info.idle_ms < int(a.get("min_idle_ms") or 0):
        return f"entry {a['id']} was delivered again {info.idle_ms} ms ago (someone is processing it)"
    return None


async def _consumer_live(ctx: CheckContext, a: dict[str, Any]) -> str | None:
    for c in await rr.consumers_of(ctx.connections.redis(), a["stream"], a["group"]):
        if c.name == a["consumer"]:
            if c.idle_ms > int(a["max_idle_ms"]):
                return f"consumer {c.name} has been idle {c.idle_ms} ms: it no longer looks alive"
            return None
    return f"consumer {a['consumer']} no longer exists in group {a['group']}"


async def _key_unchanged(ctx: CheckContext, a: dict[str, Any]) -> str | None:
    snap = await rr.key_snapshot(ctx.connections.redis(), a["key"])
    if snap is None:
        return None if a.get("allow_missing") else f"key {a['key']} is gone"
    if snap.digest != a["digest"]:
        return f"key {a['key']} changed since the plan was made"
    return None


async def _zset_member(ctx: CheckContext, a: dict[str, Any]) -> str | None:
    score = await ctx.connections.redis().zscore(a["key"], a["member"])
    if score is None and not a.get("allow_missing"):
        return f"{a['member']} is no longer in {a['key']}"
    return None


async def _row_matches(ctx: CheckContext, a: dict[str, Any]) -> str | None:
    if a["table"] not in ctx.settings.conventions.tables.model_dump().values():
        return f"table {a['table']!r} is not one of [conventions.tables]"
    cols = ctx.settings.conventions.columns
    query = sql.SQL("SELECT {s} AS status, {u} AS updated_at FROM {t} WHERE {i} = %s").format(
        s=sql.Identifier(cols.status), u=sql.Identifier(cols.updated_at), t=sql.Identifier(a["table"]),
        i=sql.Identifier(cols.id),
    )
    result = await ctx.connections.read(a["service"], query, (a["id"],), max_rows=1)
    if not result.rows:
        return f"row {a['id']} of {a['table']} (service {a['service']}) is gone"
    row = result.rows[0]
    if row["status"] != a["status"]:
        return f"row {a['id']} of {a['table']} is now {row['status']}, not {a['status']}"
    seen = row["updated_at"].isoformat() if row["updated_at"] is not None else None
    if a.get("updated_at") is not None and seen != a["updated_at"]:
        return f"row {a['id']} of {a['table']} was updated since the plan was made"
    return None


async def _bull_job_failed(ctx: CheckContext, a: dict[str, Any]) -> str | None:
    redis = ctx.connections.redis()
    prefix, queue, job_id = a["prefix"], a["queue"], a["job_id"]
    if await redis.zscore(bull_key(prefix, queue, "failed"), job_id) is None:
        return f"job {job_id} of queue {queue} is no longer failed (retried or removed since?)"
    fields = await redis.hgetall(bull_key(prefix, queue, job_id))
    if not fields or rr.hash_digest(fields) != a["digest"]:
        return f"job {job_id} of queue {queue} changed since the plan was made"
    return None


async def _bull_job_stalled(ctx: CheckContext, a: dict[str, Any]) -> str | None:
    redis = ctx.connections.redis()
    prefix, queue, job_id = a["prefix"], a["queue"], a["job_id"]
    scan = ctx.settings.limits.bull_list_scan_max
    if await redis.lpos(bull_key(prefix, queue, "active"), job_id, maxlen=scan) is None:
        return f"job {job_id} of queue {queue} is no longer active (a worker's stalled checker moved it, or it ended)"
    if await redis.exists(bull_key(prefix, queue, f"{job_id}:{a['lock_suffix']}")):
        return f"job {job_id} of queue {queue} has a lock again: a worker holds it"
    return None


async def _queue_paused(ctx: CheckContext, a: dict[str, Any]) -> str | None:
    paused = bool(await ctx.connections.redis().hexists(bull_key(a["prefix"], a["queue"], "meta"), "paused"))
    if paused != bool(a["paused"]):
        return f"queue {a['queue']} was {'paused' if paused else 'resumed'} since the plan was made"
    return None


async def _bull_job_absent(ctx: CheckContext, a: dict[str, Any]) -> str | None:
    redis = ctx.connections.redis()
    prefix, queue, job_id = a["prefix"], a["queue"], a["job_id"]
    seen = f"job {job_id} of queue {queue}, planned as {a.get('verdict', 'lost with its dead worker')},"
    key = bull_key(prefix, queue, job_id)
    if await redis.exists(key):
        return f"{seen} is back in BullMQ: its job hash {key} exists again"
    lock = bull_key(prefix, queue, f"{job_id}:{a['lock_suffix']}")
    if await redis.exists(lock):
        return f"{seen} has a lock again ({lock}): a worker holds it"
    for name in a["sorted_sets"]:
        if await redis.zscore(bull_key(prefix, queue, name), job_id) is not None:
            return f"{seen} is in BullMQ's {name} set again ({bull_key(prefix, queue, name)})"
    scan = ctx.settings.limits.bull_list_scan_max
    for name in a["lists"]:
        listed = bull_key(prefix, queue, name)
        if (await redis.lpos(listed, job_id, maxlen=scan) is not None
                or await redis.lpos(listed, job_id, rank=-1, maxlen=scan) is not None):
            return f"{seen} is in BullMQ's {name} list again ({listed})"
    return None


async def _key_absent(ctx: CheckContext, a: dict[str, Any]) -> str | None:
    if await ctx.connections.redis().exists(a["key"]):
        return f"{a['key']} exists now ({a['what']})"
    return None


async def _audit_rows(ctx: CheckContext, a: dict[str, Any]) -> tuple[list[dict[str, Any]], str | None]:
    """The job_audit rows of ``a["job_id"]`` (at most one), or the reason the check cannot read them."""
    conv = ctx.settings.conventions
    if a["table"] != conv.tables.job_audit:
        return [], f"table {a['table']!r} is not [conventions.tables] job_audit ({conv.tables.job_audit!r})"
    result = await ctx.connections.read(a["service"], audit_rows_query(conv, with_age=False), ([a["job_id"]],),
                                        max_rows=1)
    return result.rows, None


async def _audit_row_matches(ctx: CheckContext, a: dict[str, Any]) -> str | None:
    conv = ctx.settings.conventions
    rows, refused = await _audit_rows(ctx, a)
    if refused:
        return refused
    job_id, table = a["job_id"], a["table"]
    if not rows:
        return f"the {table} row of job {job_id} (service {a['service']}) is gone"
    row = rows[0]
    status = row.get(conv.columns.status)
    if status != a["status"]:
        return f"the {table} row of job {job_id} is now {status}, not {a['status']}: a worker took or finished the job"
    if row_digest(row) != a["digest"]:
        return (f"the {table} row of job {job_id} changed since the plan was made (a worker took the job again: "
                "worker, attempt or start time differ)")
    return None


async def _audit_row_absent(ctx: CheckContext, a: dict[str, Any]) -> str | None:
    rows, refused = await _audit_rows(ctx, a)
    if refused:
        return refused
    if rows:
        status = rows[0].get(ctx.settings.conventions.columns.status)
        return f"job {a['job_id']} has a {a['table']} row now ({status}): it was pushed and a worker took it"
    return None


def _step_ok(ctx: CheckContext, a: dict[str, Any]) -> str | None:
    result = ctx.results.get(int(a["step"]))
    if result is None or result.status != "done":
        return f"step {a['step']} did not complete"
    key = a.get("output_key")
    if key and not result.output.get(key):
        return f"step {a['step']} did not confirm ({key} is false)"
    return None


_ASYNC = {
    "entry_unchanged": _entry_unchanged,
    "pending_owner": _pending_owner,
    "consumer_live": _consumer_live,
    "key_unchanged": _key_unchanged,
    "zset_member": _zset_member,
    "row_matches": _row_matches,
    "bull_job_failed": _bull_job_failed,
    "bull_job_stalled": _bull_job_stalled,
    "queue_paused": _queue_paused,
    "bull_job_absent": _bull_job_absent,
    "key_absent": _key_absent,
    "audit_row_matches": _audit_row_matches,
    "audit_row_absent": _audit_row_absent,
}


async def evaluate(check: Check, ctx: CheckContext, *, dynamic: bool) -> str | None:
    """None when the check holds; else what drifted. ``dynamic=False`` skips run-time-only checks."""
    if check.kind == "step_ok":
        return _step_ok(ctx, check.args) if dynamic else None
    return await _ASYNC[check.kind](ctx, check.args)


async def first_drift(checks: Sequence[Check], ctx: CheckContext, *, dynamic: bool) -> str | None:
    for check in checks:
        problem = await evaluate(check, ctx, dynamic=dynamic)
        if problem is not None:
            return problem
    return None
