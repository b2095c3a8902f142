"""Plan for a failed BullMQ job: move it back to ``wait`` exactly as BullMQ's ``Job.retry()`` does.

Per job, in one MULTI/EXEC guarded by WATCH on the failed set and the job hash: ZREM it
from ``<prefix>:<queue>:failed``, HDEL ``finishedOn processedOn failedReason``, push its id
to ``wait`` (``paused`` when the queue is paused; RPUSH for LIFO jobs, LPUSH otherwise),
wake the workers through the ``marker`` sorted set (BullMQ >= 5), and XADD a ``waiting``
event to ``<prefix>:<queue>:events``. ``attemptsMade`` (``atm`` in BullMQ 5) is kept, as BullMQ keeps it.
"""

from __future__ import annotations

import json
import re

from server.connections import Connections
from tools.remediation import redis_reads as rr
from tools.remediation.model import BullRetryOp, Check
from tools.remediation.plan_base import PlanBuilder, Request, check
from tools.streams.keys import bull_key

DEFAULT_EVENTS_MAXLEN = 10_000
_VERSION_RE = re.compile(r"(\d+)\.\d+")


async def build_retry_failed_job(b: PlanBuilder, connections: Connections, req: Request) -> None:
    conv, cap = b.settings.conventions, b.settings.limits.max_plan_messages
    redis = connections.redis()
    queue = req.queue or ""
    prefix = conv.bullmq_prefix
    failed_key = bull_key(conv, queue, "failed")
    meta = {rr.text(k): rr.text(v) for k, v in (await redis.hgetall(bull_key(conv, queue, "meta"))).items()}
    b.nothing_to_do = f"no failed job in BullMQ queue {queue} ({failed_key} is empty or missing)"
    if req.ids is not None:
        ids = []
        for job_id in req.ids:
            if await redis.zscore(failed_key, job_id) is None:
                b.warnings.append(f"job {job_id} is not in {failed_key}: skipped (inspect_queue shows its state)")
            else:
                ids.append(job_id)
        b.candidates_found = len(ids)
    else:
        total = int(await redis.zcard(failed_key))
        ids = [rr.text(m) for m in await redis.zrange(failed_key, 0, cap - 1)]
        b.candidates_found, b.truncated = total, total > cap
    paused = "paused" in meta
    version = _VERSION_RE.search(meta.get("version", ""))
    marker = bool((version and int(version.group(1)) >= 5) or await redis.exists(bull_key(conv, queue, "marker")))
    try:
        events_maxlen = int(meta.get("opts.maxLenEvents") or DEFAULT_EVENTS_MAXLEN)
    except ValueError:
        events_maxlen = DEFAULT_EVENTS_MAXLEN
    by_push: dict[str, list[str]] = {"LPUSH": [], "RPUSH": []}
    checks: dict[str, list[Check]] = {"LPUSH": [], "RPUSH": []}
    for job_id in ids:
        fields = await redis.hgetall(bull_key(conv, queue, job_id))
        if not fields:
            b.warnings.append(f"job {job_id} is listed as failed but its hash is gone (removeOnFail?): skipped")
            continue
        try:
            opts = json.loads(fields.get(b"opts", b"{}"))
        except ValueError:
            opts = {}
        push = "RPUSH" if isinstance(opts, dict) and opts.get("lifo") else "LPUSH"
        by_push[push].append(job_id)
        checks[push].append(check("bull_job_failed", prefix=prefix, queue=queue, job_id=job_id,
                                   digest=rr.hash_digest(fields)))
        attempts = opts.get("attempts") if isinstance(opts, dict) else None
        made = rr.text(fields.get(b"attemptsMade", fields.get(b"atm", b"0")))  # BullMQ 4.x, else 5.x's name
        if attempts is not None and made.isdigit() and int(made) >= int(attempts):
            b.notes.append(f"job {job_id} used its {attempts} attempts: after this retry, one more failure sends it "
                           "back to failed (BullMQ keeps attemptsMade)")
    target = "paused" if paused else "wait"
    for push, job_ids in by_push.items():
        if not job_ids:
            continue
        b.add(
            action="bullmq_retry",
            description=f"move {len(job_ids)} failed job(s) of {queue} back to {target} (as Job.retry() does)",
            operation=BullRetryOp(queue=queue, prefix=prefix, job_ids=job_ids, target_list=target, push=push,
                                  marker=marker, events_maxlen=events_maxlen),
            target=f"{prefix}:{queue}",
            precondition="each job still failed and unchanged; the queue's paused state unchanged",
            checks=checks[push] + [check("queue_paused", prefix=prefix, queue=queue, paused=paused)],
            backup="each job hash and its failed score", reversible=False,
        )
        b.keys += len(job_ids)
    if paused:
        b.warnings.append(f"queue {queue} is paused: the jobs go to its paused list and run once it is resumed")
    count = len(by_push["LPUSH"]) + len(by_push["RPUSH"])
    b.messages = count
    if count:
        b.notes.append("runbook step 3: approve once the handler's failure cause is fixed, else the job fails again")
    b.summary = f"retry {count} failed job(s) of BullMQ queue {queue}"
