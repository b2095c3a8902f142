"""A broken asynchronous system, written into Redis the way the target system writes it.

Streams carry the outbox runner's entry fields; post-processors are real consumers
(``XREADGROUP`` / ``XACK`` here, in the test, never in the tools). What goes wrong:

``stream:event:created`` (group ``pp-main``):
  - consumer ``pp-dead`` read 5 entries and stopped (never acks): ``dead_consumer``;
  - the stream was then trimmed below 3 of them: ``trimmed_pending``;
  - consumer ``pp-live`` read 10 entries, acked 8, and keeps reading new ones: its 2 old
    entries stay pending: ``stuck_pending``;
  - an idempotency lock exists for one of ``pp-dead``'s entries, and for an entry
    waiting in the retry queue: ``stale_idempotency_lock``;
  - the group is behind: ``lag_growing`` (also group ``pp-lag``, which stopped after 3);
  - ``stream:event:created-dlq`` holds 3 dead letters (one with retry bookkeeping, one
    for a trimmed message, one with a payload that is not JSON): ``dlq_not_empty``;
  - group ``pp-ok`` read and acked everything: no anomaly.
``stream:user:deleted``: read and acked by its group; 2 dead letters of another event type.
``stream:orphan``: entries but no group: ``no_group``.
``bull:event-queue``: BullMQ jobs in every state; ``bull:fallback-event-queue``: paused.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field

import redis

from server.config import Conventions
from tests.remediation.target_sim import LiveConsumer

STREAM = "stream:event:created"
USER_STREAM = "stream:user:deleted"
ORPHAN = "stream:orphan"
MAIN, LAG, OK = "pp-main", "pp-lag", "pp-ok"
QUEUE, FALLBACK_QUEUE = "event-queue", "fallback-event-queue"
EVENT_TYPE, USER_EVENT_TYPE = "event.created", "user.deleted"

# thresholds the tests run with: small so that a short sleep ages things past them
SETTINGS = {
    "limits": {"dead_consumer_idle_ms": 1500, "lag_max_age_ms": 500},
    "conventions": {"claim_interval_ms": 300, "stream_maxlen": 27},  # the runner's MAXLEN: build_streams trims to it
}
AGE_S = 1.7


def entry_fields(event_id: str, event_type: str, n: int) -> dict[str, str]:
    """One stream entry as the outbox runner writes it."""
    payload = {"before": None, "after": {"id": str(uuid.uuid4()), "n": n, "title": f"event {n}"}}
    return {
        "id": event_id, "type": event_type, "emitter": "ms-event", "emitterId": str(uuid.uuid4()),
        "correlationId": str(uuid.uuid4()), "traceId": "", "version": "1", "createdAt": "2026-11-30T02:00:00.000Z",
        "payload": json.dumps(payload), "event": json.dumps({"type": event_type, "id": event_id}),
    }


def dead_letter(message_id: str, event_id: str, event_type: str, error: str, *, payload: str | None = None) -> dict:
    """One dead letter as RetryHelper writes it: messageId, error, payload (the parsed message), timestamp."""
    message = {"id": event_id, "type": event_type, "emitter": "ms-event", "payload": {"after": {"n": 1}}}
    return {"messageId": message_id, "error": error, "payload": payload if payload is not None else json.dumps(message),
            "timestamp": str(int(time.time() * 1000))}


@dataclass
class Scenario:
    ids: list[str] = field(default_factory=list)
    """Entry ids of STREAM, in order (the first 3 were trimmed)."""
    dead_pending: list[str] = field(default_factory=list)
    live_stuck: list[str] = field(default_factory=list)
    locked_pending: str = ""
    locked_retrying: str = ""
    dlq_ids: list[str] = field(default_factory=list)
    user_dlq_ids: list[str] = field(default_factory=list)
    jobs: dict[str, str] = field(default_factory=dict)
    """BullMQ job id per state."""


def _ack(client: redis.Redis, stream: str, group: str, ids: list[str]) -> None:
    if ids:
        client.xack(stream, group, *ids)


def _read(client: redis.Redis, stream: str, group: str, consumer: str, count: int) -> list[str]:
    reply = client.xreadgroup(group, consumer, {stream: ">"}, count=count)
    return [i.decode() for i, _ in reply[0][1]] if reply else []


def build_streams(client: redis.Redis, conv: Conventions, *, age: bool = True) -> Scenario:
    sc = Scenario()
    for n in range(30):
        sc.ids.append(client.xadd(STREAM, entry_fields(str(uuid.uuid4()), EVENT_TYPE, n)).decode())
    for group in (MAIN, LAG, OK):
        client.xgroup_create(STREAM, group, id="0")
    sc.dead_pending = _read(client, STREAM, MAIN, "pp-dead", 5)
    live = _read(client, STREAM, MAIN, "pp-live", 10)
    _ack(client, STREAM, MAIN, live[2:])
    sc.live_stuck = live[:2]
    _ack(client, STREAM, LAG, _read(client, STREAM, LAG, "lagger", 3))
    client.xtrim(STREAM, maxlen=27, approximate=False)

    sc.locked_pending = sc.dead_pending[4]
    client.set(conv.idempotency_key.format(group=MAIN, message_id=sc.locked_pending), "1", ex=86400)
    sc.locked_retrying = sc.ids[11]  # acked by pp-live after a failure, scheduled for a retry
    client.zadd(conv.retry_queue_key.format(group=MAIN), {sc.locked_retrying: int(time.time() * 1000) + 60_000})
    client.set(conv.idempotency_key.format(group=MAIN, message_id=sc.locked_retrying), "1", ex=86400)

    retried = sc.ids[12]  # delivered to pp-live and acked: the post-processor gave up on it
    base = conv.retry_key.format(group=MAIN, message_id=retried)
    client.set(base, "1")
    client.set(base + conv.retry_attempt_suffix, "5")
    client.set(base + conv.retry_last_error_suffix, "EntityNotFound: event 12 has no organiser")
    dlq = STREAM + conv.dlq_suffix
    organiser = "EntityNotFound: event 12 has no organiser\n    at handle"
    sc.dlq_ids.append(client.xadd(dlq, dead_letter(retried, "ev-12", EVENT_TYPE, organiser)).decode())
    sc.dlq_ids.append(client.xadd(dlq, dead_letter(sc.dead_pending[0], "ev-0", EVENT_TYPE,
                                                   "QueryFailedError: FK violation")).decode())
    sc.dlq_ids.append(client.xadd(dlq, dead_letter(sc.ids[13], "ev-13", EVENT_TYPE, "SyntaxError: bad payload",
                                                   payload="not json {")).decode())

    for n in range(4):
        client.xadd(USER_STREAM, entry_fields(f"user-{n}", USER_EVENT_TYPE, n))
    client.xgroup_create(USER_STREAM, "pp-user", id="0")
    _ack(client, USER_STREAM, "pp-user", _read(client, USER_STREAM, "pp-user", "user-consumer", 10))
    user_dlq = USER_STREAM + conv.dlq_suffix
    for n in range(2):
        sc.user_dlq_ids.append(client.xadd(user_dlq, dead_letter(f"{n + 1}-0", f"user-{n}", USER_EVENT_TYPE,
                                                                  "TimeoutError: ws-service")).decode())
    for n in range(3):
        client.xadd(ORPHAN, entry_fields(f"orphan-{n}", "orphan.event", n))
    client.set("unrelated:string", "x")
    client.hset("unrelated:hash", mapping={"a": "1"})

    if age:
        time.sleep(AGE_S)
    return sc


def live_consumers_work(client: redis.Redis) -> None:
    """The live consumers go on working: pp-live reads (and acks) one more entry, pp-ok everything.

    Call it right before the tool under test: a live consumer is one that read less than
    ``dead_consumer_idle_ms`` ago.
    """
    _ack(client, STREAM, MAIN, _read(client, STREAM, MAIN, "pp-live", 1))
    _ack(client, STREAM, OK, _read(client, STREAM, OK, "pp-ok-1", 100))
    _ack(client, USER_STREAM, "pp-user", _read(client, USER_STREAM, "pp-user", "user-consumer", 10))


HISTORY_BEYOND_ALL = "18446744073709551615-18446744073709551614"
"""An id above every real entry but below ``>``: XREADGROUP from it reads the consumer's own
history after it, i.e. nothing, so the PEL is untouched, yet the consumer's seen-time (its
XINFO CONSUMERS ``idle``) is refreshed, on Redis 6.2 and 7.x alike."""


class Heartbeat(LiveConsumer):
    """A consumer that stays live while the ``with`` block runs, however loaded the machine.

    ``live_consumers_work`` leaves pp-live live only for ``dead_consumer_idle_ms`` (1.5 s):
    a slow CI machine could take longer to reach the tool's XINFO CONSUMERS, and pp-live
    would then look dead. Unlike the remediation tests' LiveConsumer (whose thread it
    reuses), each beat re-reads pp-live's (empty) history instead of feeding the stream:
    its idle stays near 0 while no entry is added, delivered, acknowledged or re-delivered,
    so lag, pending counts and the idle time of its pending entries are the scenario's.
    """

    def __init__(self, client: redis.Redis, stream: str = STREAM, group: str = MAIN, consumer: str = "pp-live") -> None:
        super().__init__(client, stream, group, consumer)

    def beat(self) -> None:
        self.r.xreadgroup(self.group, self.consumer, {self.stream: HISTORY_BEYOND_ALL})


def build_queues(client: redis.Redis, conv: Conventions, sc: Scenario) -> None:
    """BullMQ-shaped jobs of ``event-queue`` in every state, and a paused ``fallback-event-queue``."""
    p = conv.bullmq_prefix
    now = int(time.time() * 1000)

    def job(state: str, n: int, **extra: object) -> str:
        job_id = str(uuid.uuid4())
        fields = {"name": f"events.job_{state}", "data": json.dumps({"eventId": f"e-{n}", "state": state}),
                  "opts": json.dumps({"attempts": 3, "backoff": {"type": "exponential", "delay": 1000}}),
                  "timestamp": now - 60_000 + n * 1000, "attemptsMade": 0, "delay": 0, "priority": 0}
        fields.update({k: v for k, v in extra.items() if v is not None})
        client.hset(f"{p}:{QUEUE}:{job_id}", mapping=fields)
        sc.jobs.setdefault(state, job_id)
        return job_id

    waiting = [job("wait", n) for n in range(3)]
    for job_id in waiting:  # BullMQ LPUSHes: the oldest ends at the tail
        client.lpush(f"{p}:{QUEUE}:wait", job_id)
    client.lpush(f"{p}:{QUEUE}:active", job("active", 3, processedOn=now - 5000, attemptsMade=1))
    client.lpush(f"{p}:{QUEUE}:paused", job("paused", 4))
    client.zadd(f"{p}:{QUEUE}:delayed", {job("delayed", 5, delay=30_000): (now + 30_000) * 0x1000})
    client.zadd(f"{p}:{QUEUE}:prioritized", {job("prioritized", 6, priority=2): 2 * 0x100000000})
    client.zadd(f"{p}:{QUEUE}:waiting-children", {job("waiting-children", 7): 0})
    for n, reason in ((8, "EntityNotFound: event e-8"), (9, "TimeoutError: geocoder did not answer")):
        stack = json.dumps([f"Error: {reason}\n    at GeocodeHandler.handle (handler.ts:42:11)"])
        finished = now - 10_000 + n * 1000
        jid = job("failed", n, attemptsMade=3, failedReason=reason, stacktrace=stack, processedOn=finished - 100,
                  finishedOn=finished)
        sc.jobs[f"failed-{n}"] = jid
        client.zadd(f"{p}:{QUEUE}:failed", {jid: finished})
    client.zadd(f"{p}:{QUEUE}:completed", {job("completed", 10, finishedOn=now, returnvalue="null"): now})
    client.hset(f"{p}:{QUEUE}:meta", mapping={"opts.maxLenEvents": 10000, "version": "bullmq:5.12.0"})
    client.set(f"{p}:{QUEUE}:id", 11)
    client.xadd(f"{p}:{QUEUE}:events", {"event": "added", "jobId": waiting[0]})
    removed = str(uuid.uuid4())
    client.set(conv.job_completed_key.format(job_id=removed), "true", ex=86400)
    sc.jobs["removed"] = removed
    client.hset(f"{p}:{QUEUE}:{sc.jobs['failed']}:logs:x", mapping={"noise": "1"})

    client.hset(f"{p}:{FALLBACK_QUEUE}:meta", mapping={"paused": 1})
    client.set(f"{p}:{FALLBACK_QUEUE}:id", 0)


def build(client: redis.Redis, conv: Conventions, *, age: bool = True) -> Scenario:
    """Streams (aged past the thresholds when ``age``), queues, then the live consumers' last reads."""
    sc = build_streams(client, conv, age=age)
    build_queues(client, conv, sc)
    live_consumers_work(client)
    return sc
