"""Remediation on a Redis Cluster: which slots each step touches, and what that means.

On a cluster a WATCH/MULTI/EXEC transaction can only hold keys of one slot. Plans keep
every guarantee per slot:

- a ``del`` step (locks, retry keys) whose keys span several slots is run slot by slot:
  each slot's keys are WATCHed, snapshotted, backed up and read back, then deleted in
  that slot's own MULTI/EXEC; a change in one slot aborts that slot's transaction and
  stops the step (slots before it stay done, the report says which keys were deleted);
- a BullMQ retry moves one job between keys of its queue (failed set, job hash, wait
  list, marker, events stream) in one transaction: those keys must share a slot, which
  BullMQ itself needs on a cluster (a hash-tagged prefix such as ``{bull}``). When they
  do not, the plan is refused with the reason and the setting to change;
- every other step is a single-key command (XCLAIM, XACK, XADD, XDEL, ZREM) or a read.

The plan's notes say when its steps touch keys in different slots: there is no
transaction across steps (nor on a single Redis); each step stands on its own
preconditions, checked again right before it runs.
"""

from __future__ import annotations

from typing import Any

from server.errors import RemediationRefused
from server.lazy_modules import LazyModule
from tools.remediation.model import (
    BullRetryOp,
    ConfirmOp,
    DelOp,
    ExportOp,
    Step,
    XAckOp,
    XAddOp,
    XClaimOp,
    XDelOp,
    ZRemOp,
)
from tools.remediation.operations import bull_key, bull_retry_commands

redis_crc = LazyModule("redis.crc")


def slot_of(key: str) -> int:
    return int(redis_crc.key_slot(key.encode()))


def slot_groups(keys: list[str]) -> list[list[str]]:
    """``keys`` grouped by cluster slot, in the order their slots first appear."""
    groups: dict[int, list[str]] = {}
    for key in keys:
        groups.setdefault(slot_of(key), []).append(key)
    return list(groups.values())


def step_keys(step: Step) -> list[str]:
    """The Redis keys ``step`` reads or writes (none for SQL steps)."""
    op: Any = step.operation
    if isinstance(op, ExportOp):
        return [e.key for e in op.entries] + [p.stream for p in op.pending]
    if isinstance(op, XClaimOp | XAckOp | XAddOp | ConfirmOp):
        return [op.stream]
    if isinstance(op, DelOp):
        return list(op.keys)
    if isinstance(op, XDelOp | ZRemOp):
        return [op.key]
    if isinstance(op, BullRetryOp):
        return sorted({cmd[1] for job in op.job_ids for cmd in bull_retry_commands(op, job)}
                      | {bull_key(op.prefix, op.queue, job) for job in op.job_ids})
    return []


def bull_job_slots(op: BullRetryOp, job_id: str) -> set[int]:
    keys = {cmd[1] for cmd in bull_retry_commands(op, job_id)} | {bull_key(op.prefix, op.queue, job_id)}
    return {slot_of(k) for k in keys}


def review(steps: list[Step], notes: list[str]) -> None:
    """Append the cluster notes of a plan to ``notes``; refuse a transaction that spans slots."""
    per_step: list[tuple[Step, set[int]]] = []
    for step in steps:
        keys = step_keys(step)
        if not keys:
            continue
        op: Any = step.operation
        if isinstance(op, BullRetryOp):
            for job_id in op.job_ids:
                if len(bull_job_slots(op, job_id)) > 1:
                    raise RemediationRefused(
                        f"refused on a Redis Cluster: the keys of BullMQ queue '{op.queue}' under prefix "
                        f"'{op.prefix}' are in different slots, so job {job_id} cannot be retried in one "
                        "WATCH/MULTI transaction (BullMQ itself needs them in one slot on a cluster). Use a "
                        "hash-tagged prefix, e.g. [conventions] bullmq_prefix = \"{bull}\", as the BullMQ "
                        "workers do"
                    )
        slots = {slot_of(k) for k in keys}
        per_step.append((step, slots))
        if isinstance(op, DelOp) and len(slots) > 1:
            notes.append(
                f"Redis Cluster: step {step.number} ({step.action}) deletes {len(op.keys)} key(s) in "
                f"{len(slots)} slots; it runs slot by slot, each slot's keys backed up, read back and deleted "
                "in its own WATCH/MULTI transaction. A key that changes stops the step at its slot: slots "
                "before it stay done and the report names the keys deleted"
            )
    every = set().union(*(s for _, s in per_step)) if per_step else set()
    if len(every) > 1:
        listed = "; ".join(f"step {s.number}: slot(s) {', '.join(str(x) for x in sorted(slots))}"
                           for s, slots in per_step)
        notes.append(
            f"Redis Cluster: the steps touch keys in {len(every)} different slots ({listed}). No transaction "
            "spans steps: each step re-checks its own preconditions right before it runs, and the first drift "
            "stops the plan"
        )
