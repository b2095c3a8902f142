"""Doctor checks of the stream and queue tools: Redis version, commands, eviction policy.

- ``redis-streams:version``: 6.2 or later is needed for ``XPENDING ... IDLE`` (``list_pending``
  ``min_idle_ms``, the stale-lock sample of ``inspect_stream``); ``SCAN ... TYPE`` needs 6.0.
  Whether the group lag is reported by Redis (7.0+) or estimated is stated.
- ``redis-streams:commands``: ``COMMAND INFO`` of every command the tools send; a command
  renamed or disabled in the server's config shows up here instead of as a tool error.
- ``redis-streams:memory``: with a ``maxmemory`` limit, any policy other than ``noeviction``
  can evict streams, dead letters, retry keys and idempotency locks (BullMQ requires
  ``noeviction`` too).
"""

from __future__ import annotations

from typing import Any

import redis.asyncio as aioredis

from server.checks import Check
from server.errors import MeshError
from server.redis_clients import single_server_client
from server.redis_settings import DEFAULT_INSTANCE
from server.runtime import Runtime
from tools.streams.server_features import MIN_SUPPORTED, server_from_info
from tools.streams.values import as_int, text

USED_COMMANDS = (
    "type", "info", "time", "scan", "xinfo", "xpending", "xrange", "xrevrange", "xlen", "zrange", "zscore",
    "zmscore", "zcard", "zrevrange", "pttl", "ttl", "exists", "get", "mget", "getrange", "llen", "lindex", "lpos",
    "hget", "hmget", "hgetall", "hlen", "hstrlen", "lrange", "client",
)
"""Every command the stream and queue tools (and the outbox traces) send; the read-only test
checks that the tools send nothing else."""


async def checks(runtime: Runtime) -> list[Check]:
    """The checks of each Redis instance (on a cluster: of the node its url names)."""
    out: list[Check] = []
    for instance in runtime.settings.redis.instance_names():
        out += await _instance_checks(runtime, instance)
    return out


async def _instance_checks(runtime: Runtime, instance: str) -> list[Check]:
    conn = runtime.connections
    suffix = "" if instance == DEFAULT_INSTANCE else f"[{instance}]"
    client: aioredis.Redis | None = None
    try:
        async with conn.redis_errors(instance):
            # a plain client of one primary whose COMMAND replies stay raw (redis-py's parser rejects unknown ones)
            client, _ = await single_server_client(runtime.settings.redis.instance(instance), runtime.settings.limits)
            client.set_response_callback("COMMAND", lambda response, **_: response)
            info: dict[str, Any] = await client.info("server")
            memory: dict[str, Any] = await client.info("memory")
            commands = await client.execute_command("COMMAND", "INFO", *USED_COMMANDS)
    except MeshError as exc:
        return [Check(name=f"redis-streams{suffix}", status="warn", detail=f"skipped: {exc}",
                      fix="see the redis check above")]
    finally:
        if client is not None:
            await client.aclose()
    found = [_version_check(info), _commands_check(commands), _memory_check(memory)]
    return [c.model_copy(update={"name": c.name + suffix}) for c in found]


def _version_check(info: dict[str, Any]) -> Check:
    server = server_from_info(info)
    lag = "reported by Redis" if server.has_group_lag else "estimated (XINFO GROUPS has no lag before Redis 7.0)"
    if server.version_tuple < (6, 0, 0):
        return Check(name="redis-streams:version", status="fail",
                     detail=f"Redis {server.version}: SCAN ... TYPE is missing (list_streams, dlq_list)",
                     fix="upgrade Redis to 6.2 or later")
    if server.version_tuple < MIN_SUPPORTED:
        return Check(name="redis-streams:version", status="warn",
                     detail=f"Redis {server.version}: no XPENDING IDLE / XAUTOCLAIM (list_pending min_idle_ms and "
                     "the stale-lock sample of inspect_stream are unavailable)",
                     fix="upgrade Redis to 6.2 or later")
    inactive = "consumer inactive time reported" if server.has_consumer_inactive else "no consumer inactive time"
    return Check(name="redis-streams:version", status="ok",
                 detail=f"Redis {server.version}: XPENDING IDLE and XAUTOCLAIM available; group lag {lag}; {inactive}")


def _commands_check(reply: list[Any] | None) -> Check:
    if reply is None:
        missing = list(USED_COMMANDS)
    else:
        missing = [name for name, entry in zip(USED_COMMANDS, reply, strict=False) if entry is None]
    if missing:
        return Check(name="redis-streams:commands", status="fail",
                     detail="commands missing or renamed on this server: " + ", ".join(m.upper() for m in missing),
                     fix="re-enable them (rename-command in redis.conf) or give mesh-mcp a server where they exist")
    return Check(name="redis-streams:commands", status="ok",
                 detail=f"all {len(USED_COMMANDS)} read commands the stream and queue tools use are available")


def _memory_check(memory: dict[str, Any]) -> Check:
    limit = as_int(memory.get("maxmemory")) or 0
    policy = text(memory.get("maxmemory_policy")) or "unknown"
    if limit == 0:
        return Check(name="redis-streams:memory", status="ok", detail=f"no maxmemory limit (policy {policy})")
    if policy == "noeviction":
        return Check(name="redis-streams:memory", status="ok",
                     detail=f"maxmemory {limit} bytes with noeviction: writes fail rather than keys vanish")
    what = ("any key, streams and dead letters included" if policy.startswith("allkeys")
            else "keys with a TTL: idempotency locks and retry keys can vanish early (duplicate processing)")
    return Check(name="redis-streams:memory", status="warn",
                 detail=f"maxmemory {limit} bytes with policy {policy}: Redis may evict {what}",
                 fix="set maxmemory-policy noeviction (BullMQ requires it too)")
