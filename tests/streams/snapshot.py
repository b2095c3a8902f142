"""A byte-exact picture of a Redis database, to prove the tools changed nothing.

Every key found by SCAN is recorded with its ``TYPE``, its ``DUMP`` (the serialized
value; for a stream it includes the consumer groups, their PELs with delivery times and
counts, and each consumer's seen time), whether it has a TTL, its object encoding, and
its content read back in a canonical order. Streams also get ``XINFO STREAM ... FULL``.

:func:`differences` requires identical DUMPs, with one exception that is Redis's own:
a value stored as a real hash table (``hashtable`` encoding: a hash or set with a long
field) may still be *incrementally rehashing*, and every lookup, including a plain
``HGET``, moves that rehash one bucket forward, which reorders the DUMP bytes without
changing a single field. For those keys the canonical content must be identical
instead. Streams, lists, strings and compact encodings are always compared by DUMP.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import redis


@dataclass(frozen=True)
class KeyState:
    kind: bytes
    dump: bytes | None
    ttl_set: bool
    encoding: bytes | None
    content: Any


def _content(client: redis.Redis, key: bytes, kind: bytes) -> Any:
    if kind == b"string":
        return client.get(key)
    if kind == b"hash":
        return sorted(client.hgetall(key).items())
    if kind == b"set":
        return sorted(client.smembers(key))
    if kind == b"zset":
        return client.zrange(key, 0, -1, withscores=True)
    if kind == b"list":
        return client.lrange(key, 0, -1)
    if kind == b"stream":
        return repr(client.xinfo_stream(key, full=True))
    return None


def snapshot(client: redis.Redis | redis.RedisCluster) -> dict[bytes, KeyState]:
    """Every key of ``client``; for a cluster, every key of every primary (read node by node)."""
    if isinstance(client, redis.RedisCluster):
        out: dict[bytes, KeyState] = {}
        for node in client.get_primaries():
            with redis.Redis(host=node.host, port=node.port) as node_client:
                out.update(_snapshot_node(node_client))
        return out
    return _snapshot_node(client)


def _snapshot_node(client: redis.Redis) -> dict[bytes, KeyState]:
    out: dict[bytes, KeyState] = {}
    for key in client.scan_iter(count=1000):
        kind = client.type(key)
        out[key] = KeyState(
            kind=kind,
            dump=client.dump(key),
            ttl_set=client.pttl(key) >= 0,
            encoding=client.object("encoding", key),
            content=_content(client, key, kind),
        )
    return out


def differences(before: dict[bytes, KeyState], after: dict[bytes, KeyState]) -> list[str]:
    """What changed between two snapshots (empty when nothing did)."""
    found = [f"key appeared: {k!r}" for k in after.keys() - before.keys()]
    found += [f"key vanished: {k!r}" for k in before.keys() - after.keys()]
    for key in before.keys() & after.keys():
        old, new = before[key], after[key]
        if (old.kind, old.ttl_set, old.content, old.encoding) != (new.kind, new.ttl_set, new.content, new.encoding):
            found.append(f"changed: {key!r}")
        elif old.dump != new.dump and not (old.kind in (b"hash", b"set") and old.encoding == b"hashtable"):
            found.append(f"serialization changed: {key!r}")
    return sorted(found)


def command_calls(client: redis.Redis) -> dict[str, int]:
    """``INFO commandstats`` as ``{command: calls}``."""
    stats = client.info("commandstats")
    return {name.removeprefix("cmdstat_"): int(value["calls"]) for name, value in stats.items()}


WRITE_OR_FORBIDDEN = (
    "xreadgroup", "xread", "xclaim", "xautoclaim", "xack", "xadd", "xdel", "xtrim", "xgroup", "keys", "set", "del",
    "expire", "pexpire", "persist", "hset", "zadd", "zrem", "lpush", "rpush", "lpop", "rpop", "lmove", "unlink",
    "flushdb", "flushall", "eval", "evalsha",
)
