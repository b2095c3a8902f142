"""The target system's Redis side, re-enacted in Python for the tests.

:class:`PostProcessor` does what the TypeScript ``SinglePostProcessor`` + ``RetryHelper``
do, with the same Redis commands in the same order: XREADGROUP (new entries, and its own
pending list when retries are due), idempotency lock ``SET NX EX``, handler, on success
clear the retry keys and XACK; on a business failure INCR ``:attempt``, SET
``:lastError``, EXPIRE the base key, ZADD the retry queue, and after ``max_retries``
XADD ``<stream>-dlq`` (messageId, error, payload = JSON of the ParseResult, timestamp)
then XACK; the lock is released after a failure. :func:`push_event` is the outbox
runner's XADD of an event_queue row.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import redis

from server.config import Conventions


def js(value: Any) -> str:
    """``JSON.stringify``."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def push_event(client: redis.Redis, stream: str, event: dict[str, Any], maxlen: int = 10000) -> str:
    """The outbox runner's XADD of one event_queue row (fields as in target-system.md)."""
    fields = {
        "id": event["id"],
        "type": event["type"],
        "emitter": event["emitter"],
        "emitterId": event.get("emitterId", ""),
        "correlationId": event.get("correlationId", ""),
        "traceId": event.get("traceId", ""),
        "version": str(event.get("version", 1)),
        "createdAt": event.get("createdAt", "2026-11-30T02:00:00.000Z"),
        "payload": js(event.get("payload", {})),
        "event": js(event),
    }
    return client.xadd(stream, fields, maxlen=maxlen, approximate=True).decode()


def new_event(event_type: str = "event.created", emitter: str = "ms-event", **payload: Any) -> dict[str, Any]:
    return {
        "id": str(uuid.uuid4()),
        "type": event_type,
        "emitter": emitter,
        "emitterId": str(uuid.uuid4()),
        "correlationId": str(uuid.uuid4()),
        "traceId": str(uuid.uuid4()),
        "version": 1,
        "createdAt": "2026-11-30T02:00:00.000Z",
        "payload": {"before": None, "after": payload},
    }


