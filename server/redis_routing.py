"""Which Redis instance holds a stream or a queue: ``[redis.instances.<name>]`` patterns.

A stream key or a BullMQ queue name goes to the first named instance (in the order of
the config file) with a matching ``fnmatch`` glob in its ``streams`` / ``queues`` list;
otherwise to the default instance (``[redis]``). A dead-letter stream
(``<stream><dlq_suffix>``) follows its source stream, so a pattern like
``stream:ws:*`` also routes ``stream:ws:x-dlq``.
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Literal

from pydantic import BaseModel, Field

from server.config import Settings
from server.redis_settings import DEFAULT_INSTANCE


def route(settings: Settings, name: str, *, kind: Literal["streams", "queues"]) -> str:
    """The instance name ``name`` (a stream key or a queue name) is read from."""
    candidates = [name]
    suffix = settings.conventions.dlq_suffix
    if kind == "streams" and suffix and name.endswith(suffix):
        candidates.append(name[: -len(suffix)])
    for instance, cfg in settings.redis.instances.items():
        patterns = cfg.streams if kind == "streams" else cfg.queues
        if any(fnmatchcase(c, p) for c in candidates for p in patterns):
            return instance
    return DEFAULT_INSTANCE


def instances_holding(settings: Settings, kind: Literal["streams", "queues"]) -> list[str]:
    """Instances a discovery of ``kind`` scans: the default one and every instance routing some of them."""
    named = [n for n, cfg in settings.redis.instances.items() if (cfg.streams if kind == "streams" else cfg.queues)]
    return [DEFAULT_INSTANCE, *named]


class RedisSource(BaseModel):
    """Which Redis a tool result was read from (every Redis tool result carries one)."""

    instance: str = Field(description="the [redis] instance read: 'default' or a [redis.instances.<name>] name")
    mode: str = Field(description="standalone, cluster or sentinel")
    replica: bool = Field(default=False, description="read from a replica: it may lag the primary")

    def line(self) -> str:
        lag = "; read from a replica, which may lag the primary" if self.replica else ""
        return f"(Redis instance '{self.instance}', {self.mode}{lag})"


def redis_source(settings: Settings, instance: str) -> RedisSource:
    cfg = settings.redis.instance(instance)
    return RedisSource(instance=instance, mode=cfg.mode, replica=cfg.read_from_replicas)
