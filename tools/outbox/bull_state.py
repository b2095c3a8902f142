"""The state of one BullMQ job, read from Redis without touching it.

BullMQ keeps a job as the hash ``<prefix>:<queue>:<jobId>`` and lists its id in one
structure per state: the lists ``wait``, ``active``, ``paused`` and the sorted sets
``delayed``, ``prioritized``, ``waiting-children``, ``failed``, ``completed`` (names from
``conventions.bullmq_state_lists`` / ``bullmq_state_sorted_sets``). Sorted sets are
probed with ``ZSCORE`` (O(1)); lists with ``LPOS ... MAXLEN`` from both ends, so a
huge ``wait`` list costs at most ``2 * list_scan_max`` comparisons on the server.

The job hash is read with a bounded size: a field longer than :data:`MAX_FIELD_BYTES`
(a huge ``data`` payload) is not read and shows as absent (``data_truncated`` /
``name_truncated`` / ``failed_reason_truncated`` is set), and the kept values are cut at
``value_max_bytes`` (with the same flags). Keys and values are built and decoded with
:mod:`tools.streams.keys` and :mod:`tools.streams.values`, as every other Redis reader does.

Fields are read as each BullMQ version writes them: ``attemptsMade`` (4.x) or ``atm`` (5.x,
0 when absent: no attempt finished yet), ``ats`` (attempts started), ``stc`` (stalled
counter), ``pb`` (processed by), ``delay``. An ``active`` job also gets its lock key's TTL
(``<prefix>:<queue>:<jobId>:lock``): no lock means the worker died or lost it (stalled). A
delayed job gets its due time (the ``delayed`` score, else ``timestamp + delay``) and Redis's
own clock (``TIME``) to compare it with.

Only read commands are used (HLEN, HSTRLEN, HGETALL, HMGET, ZSCORE, LPOS, PTTL, TIME). Callers wrap the call in
``Connections.redis_errors()`` to turn Redis failures into ``ServiceUnavailable``.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, Field

from server.config import Conventions
from tools.outbox.bull_liveness import QueueLiveness
from tools.streams.keys import bull_key
from tools.streams.node_reads import server_time
from tools.streams.values import as_int, capped, redis_time_ms, text

STATE_BY_STRUCTURE = {
    "wait": "waiting",
    "active": "active",
    "paused": "paused",
    "delayed": "delayed",
    "prioritized": "prioritized",
    "waiting-children": "waiting-children",
    "failed": "failed",
    "completed": "completed",
}
"""BullMQ's structure names mapped to the state they mean (unknown names keep their own)."""


