"""Is a running BullMQ job still held by a live worker? Lock keys, the stalled checker, workers.

A BullMQ worker that takes a job moves its id to ``active`` and sets the lock
``<prefix>:<queue>:<jobId>:lock`` (``[conventions] bullmq_lock_suffix``) with a TTL of
``lockDuration``, renewed while the handler runs. When the worker dies the lock expires and
the job stays in ``active``: it is *stalled*. Only a worker of that queue moves it back to
``wait`` (its stalled checker, which also sets ``<prefix>:<queue>:stalled-check`` with a TTL
of ``stalledInterval`` each time it runs), so whether one runs decides what happens next.
Workers are seen in ``CLIENT LIST``: BullMQ names their connections ``<prefix>:<base64 of
the queue>`` (optionally followed by ``:w:<worker name>``).

Read commands only (EXISTS, PTTL, LRANGE bounded, CLIENT LIST).
"""

from __future__ import annotations

import base64
from typing import Any

from pydantic import BaseModel, Field

from server.config import Conventions
from server.lazy_modules import LazyModule
from tools.streams.keys import bull_key
from tools.streams.values import text

redis_exceptions = LazyModule("redis.exceptions")


class QueueLiveness(BaseModel):
    """Evidence of live workers on one queue."""

    workers: int | None = Field(
        default=None, description="worker connections of this queue in CLIENT LIST; None when Redis refused it"
    )
    workers_error: str | None = Field(default=None, description="why the workers could not be counted")
    stalled_check_ttl_ms: int | None = Field(
        default=None, description="TTL of the stalled-check key: set when a worker's stalled checker ran lately"
    )

    def sentence(self, queue: str) -> str:
        """What happens to a stalled job of ``queue``, given this evidence."""
        checker = (f"; its stalled checker ran lately (stalled-check key, ttl {self.stalled_check_ttl_ms} ms)"
                   if self.stalled_check_ttl_ms is not None else "")
        if self.workers is None:
            if self.stalled_check_ttl_ms is not None:
                return (f"a worker of queue '{queue}' runs{checker}: it should move the job back to wait (or fail "
                        "it past maxStalledCount) within stalledInterval")
            return (f"whether a worker of queue '{queue}' runs is unknown ({self.workers_error}); BullMQ moves a "
                    "stalled job back to wait only while some worker of that queue runs")
        if self.workers == 0:
            recent = (" (a stalled checker ran less than stalledInterval ago: a worker was alive recently)"
                      if self.stalled_check_ttl_ms is not None else "")
            return (f"no worker of queue '{queue}' is connected{recent}, so nothing moves it back to wait: BullMQ's "
                    "stalled checker runs only inside workers; start a worker of that queue")
        return (f"{self.workers} worker connection(s) of queue '{queue}' are live{checker}: the stalled checker "
                "should move it back to wait (or fail it past maxStalledCount) within stalledInterval; if it stays, "
                "those workers listen to another prefix or are stuck")


def worker_client_names(conv: Conventions, queue: str) -> tuple[str, str]:
    """``(exact name, name prefix)`` BullMQ gives the connections of ``queue``'s workers."""
    base = f"{conv.bullmq_prefix}:{base64.b64encode(queue.encode()).decode()}"
    return base, f"{base}:w:"


def count_workers(client_list: Any, conv: Conventions, queue: str) -> int:
    """Connections of ``queue``'s workers in a ``CLIENT LIST`` reply (parsed or raw)."""
    exact, prefix = worker_client_names(conv, queue)
    if isinstance(client_list, bytes | str):
        rows = [dict(p.split("=", 1) for p in line.split() if "=" in p)
                for line in (text(client_list) or "").splitlines()]
    else:
        rows = list(client_list or [])
    count = 0
    for row in rows:
        name = text(row.get("name")) if isinstance(row, dict) else None
        if name and (name == exact or name.startswith(prefix)):
            count += 1
    return count


async def queue_liveness(redis: Any, conv: Conventions, queue: str) -> QueueLiveness:
    out = QueueLiveness()
    ttl = await redis.pttl(bull_key(conv, queue, conv.bullmq_stalled_check_key))
    out.stalled_check_ttl_ms = int(ttl) if ttl is not None and int(ttl) >= 0 else None
    try:
        out.workers = count_workers(await redis.client_list(), conv, queue)
    except redis_exceptions.ResponseError as exc:  # CLIENT LIST denied by an ACL or renamed
        out.workers_error = f"CLIENT LIST refused: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
    return out


def lock_key(conv: Conventions, queue: str, job_id: str) -> str:
    return bull_key(conv, queue, f"{job_id}:{conv.bullmq_lock_suffix}")


async def active_without_lock(redis: Any, conv: Conventions, queue: str, cap: int) -> tuple[list[str], int]:
    """``(ids of active jobs whose lock is gone, active jobs examined)``, at most ``cap`` examined."""
    ids = [text(i) or "" for i in await redis.lrange(bull_key(conv, queue, "active"), 0, cap - 1)]
    if not ids:
        return [], 0
    pipe = redis.pipeline(transaction=False)
    for job_id in ids:
        pipe.exists(lock_key(conv, queue, job_id))
    held = await pipe.execute()
    return [job_id for job_id, h in zip(ids, held, strict=True) if not int(h)], len(ids)
