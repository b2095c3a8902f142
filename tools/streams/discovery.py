"""``list_streams``: the stream keys of the database, found by a bounded ``SCAN ... TYPE stream``.

Names are sorted; at most ``limit`` are described (``XLEN`` and ``XINFO GROUPS`` each,
in one pipeline). Dead-letter streams (``*<dlq_suffix>``) are marked ``dlq`` and their
length is also shown on their source stream. BullMQ's own event streams
(``<bullmq_prefix>:<queue>:events``) are left out unless asked for.

On a Redis Cluster every primary is scanned; with several ``[redis.instances]`` every
instance that holds streams is scanned, and each stream names its instance.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from server.config import Settings
from server.connections import Connections
from server.errors import InvalidArgument
from server.redis_routing import RedisSource, instances_holding, redis_source
from server.redis_settings import DEFAULT_INSTANCE
from tools.streams.keys import MAX_KEY_CHARS, dlq_key, is_bull_events, is_dlq
from tools.streams.scan import bounded_scan
from tools.streams.values import text


class StreamSummary(BaseModel):
    name: str
    instance: str = Field(default=DEFAULT_INSTANCE, description="the Redis instance the stream was found on")
    kind: Literal["stream", "dlq", "bullmq_events"]
    length: int | None = Field(description="XLEN; None when the key vanished meanwhile")
    groups: list[str] = Field(default_factory=list, description="consumer group names")
    pending: int = Field(default=0, description="pending entries summed over the groups")
    dead_letters: int | None = Field(
        default=None, description="length of its dead-letter stream, when that stream is listed too"
    )


class StreamList(BaseModel):
    match: str
    streams: list[StreamSummary]
    total_found: int = Field(description="stream keys the scan found (before the limit)")
    truncated: bool = Field(description="more were found than the limit: narrow match or raise limit")
    scan_complete: bool = Field(description="False when the SCAN stopped at [limits] scan_max_iterations")
    scan_iterations: int
    scan_nodes: int = Field(default=1, description="servers scanned (every primary of a cluster, every instance)")
    redis_sources: list[RedisSource] = Field(default_factory=list, description="the Redis instances scanned")

    def summary_text(self) -> str:
        lines = [f"{self.total_found} stream(s) matching {self.match!r}"
                 + ("" if self.scan_complete else " (scan stopped at its iteration cap: the list may be partial)")]
        for s in self.streams[:50]:
            extra = f", {s.dead_letters} dead letters" if s.dead_letters else ""
            groups = ", ".join(s.groups) or "no group"
            where = f" on {s.instance}" if len(self.redis_sources) > 1 else ""
            lines.append(f"  {s.name}{where} [{s.kind}] length {s.length}, groups: {groups}, "
                         f"pending {s.pending}{extra}")
        if self.truncated or len(self.streams) > 50:
            lines.append("  ... more: narrow match or raise limit")
        lines.extend(source.line() for source in self.redis_sources)
        return "\n".join(lines)


def check_pattern(match: str | None) -> None:
    if match is None:
        return
    if not match or len(match) > MAX_KEY_CHARS or any(ord(ch) < 32 for ch in match):
        raise InvalidArgument(f"match must be a SCAN glob of 1 to {MAX_KEY_CHARS} printable characters")


async def list_streams(
    connections: Connections,
    settings: Settings,
    *,
    match: str | None = None,
    limit: int = 100,
    include_bullmq: bool = False,
) -> StreamList:
    """Streams whose key matches the glob ``match`` (default: every key)."""
    check_pattern(match)
    conv, limits = settings.conventions, settings.limits
    if not 1 <= limit <= limits.max_count:
        raise InvalidArgument(f"limit must be between 1 and {limits.max_count} ([limits] max_count), got {limit}")
    pattern = match or "*"
    instances = instances_holding(settings, "streams")
    found_on: list[tuple[str, str]] = []
    complete, iterations, nodes = True, 0, 0
    for instance in instances:
        async with connections.redis_errors(instance):
            found = await bounded_scan(connections.redis_reader(instance), match=pattern, type_="stream",
                                       count=limits.scan_count, max_iterations=limits.scan_max_iterations)
        complete, iterations, nodes = complete and found.complete, iterations + found.iterations, nodes + found.nodes
        found_on += [(k, instance) for k in found.keys if include_bullmq or not is_bull_events(conv, k)]
    found_on.sort()
    shown = found_on[:limit]
    replies: list[tuple[str, str, Any, Any]] = []
    for instance in instances:
        mine = [name for name, where in shown if where == instance]
        if not mine:
            continue
        async with connections.redis_errors(instance):
            pipe = connections.redis_reader(instance).pipeline(transaction=False)
            for name in mine:
                pipe.xlen(name)
                pipe.xinfo_groups(name)
            answers = iter(await pipe.execute(raise_on_error=False))
        by_name = {name: (next(answers), next(answers)) for name in mine}
        replies += [(name, instance, *by_name[name]) for name in mine]
    replies.sort(key=lambda r: (r[0], r[1]))

    summaries: dict[tuple[str, str], StreamSummary] = {}
    for name, instance, length, groups in replies:
        groups = [] if isinstance(groups, Exception) else groups
        kind: Literal["stream", "dlq", "bullmq_events"] = (
            "dlq" if is_dlq(conv, name) else "bullmq_events" if is_bull_events(conv, name) else "stream"
        )
        summaries[(instance, name)] = StreamSummary(
            name=name,
            instance=instance,
            kind=kind,
            length=None if isinstance(length, Exception) else int(length),
            groups=[text(g["name"]) or "" for g in groups],
            pending=sum(int(g.get("pending", 0)) for g in groups),
        )
    for summary in summaries.values():
        dead = summaries.get((summary.instance, dlq_key(conv, summary.name)))
        if summary.kind == "stream" and dead is not None:
            summary.dead_letters = dead.length
    return StreamList(
        match=pattern,
        streams=list(summaries.values()),
        total_found=len(found_on),
        truncated=len(found_on) > limit,
        scan_complete=complete,
        scan_iterations=iterations,
        scan_nodes=nodes,
        redis_sources=[redis_source(settings, i) for i in instances],
    )
