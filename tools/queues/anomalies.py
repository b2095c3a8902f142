"""Anomalies of ``inspect_queue``: jobs BullMQ itself will not move on.

- ``stalled`` (error): jobs in ``active`` whose lock ``<prefix>:<queue>:<jobId>:lock`` is
  gone: their worker died or lost the lock. BullMQ's stalled checker moves them back to
  wait only while some worker of the queue runs; the anomaly says whether one does
  (:mod:`tools.outbox.bull_liveness`). At most ``[limits] max_count`` active jobs are examined.
- ``delayed_overdue`` (error): delayed jobs past their due time by more than
  ``[limits] delayed_overdue_ms``: no worker promotes them (workers move due delayed
  jobs to wait). A delayed job not yet due is scheduled, never an anomaly.

Read commands only (LRANGE, EXISTS, ZRANGE, PTTL, CLIENT LIST).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from server.config import Settings
from tools.outbox.bull_liveness import QueueLiveness, active_without_lock, queue_liveness
from tools.streams.keys import bull_key
from tools.streams.values import text


class QueueAnomaly(BaseModel):
    code: str = Field(description="stalled | delayed_overdue")
    severity: str = "error"
    job_ids: list[str] = Field(description="the jobs concerned (at most [limits] max_count examined)")
    message: str
    next_step: str


def _due_ms(score: float) -> int:
    """BullMQ 5 scores delayed jobs ``timestamp * 0x1000 + counter``; older versions the timestamp."""
    return int(score) >> 12 if score > 1e15 else int(score)


async def queue_anomalies(
    redis: Any, settings: Settings, queue: str, now_ms: int
) -> tuple[list[QueueAnomaly], QueueLiveness | None]:
    conv, limits = settings.conventions, settings.limits
    cap = limits.max_count
    found: list[QueueAnomaly] = []
    stalled, examined = await active_without_lock(redis, conv, queue, cap)
    delayed = await redis.zrange(bull_key(conv, queue, "delayed"), 0, cap - 1, withscores=True)
    overdue = [(text(m) or "", now_ms - _due_ms(s)) for m, s in delayed
               if now_ms - _due_ms(s) > limits.delayed_overdue_ms]
    liveness = await queue_liveness(redis, conv, queue) if stalled or overdue else None
    live = liveness.sentence(queue) if liveness is not None else ""
    if stalled:
        found.append(QueueAnomaly(
            code="stalled", job_ids=stalled,
            message=(f"{len(stalled)} of {examined} active job(s) of queue '{queue}' have lost their lock: the worker "
                     f"that ran them died or lost it; {live}"),
            next_step=(f"start or restart a worker of '{queue}'; trace_job on each to see its job_audit row; or "
                       "propose_remediation(symptom='requeue_stuck_job', service=<the jobs' service>, ids=[...]) "
                       "moves them back to wait"),
        ))
    if overdue:
        worst = max(late for _, late in overdue)
        found.append(QueueAnomaly(
            code="delayed_overdue", job_ids=[j for j, _ in overdue],
            message=(f"{len(overdue)} delayed job(s) of queue '{queue}' are past their due time (up to "
                     f"{worst // 1000}s, threshold {limits.delayed_overdue_ms // 1000}s): no worker promotes them; "
                     f"{live}"),
            next_step=f"start a worker of '{queue}' (workers move due delayed jobs to wait)",
        ))
    return found, liveness