class BullJobState(BaseModel):
    """What Redis says about one BullMQ job."""

    queue: str
    job_id: str
    key: str = Field(description="the job hash key, <prefix>:<queue>:<jobId>")
    hash_exists: bool = Field(description="false once BullMQ removed the job (removeOnComplete/removeOnFail)")
    state: str = Field(
        description="waiting | active | paused | delayed | prioritized | waiting-children | failed | completed "
        "| unknown (hash exists but the id was not found in any structure within the scan bound)"
    )
    found_in: list[str] = Field(default_factory=list, description="state structures (keys) that list the job id")
    name: str | None = Field(default=None, description="job name (= the jobs_outbox type), cut at the byte cap")
    name_truncated: bool = False
    attempts_made: int | None = None
    failed_reason: str | None = Field(default=None, description="failedReason, cut at the byte cap")
    failed_reason_truncated: bool = False
    stacktrace: list[str] = Field(default_factory=list, description="last stack traces, each cut at the byte cap")
    timestamp_ms: int | None = Field(default=None, description="when the job was added")
    processed_on_ms: int | None = None
    finished_on_ms: int | None = None
    delayed_until_ms: int | None = Field(default=None, description="score in the delayed set (run-at time)")
    attempts_started: int | None = Field(default=None, description="ats (BullMQ 5): attempts started")
    stalled_counter: int | None = Field(default=None, description="stc: times the job was found stalled")
    processed_by: str | None = Field(default=None, description="pb: name of the worker that took it, when named")
    delay_ms: int | None = Field(default=None, description="the job's delay option")
    lock_ttl_ms: int | None = Field(
        default=None, description="active jobs: TTL of <key>:lock; None when the lock is gone (stalled)"
    )
    lock_exists: bool | None = Field(default=None, description="active jobs: the worker's lock is held")
    redis_now_ms: int | None = Field(default=None, description="Redis TIME when read (for due and running times)")
    liveness: QueueLiveness | None = Field(
        default=None, description="stalled or overdue jobs: whether a worker of the queue runs"
    )

    @property
    def stalled(self) -> bool:
        """Active, and the worker's lock is gone."""
        return self.state == "active" and self.lock_exists is False

    def overdue_ms(self) -> int | None:
        """Delayed jobs: how long past the due time (negative: not due yet)."""
        if self.state != "delayed" or self.delayed_until_ms is None or self.redis_now_ms is None:
            return None
        return self.redis_now_ms - self.delayed_until_ms

    def running_ms(self) -> int | None:
        """Active jobs: for how long, by Redis's clock (processedOn is the worker's clock)."""
        if self.processed_on_ms is None or self.redis_now_ms is None:
            return None
        return max(0, self.redis_now_ms - self.processed_on_ms)
    data: str | None = Field(default=None, description="job data (JSON text), cut at the byte cap")
    data_truncated: bool = False


def _stacktrace(value: bytes | str | None, max_bytes: int) -> list[str]:
    raw = text(value)
    if not raw:
        return []
    try:
        parsed: Any = json.loads(raw)
    except ValueError:
        parsed = [raw]
    if not isinstance(parsed, list):
        parsed = [str(parsed)]
    out: list[str] = []
    for item in parsed[-3:]:
        piece, _ = capped(str(item), max_bytes)
        out.append(piece or "")
    return out


LARGE_FIELDS = ("name", "data", "stacktrace", "returnvalue", "failedReason", "opts")
"""Job hash fields whose size the job's producer or handler decides (the others are numbers and names)."""

MAX_FIELD_BYTES = 1024 * 1024
"""A large field longer than this is not read at all (Redis cannot read part of a hash field)."""

MAX_HASH_FIELDS = 64
"""A job hash has about 15 fields; a bigger hash is read field by field, known fields only."""

KNOWN_FIELDS = (
    "name", "data", "opts", "timestamp", "delay", "priority", "attemptsMade", "atm", "attemptsStarted", "ats",
    "stalledCounter", "failedReason", "stacktrace", "returnvalue", "processedOn", "finishedOn", "processedBy",
    "parentKey", "parent", "rjk", "deid",
)


async def _job_fields(redis: Any, key: str) -> tuple[dict[bytes, bytes], bool, set[str]]:
    """``(fields, exists, left_out)``: the job hash read with a bounded size.

    HGETALL when it is small (the usual case); else the known fields whose length is at
    most :data:`MAX_FIELD_BYTES`. ``left_out`` names the large fields that were not read.
    """
    pipe = redis.pipeline(transaction=False)
    pipe.hlen(key)
    for name in LARGE_FIELDS:
        pipe.hstrlen(key, name)
    count, *lengths = await pipe.execute()
    too_big = {name for name, length in zip(LARGE_FIELDS, lengths, strict=True) if int(length) > MAX_FIELD_BYTES}
    if not too_big and int(count) <= MAX_HASH_FIELDS:
        return dict(await redis.hgetall(key)), int(count) > 0, set()
    names = [n for n in KNOWN_FIELDS if n not in too_big]
    values = await redis.hmget(key, names)
    return {n.encode(): v for n, v in zip(names, values, strict=True) if v is not None}, True, too_big


