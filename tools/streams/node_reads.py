"""Reads that must go to one server, the same way on a standalone Redis and on a cluster.

``INFO`` and ``TIME`` name no key: in a cluster pipeline redis-py refuses them, and a
bare call may answer from any node. :func:`server_facts` asks the node that owns the
key being inspected (its primary, or the replica a ``read_from_replicas`` reader reads it from), so
the version and the clock are those of the server that answers the reads.
Multi-key commands (``MGET``, ``EXISTS k1 k2``) refuse keys of different slots on a
cluster: :func:`queue_get_each` / :func:`queue_exists_each` queue one command per key,
which a cluster pipeline sends to each key's node (one round trip per node), and a
standalone pipeline in one round trip.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from server.redis_clients import is_cluster, replica_of


async def server_facts(redis: Any, key: str) -> tuple[dict[str, Any], Any]:
    """``(INFO server, TIME)`` of the server holding ``key``."""
    if is_cluster(redis):
        node = await key_node(redis, key)
        info = await redis.info("server", target_nodes=node)
        now = await redis.time(target_nodes=node)
        return info, now
    pipe = redis.pipeline(transaction=False)
    pipe.info("server")
    pipe.time()
    info, now = await pipe.execute()
    return info, now


async def server_time(redis: Any, key: str) -> Any:
    """``TIME`` of the server holding ``key``."""
    if is_cluster(redis):
        return await redis.time(target_nodes=await key_node(redis, key))
    return await redis.time()


async def key_node(redis: Any, key: str) -> Any:
    """The node of a cluster that ``key``'s reads go to (learning the topology first if needed): the primary
    owning its slot, or for a replica reader (``read_from_replicas``) the replica its reads go to."""
    if redis._initialize:
        await redis.initialize()
    return replica_of(redis, key) or redis.get_node_from_key(key)


def queue_get_each(pipe: Any, keys: Sequence[str]) -> int:
    """Queue ``GET`` of each key (an ``MGET`` that works across slots); returns how many replies follow."""
    for key in keys:
        pipe.get(key)
    return len(keys)


def queue_exists_each(pipe: Any, keys: Sequence[str]) -> int:
    """Queue ``EXISTS`` of each key; sum the replies for the multi-key count."""
    for key in keys:
        pipe.exists(key)
    return len(keys)