class PostProcessor:
    """One consumer of one group, as the target system runs it."""

    def __init__(
        self,
        client: redis.Redis,
        stream: str,
        group: str,
        consumer: str,
        handler: Callable[[dict[str, Any], str], None],
        *,
        conventions: Conventions | None = None,
        max_retries: int = 5,
        ttl_s: int = 86400,
    ) -> None:
        self.r = client
        self.stream, self.group, self.consumer = stream, group, consumer
        self.handler = handler
        self.conv = conventions or Conventions()
        self.max_retries = max_retries
        self.ttl_s = ttl_s
        self.processed: list[tuple[str, str]] = []  # (message id, event id)

    def ensure_group(self) -> None:
        try:
            self.r.xgroup_create(self.stream, self.group, id="0", mkstream=True)
        except redis.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    def _key(self, pattern: str, message_id: str) -> str:
        return pattern.replace("{group}", self.group).replace("{message_id}", message_id)

    def step(self, block_ms: int | None = None) -> int:
        """Process due retries (from the own pending list) then new entries; returns how many."""
        queue = self._key(self.conv.retry_queue_key, "")
        due = [m.decode() for m in self.r.zrangebyscore(queue, "-inf", int(time.time() * 1000))]
        if due:
            self.r.zrem(queue, *due)
        entries: list[tuple[str, dict[bytes, bytes]]] = []
        if due:
            for _, rows in self.r.xreadgroup(self.group, self.consumer, {self.stream: "0"}, count=100) or []:
                entries += [(i.decode(), f) for i, f in rows if i.decode() in due and f]
        for _, rows in self.r.xreadgroup(self.group, self.consumer, {self.stream: ">"}, count=10,
                                         block=block_ms) or []:
            entries += [(i.decode(), f) for i, f in rows]
        for message_id, fields in entries:
            self._process(message_id, {k.decode(): v.decode() for k, v in fields.items()})
        return len(entries)

    def restart(self) -> int:
        """What a restarting consumer does first: re-read and process its own pending entries."""
        entries = []
        for _, rows in self.r.xreadgroup(self.group, self.consumer, {self.stream: "0"}, count=100) or []:
            entries += [(i.decode(), f) for i, f in rows if f]
        for message_id, fields in entries:
            self._process(message_id, {k.decode(): v.decode() for k, v in fields.items()})
        return len(entries)

    def _process(self, message_id: str, fields: dict[str, str]) -> None:
        if "event" not in fields:
            self.r.xack(self.stream, self.group, message_id)
            return
        lock = self._key(self.conv.idempotency_key, message_id)
        if not self.r.set(lock, "processing", nx=True, ex=self.ttl_s):
            self.r.xack(self.stream, self.group, message_id)  # "already processed"
            return
        raw = fields["event"]
        try:
            event = json.loads(raw)
            self.handler(event, message_id)
            base = self._key(self.conv.retry_key, message_id)
            self.r.delete(base + self.conv.retry_attempt_suffix, base + self.conv.retry_last_error_suffix, base)
            self.r.zrem(self._key(self.conv.retry_queue_key, ""), message_id)
            self.r.xack(self.stream, self.group, message_id)
            self.processed.append((message_id, event["id"]))
        except Exception as exc:  # a business failure
            self._failure(message_id, str(exc), raw)

    def _failure(self, message_id: str, error: str, raw: str) -> None:
        base = self._key(self.conv.retry_key, message_id)
        try:
            attempt = self.r.incr(base + self.conv.retry_attempt_suffix)
            self.r.set(base + self.conv.retry_last_error_suffix, error, ex=self.ttl_s)
            self.r.expire(base, self.ttl_s)
            if attempt < self.max_retries:
                self.r.zadd(self._key(self.conv.retry_queue_key, ""), {message_id: int(time.time() * 1000)})
            else:
                event = json.loads(raw)
                parse_result = {"success": True, "type": event["type"], "id": event["id"], "payload": js(event)}
                self.r.xadd(f"{self.stream}{self.conv.dlq_suffix}", {
                    "messageId": message_id, "error": error, "payload": js(parse_result),
                    "timestamp": str(int(time.time() * 1000)),
                })
                self.r.xack(self.stream, self.group, message_id)
        finally:
            self.r.delete(self._key(self.conv.idempotency_key, message_id))

    def run_until(self, predicate: Callable[[], bool], timeout_s: float = 10.0) -> None:
        deadline = time.monotonic() + timeout_s
        while not predicate():
            if time.monotonic() > deadline:
                raise AssertionError("the simulated consumer did not reach the expected state in time")
            self.step(block_ms=None)
            time.sleep(0.01)


class ConsumerThread:
    """A post-processor running in the background (the live consumer during an apply)."""

    def __init__(self, processor: PostProcessor) -> None:
        self.processor = processor
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.error: BaseException | None = None

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self.processor.step(block_ms=50)
        except BaseException as exc:  # surfaced by stop()
            self.error = exc

    def __enter__(self) -> ConsumerThread:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        if self.error is not None:
            raise self.error


class LiveConsumer:
    """A consumer that keeps reading successfully (one small message every ``period_s``) while it runs.

    Liveness is judged by the time since a consumer last *read something* (XINFO CONSUMERS
    ``idle`` before Redis 7.2, ``inactive`` after), so a live consumer on a quiet stream must
    be fed to stay live however slow the machine is. Its messages carry no event: they are
    acknowledged at once and never pending.
    """

    def __init__(self, client: redis.Redis, stream: str, group: str, consumer: str, period_s: float = 0.05) -> None:
        self.r, self.stream, self.group, self.consumer = client, stream, group, consumer
        self.period_s = period_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.error: BaseException | None = None

    def beat(self) -> None:
        self.r.xadd(self.stream, {"tick": "1"})
        for _, rows in self.r.xreadgroup(self.group, self.consumer, {self.stream: ">"}, count=100) or []:
            self.r.xack(self.stream, self.group, *[i for i, _ in rows])

    def _run(self) -> None:
        try:
            while not self._stop.wait(self.period_s):
                self.beat()
        except BaseException as exc:  # surfaced by __exit__
            self.error = exc

    def __enter__(self) -> LiveConsumer:
        self.beat()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        if self.error is not None:
            raise self.error
