"""The read client of a Redis Cluster with ``read_from_replicas``: key reads on a replica of each shard.

Its own module because it subclasses redis-py's cluster client at import time: server/redis_clients.py
imports it only when such a reader is built, so start-up does not import redis (see server/lazy_modules.py).
"""

from __future__ import annotations

from typing import Any

from redis.asyncio.cluster import RedisCluster
from redis.commands import READ_COMMANDS

_REPLICA_READS = frozenset(READ_COMMANDS | {"XINFO"})
"""Key commands a replica reader sends to a replica: redis-py's read commands, plus XINFO, which redis-py
leaves on the primary (a report would otherwise mix the primary's XINFO with a replica's XPENDING)."""


class ReplicaReadCluster(RedisCluster):
    """The read client of a cluster with ``read_from_replicas``: every key read goes to the first replica
    of the key's shard (one node per shard, so every read of one report sees the same replica, TIME
    included: see :func:`replica_of`); to its primary only when the shard has no replica."""

    async def get_nodes_from_slot(self, command: str, *args: Any) -> list[Any]:
        if not is_replica_read(command):
            return await super().get_nodes_from_slot(command, *args)
        return [shard_reader(self.nodes_manager.slots_cache[await self._determine_slot(command, *args)])]

    async def _get_node_from_slot(self, command: str, slot: int) -> Any:
        """redis-py >= 8.2 routes a keyed command whose slot it already computed here, not through
        :meth:`get_nodes_from_slot` (XINFO reached the primary): the same choice of node."""
        if not is_replica_read(command):
            return await super()._get_node_from_slot(command, slot)  # type: ignore[misc]
        return shard_reader(self.nodes_manager.slots_cache[slot])

    async def _is_replica_safe(self, command: str) -> bool:
        """redis-py >= 8.2 asks this on its other routes (a retry after MOVED, per-slot pipelines): our reads
        are replica reads there too (the load-balancing strategy then picks one of the shard's replicas)."""
        if is_replica_read(command):
            return True
        return await super()._is_replica_safe(command)  # type: ignore[misc]

    async def _execute_pipeline_by_slot(self, command: str, slots_to_args: Any) -> list[Any]:
        """Multi-key reads split per slot (``exists(k1, k2)``, ``mget_nonatomic``): on each slot's replica too."""
        if not is_replica_read(command):
            return await super()._execute_pipeline_by_slot(command, slots_to_args)
        if self._initialize:
            await self.initialize()
        pipe = self.pipeline()
        for slot, slot_args in slots_to_args.items():
            node = shard_reader(self.nodes_manager.slots_cache[slot])
            pipe.execute_command(command, *slot_args, target_nodes=[node])
        return await pipe.execute()


def is_replica_read(command: str) -> bool:
    """``command`` (``XINFO STREAM``, ``xpending``, ...) is a key read this client sends to a replica."""
    return str(command).split(" ", 1)[0].upper() in _REPLICA_READS


def shard_reader(nodes: list[Any]) -> Any:
    return nodes[1] if len(nodes) > 1 else nodes[0]