async def bull_job_state(
    redis: Any,
    conventions: Conventions,
    queue: str,
    job_id: str,
    *,
    list_scan_max: int = 10_000,
    value_max_bytes: int = 4096,
) -> BullJobState | None:
    """The job's hash fields and state, or ``None`` when Redis knows nothing of it.

    ``None`` means: no hash and no state structure lists the id (BullMQ removed it, e.g.
    ``removeOnComplete``, or it was never pushed to this queue).
    """
    key = bull_key(conventions, queue, job_id)
    fields, hash_exists, left_out = await _job_fields(redis, key)
    found: list[str] = []
    state: str | None = None
    delayed_until: int | None = None
    now_reply = await server_time(redis, key)  # not pipelined: a cluster routes TIME to the key's node
    pipe = redis.pipeline(transaction=False)
    pipe.pttl(bull_key(conventions, queue, f"{job_id}:{conventions.bullmq_lock_suffix}"))
    for name in conventions.bullmq_state_sorted_sets:
        pipe.zscore(bull_key(conventions, queue, name), job_id)
    lock_ttl, *scores = await pipe.execute()
    now_ms = redis_time_ms(now_reply)
    for name, score in zip(conventions.bullmq_state_sorted_sets, scores, strict=True):
        if score is None:
            continue
        found.append(bull_key(conventions, queue, name))
        if state is None:
            state = STATE_BY_STRUCTURE.get(name, name)
        if name == "delayed":
            # BullMQ stores delayed scores as timestamp * 0x1000 + counter in recent versions
            delayed_until = int(score) >> 12 if score > 1e15 else int(score)
    for name in conventions.bullmq_state_lists:
        list_key = bull_key(conventions, queue, name)
        pos = await redis.lpos(list_key, job_id, maxlen=list_scan_max)
        if pos is None:
            pos = await redis.lpos(list_key, job_id, rank=-1, maxlen=list_scan_max)
        if pos is not None:
            found.append(list_key)
            if state is None:
                state = STATE_BY_STRUCTURE.get(name, name)
    if not hash_exists and not found:
        return None
    data, data_truncated = capped(fields.get(b"data"), value_max_bytes)
    job_name, name_truncated = capped(fields.get(b"name"), value_max_bytes)
    reason, reason_truncated = capped(fields.get(b"failedReason"), value_max_bytes)
    attempts = as_int(fields.get(b"attemptsMade"))
    if attempts is None:
        attempts = as_int(fields.get(b"atm"))
    if attempts is None and hash_exists:
        attempts = 0  # BullMQ writes atm when an attempt finishes: none has yet
    timestamp = as_int(fields.get(b"timestamp"))
    delay = as_int(fields.get(b"delay"))
    if state == "delayed" and delayed_until is None and timestamp is not None and delay:
        delayed_until = timestamp + delay
    active = state == "active"
    held = lock_ttl is not None and int(lock_ttl) != -2  # -2: no such key; -1: held without expiry
    processed_by, _ = capped(fields.get(b"pb"), value_max_bytes)
    return BullJobState(
        queue=queue,
        job_id=job_id,
        key=key,
        hash_exists=hash_exists,
        state=state or "unknown",
        found_in=found,
        name=job_name,
        name_truncated=name_truncated or "name" in left_out,
        attempts_made=attempts,
        failed_reason=reason or None,
        failed_reason_truncated=reason_truncated or "failedReason" in left_out,
        stacktrace=_stacktrace(fields.get(b"stacktrace"), value_max_bytes),
        timestamp_ms=timestamp,
        processed_on_ms=as_int(fields.get(b"processedOn")),
        finished_on_ms=as_int(fields.get(b"finishedOn")),
        delayed_until_ms=delayed_until,
        data=data,
        data_truncated=data_truncated or "data" in left_out,
        attempts_started=as_int(fields.get(b"ats")),
        stalled_counter=as_int(fields.get(b"stc")),
        processed_by=processed_by or None,
        delay_ms=delay,
        lock_exists=held if active else None,
        lock_ttl_ms=int(lock_ttl) if active and held and int(lock_ttl) >= 0 else None,
        redis_now_ms=now_ms,
    )
