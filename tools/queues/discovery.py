"""``list_queues``: BullMQ queues found by a bounded ``SCAN MATCH <bullmq_prefix>:*``.

A queue is recognised by one of its own keys: ``<prefix>:<queue>:<name>`` where
``<name>`` is ``meta``, ``id`` or a state structure from ``[conventions]``; BullMQ
refuses ``:`` in queue names, so the queue is the part between the prefix and that
last segment. Job hashes and their sub-keys (``<prefix>:<queue>:<jobId>:logs``) are
ignored. At most ``limit`` queues are described with their counts.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from server.config import Conventions, Settings
from server.connections import Connections
from server.errors import InvalidArgument
from server.redis_routing import RedisSource, instances_holding, redis_source
from server.redis_settings import DEFAULT_INSTANCE
from tools.queues.bull import check_queue_name, queue_count_commands, read_counts, state_structures
from tools.streams.discovery import check_pattern
from tools.streams.keys import glob_escape
from tools.streams.scan import bounded_scan


class QueueSummary(BaseModel):
    name: str
    instance: str = Field(default=DEFAULT_INSTANCE, description="the Redis instance the queue was found on")
    counts: dict[str, int]
    paused: bool


class QueueList(BaseModel):
    prefix: str
    match: str
    queues: list[QueueSummary]
    total_found: int
    truncated: bool = Field(description="more queues were found than the limit")
    scan_complete: bool = Field(description="False when the SCAN stopped at [limits] scan_max_iterations")
    scan_iterations: int
    scan_nodes: int = Field(default=1, description="servers scanned (every primary of a cluster, every instance)")
    redis_sources: list[RedisSource] = Field(default_factory=list, description="the Redis instances scanned")

    def summary_text(self) -> str:
        lines = [f"{self.total_found} BullMQ queue(s) under prefix '{self.prefix}'"
                 + ("" if self.scan_complete else " (scan stopped at its iteration cap: the list may be partial)")]
        for q in self.queues[:50]:
            busy = ", ".join(f"{k} {v}" for k, v in q.counts.items() if v)
            where = f" on {q.instance}" if len(self.redis_sources) > 1 else ""
            lines.append(f"  {q.name}{where}{' (paused)' if q.paused else ''}: {busy or 'empty'}")
        if self.truncated:
            lines.append("  ... more: narrow match or raise limit")
        lines.extend(source.line() for source in self.redis_sources)
        return "\n".join(lines)


def queue_of_key(conv: Conventions, key: str) -> str | None:
    """The queue a BullMQ queue-level key belongs to, or None for any other key."""
    head = f"{conv.bullmq_prefix}:"
    if not key.startswith(head):
        return None
    queue, sep, name = key[len(head) :].rpartition(":")
    markers = {"meta", "id", *(n for n, _ in state_structures(conv))}
    if not sep or not queue or ":" in queue or name not in markers:
        return None
    return queue


async def list_queues(
    connections: Connections, settings: Settings, *, match: str | None = None, limit: int = 100
) -> QueueList:
    """Queues whose name matches the glob ``match`` (default: all), with their counts."""
    check_pattern(match)
    conv, limits = settings.conventions, settings.limits
    if match is not None:
        check_queue_name(conv, match, "match")
    if not 1 <= limit <= limits.max_count:
        raise InvalidArgument(f"limit must be between 1 and {limits.max_count} ([limits] max_count), got {limit}")
    pattern = f"{glob_escape(conv.bullmq_prefix)}:{match or '*'}:*"
    instances = instances_holding(settings, "queues")
    found_on: list[tuple[str, str]] = []
    complete, iterations, nodes = True, 0, 0
    for instance in instances:
        async with connections.redis_errors(instance):
            found = await bounded_scan(connections.redis_reader(instance), match=pattern, type_=None,
                                       count=limits.scan_count, max_iterations=limits.scan_max_iterations,
                                       select=lambda key: queue_of_key(conv, key))
        complete, iterations, nodes = complete and found.complete, iterations + found.iterations, nodes + found.nodes
        found_on += [(name, instance) for name in found.keys]
    found_on.sort()
    shown = found_on[:limit]
    width = len(state_structures(conv)) + 1
    counted: dict[tuple[str, str], QueueSummary] = {}
    for instance in instances:
        mine = [name for name, where in shown if where == instance]
        if not mine:
            continue
        async with connections.redis_errors(instance):
            pipe = connections.redis_reader(instance).pipeline(transaction=False)
            for name in mine:
                queue_count_commands(pipe, conv, name)
            replies = await pipe.execute(raise_on_error=False)
        for i, name in enumerate(mine):
            counts, paused = read_counts(conv, replies[i * width : (i + 1) * width])
            counted[(name, instance)] = QueueSummary(name=name, instance=instance, counts=counts, paused=paused)
    return QueueList(prefix=conv.bullmq_prefix, match=match or "*", queues=[counted[k] for k in shown],
                     total_found=len(found_on), truncated=len(found_on) > limit, scan_complete=complete,
                     scan_iterations=iterations, scan_nodes=nodes,
                     redis_sources=[redis_source(settings, i) for i in instances])
