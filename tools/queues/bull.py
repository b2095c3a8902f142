"""``inspect_queue``: a BullMQ queue's counts by state, oldest waiting job, newest failures.

BullMQ keeps one structure per state under ``<bullmq_prefix>:<queue>:`` (names from
``conventions.bullmq_state_lists`` (lists: ``LLEN``) and ``bullmq_state_sorted_sets``
(sorted sets: ``ZCARD``)), a ``meta`` hash (``paused`` flag) and an ``id`` counter. The
oldest waiting job is the tail of the ``wait`` list (BullMQ pushes on the left and takes
from the right), or of the ``paused`` list where a paused queue keeps its jobs (the older
of the two when both hold some); the newest failures are the top of the ``failed`` sorted
set (scored by finish time). With ``job_id``, the job itself comes from
:func:`tools.outbox.bull_state.bull_job_state` (one model for every tool).

Read commands only (LLEN, ZCARD, HGET, LINDEX, ZREVRANGE, HMGET, HGETALL, ZSCORE, LPOS,
EXISTS, TIME, PTTL, CLIENT LIST); a key of an unexpected type counts as absent. Stalled and overdue
delayed jobs are listed as anomalies (:mod:`tools.queues.anomalies`).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from server.config import Conventions, Settings
from server.connections import Connections
from server.errors import InvalidArgument, NotFound
from server.redis_routing import RedisSource, redis_source
from tools.arg_bounds import MAX_FAILURES
from tools.outbox.bull_liveness import QueueLiveness
from tools.outbox.bull_state import STATE_BY_STRUCTURE, BullJobState, bull_job_state
from tools.queues.anomalies import QueueAnomaly, queue_anomalies
from tools.streams.keys import bull_key, check_key_name, fill
from tools.streams.node_reads import queue_exists_each, server_time
from tools.streams.values import as_int, capped, redis_time_ms, text


class QueueJobSummary(BaseModel):
    job_id: str
    name: str | None = Field(description="job name (= the jobs_outbox type)")
    timestamp_ms: int | None = Field(default=None, description="when the job was added")
    age_ms: int | None = Field(default=None, description="Redis time now minus timestamp_ms")
    attempts_made: int | None = None
    failed_reason: str | None = None
    failed_reason_truncated: bool = False
    finished_on_ms: int | None = None


class QueueReport(BaseModel):
    queue: str
    prefix: str
    counts: dict[str, int] = Field(description="jobs per state structure (wait, active, paused, delayed, ...)")
    paused: bool = Field(description="the queue's meta hash says it is paused")
    oldest_waiting: QueueJobSummary | None = Field(
        description="the job that has waited longest: the tail of wait (or of paused while the queue is paused)"
    )
    oldest_waiting_in: str | None = Field(default=None, description="the structure it waits in: wait or paused")
    recent_failures: list[QueueJobSummary] = Field(description="newest failed jobs first, with failedReason")
    job: BullJobState | None = Field(default=None, description="the job asked for with job_id")
    job_found: bool | None = Field(default=None, description="None when no job_id was given")
    job_completed_marker: bool | None = Field(
        default=None, description="the worker's idempotency guard (job_completed_key) exists for job_id"
    )
    notes: list[str] = Field(default_factory=list)
    anomalies: list[QueueAnomaly] = Field(
        default_factory=list, description="stalled (active, lock gone) and delayed_overdue jobs"
    )
    liveness: QueueLiveness | None = Field(
        default=None, description="workers of the queue (CLIENT LIST) and its stalled checker, when an anomaly needs it"
    )

    redis_source: RedisSource | None = Field(default=None, description="the Redis instance this was read from")

    def summary_text(self) -> str:
        counts = ", ".join(f"{k} {v}" for k, v in self.counts.items())
        lines = [f"queue {self.queue}{' (paused)' if self.paused else ''}: {counts}"]
        if self.oldest_waiting is not None:
            where = f" in {self.oldest_waiting_in}" if self.oldest_waiting_in not in (None, "wait") else ""
            lines.append(f"  oldest waiting{where}: {self.oldest_waiting.job_id} ({self.oldest_waiting.name}), "
                         f"age {self.oldest_waiting.age_ms} ms")
        for f in self.recent_failures[:10]:
            reason = (f.failed_reason or "").splitlines()[0][:120] if f.failed_reason else "-"
            lines.append(f"  failed {f.job_id} ({f.name}) after {f.attempts_made} attempt(s): {reason}")
        if self.job is not None:
            j = self.job
            lines.append(f"job {j.job_id}: {j.state}, {j.attempts_made} attempt(s)"
                         + (f", failed: {j.failed_reason}" if j.failed_reason else ""))
        for a in self.anomalies:
            ids = ", ".join(a.job_ids[:5]) + (" ..." if len(a.job_ids) > 5 else "")
            lines.append(f"  ! {a.code}: {a.message} [{ids}]")
        lines.extend(f"note: {n}" for n in self.notes)
        if self.redis_source is not None:
            lines.append(self.redis_source.line())
        return "\n".join(lines)


def state_structures(conv: Conventions) -> list[tuple[str, str]]:
    """``(name, 'list' | 'zset')`` for every BullMQ state structure of the conventions."""
    return [(n, "list") for n in conv.bullmq_state_lists] + [(n, "zset") for n in conv.bullmq_state_sorted_sets]


def _structure_for(conv: Conventions, state: str) -> str | None:
    names = [*conv.bullmq_state_lists, *conv.bullmq_state_sorted_sets]
    return next((n for n in names if STATE_BY_STRUCTURE.get(n, n) == state), None)


def queue_count_commands(pipe: Any, conv: Conventions, queue: str) -> None:
    """Queue ``LLEN`` / ``ZCARD`` for each state structure, then ``HGET meta paused``, on ``pipe``."""
    for name, kind in state_structures(conv):
        key = bull_key(conv, queue, name)
        if kind == "list":
            pipe.llen(key)
        else:
            pipe.zcard(key)
    pipe.hget(bull_key(conv, queue, "meta"), "paused")


def read_counts(conv: Conventions, replies: list[Any]) -> tuple[dict[str, int], bool]:
    """The answers of :func:`queue_count_commands`: ``(counts, paused)``; errors count 0."""
    counts = {}
    for (name, _), reply in zip(state_structures(conv), replies, strict=False):
        counts[name] = 0 if isinstance(reply, Exception) or reply is None else int(reply)
    paused_reply = replies[len(counts)]
    paused = not isinstance(paused_reply, Exception) and text(paused_reply) in ("1", "true")
    return counts, paused


_JOB_FIELDS = ("name", "timestamp", "attemptsMade", "atm", "failedReason", "finishedOn")


def _job_summary(job_id: str, values: list[Any], now_ms: int, max_bytes: int) -> QueueJobSummary:
    name, timestamp, attempts, atm, reason, finished = values
    reason_text, cut = capped(reason, max_bytes)
    name_text, _ = capped(name, max_bytes)
    ts = as_int(timestamp)
    made = as_int(attempts)
    return QueueJobSummary(
        job_id=job_id, name=name_text, timestamp_ms=ts, age_ms=max(0, now_ms - ts) if ts else None,
        attempts_made=made if made is not None else as_int(atm), failed_reason=reason_text,
        failed_reason_truncated=cut, finished_on_ms=as_int(finished),
    )


def check_queue_name(conv: Conventions, queue: str, what: str = "queue") -> str:
    """A queue name given by a user; refuses a name that still carries ``<bullmq_prefix>:``."""
    check_key_name(queue, what)
    head = f"{conv.bullmq_prefix}:"
    if queue.startswith(head):
        raise InvalidArgument(f"{what} {queue!r} starts with the BullMQ prefix '{head}': give the queue name alone, "
                              f"e.g. {queue[len(head):]!r}")
    return queue


async def inspect_queue(
    connections: Connections,
    settings: Settings,
    queue: str,
    *,
    job_id: str | None = None,
    failures: int = 5,
) -> QueueReport:
    """Counts, oldest waiting job and newest failures of ``queue``; with ``job_id``, that job too."""
    conv, limits = settings.conventions, settings.limits
    check_queue_name(conv, queue)
    if job_id is not None:
        check_key_name(job_id, "job_id")
    if not 0 <= failures <= MAX_FAILURES:
        raise InvalidArgument(f"failures must be between 0 and {MAX_FAILURES}, got {failures}")
    # waiting jobs sit in wait, or in paused while the queue is paused (BullMQ versions that keep a paused list)
    waiting = [n for n in (_structure_for(conv, "waiting"), _structure_for(conv, "paused")) if n]
    failed = _structure_for(conv, "failed") if failures else None
    instance = connections.redis_instance_for_queue(queue)
    redis = connections.redis_reader(instance)
    async with connections.redis_errors(instance):
        now_ms = redis_time_ms(await server_time(redis, bull_key(conv, queue, "meta")))
        pipe = redis.pipeline(transaction=False)
        queue_count_commands(pipe, conv, queue)
        queue_exists_each(pipe, [bull_key(conv, queue, "meta"), bull_key(conv, queue, "id")])
        for name in waiting:
            pipe.lindex(bull_key(conv, queue, name), -1)
        if failed:
            pipe.zrevrange(bull_key(conv, queue, failed), 0, failures - 1)
        replies = iter(await pipe.execute(raise_on_error=False))
        counts, paused = read_counts(conv, [next(replies) for _ in range(len(state_structures(conv)) + 1)])
        markers = sum(_int_or_zero(next(replies)) for _ in range(2))
        tails = [(name, _text_or_none(next(replies))) for name in waiting]
        failed_ids = [text(i) or "" for i in _list_or_empty(next(replies))] if failed else []
        if not any(counts.values()) and not paused and not _int_or_zero(markers):
            raise NotFound(f"no BullMQ queue '{queue}' under prefix '{conv.bullmq_prefix}' (no meta, id or state "
                           "key): list_queues shows the queues")
        tails = [(name, jid) for name, jid in tails if jid]
        pipe = redis.pipeline(transaction=False)
        for jid in [jid for _, jid in tails] + failed_ids:
            pipe.hmget(bull_key(conv, queue, jid), list(_JOB_FIELDS))
        details = await pipe.execute(raise_on_error=False)
        details = [[None] * len(_JOB_FIELDS) if isinstance(d, Exception) else d for d in details]
        cap = limits.payload_max_bytes
        candidates = [(name, _job_summary(jid, d, now_ms, cap))
                      for (name, jid), d in zip(tails, details[: len(tails)], strict=True)]
        oldest = min(candidates, key=lambda c: c[1].timestamp_ms if c[1].timestamp_ms is not None else now_ms,
                     default=None)
        report = QueueReport(
            redis_source=redis_source(settings, instance),
            queue=queue, prefix=conv.bullmq_prefix, counts=counts, paused=paused,
            oldest_waiting=oldest[1] if oldest else None,
            oldest_waiting_in=oldest[0] if oldest else None,
            recent_failures=[_job_summary(jid, d, now_ms, cap)
                             for jid, d in zip(failed_ids, details[len(tails):], strict=True)],
        )
        report.anomalies, report.liveness = await queue_anomalies(redis, settings, queue, now_ms)
        if job_id is not None:
            await _add_job(redis, settings, report, job_id)
    return report


def _text_or_none(reply: Any) -> str | None:
    return None if isinstance(reply, Exception) else text(reply) or None


def _list_or_empty(reply: Any) -> list[Any]:
    return [] if isinstance(reply, Exception) or not reply else list(reply)


def _int_or_zero(value: Any) -> int:
    return 0 if isinstance(value, Exception) or value is None else int(value)


async def _add_job(redis: Any, settings: Settings, report: QueueReport, job_id: str) -> None:
    conv, limits = settings.conventions, settings.limits
    report.job = await bull_job_state(redis, conv, report.queue, job_id, list_scan_max=limits.bull_list_scan_max,
                                      value_max_bytes=limits.payload_max_bytes)
    report.job_found = report.job is not None
    marker = fill(conv.job_completed_key, job_id=job_id)
    report.job_completed_marker = bool(await redis.exists(marker))
    if report.job is None:
        if report.job_completed_marker:
            report.notes.append(f"job {job_id} is not in the queue but '{marker}' exists: it completed and BullMQ "
                                "removed it (removeOnComplete)")
        else:
            report.notes.append(f"job {job_id} is unknown to queue '{report.queue}': never pushed there, or "
                                "removed; check the jobs_outbox row's target and job_audit (trace_job)")
