"""Build the redis-py asyncio client of one Redis instance, whatever its topology.

- standalone: ``Redis.from_url``;
- cluster: ``RedisCluster.from_url`` (any node; the others are discovered). Per-key
  commands go to the key's slot; a non-transactional pipeline is split per node by
  redis-py; a WATCH/MULTI transaction must keep its keys in one slot (redis-py >= 6.2:
  async cluster transactions, ``CrossSlotTransactionError``). With ``read_from_replicas``
  the read client is a :class:`ReplicaReadCluster` (key reads and discovery SCANs on a
  replica of each shard);
- sentinel: ``Sentinel(...).master_for(service_name)`` (or ``slave_for`` for the read
  client when ``read_from_replicas``).

Every client keeps the deadlines of ``[limits]``: ``connect_timeout_s`` for connecting
and ``redis_timeout_s`` per command, no retry on timeout (a stalled server gives an
error within its deadline, never a hang). TLS options come from the ``ssl_*`` keys.
"""

from __future__ import annotations

import ssl
from typing import Any
from urllib.parse import unquote, urlsplit

import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.sentinel import Sentinel
from redis.backoff import NoBackoff
from redis.cluster import LoadBalancingStrategy
from redis.commands import READ_COMMANDS
from redis.retry import Retry

from server.config import Limits
from server.redis_settings import RedisConnectionSettings

_CERT_REQS = {"required": ssl.CERT_REQUIRED, "optional": ssl.CERT_OPTIONAL, "none": ssl.CERT_NONE}


def tls_kwargs(cfg: RedisConnectionSettings) -> dict[str, Any]:
    """The ``ssl_*`` keyword arguments of a TLS connection (empty without ``rediss://``)."""
    if not cfg.tls:
        return {}
    out: dict[str, Any] = {"ssl_cert_reqs": _CERT_REQS[cfg.ssl_cert_reqs]}
    if cfg.ssl_cert_reqs == "none":
        out["ssl_check_hostname"] = False
    for name in ("ssl_ca_certs", "ssl_certfile", "ssl_keyfile"):
        value = getattr(cfg, name)
        if value:
            out[name] = value
    return out


def _deadlines(limits: Limits) -> dict[str, Any]:
    return {
        "socket_connect_timeout": limits.connect_timeout_s,
        "socket_timeout": limits.redis_timeout_s,
        "retry": Retry(NoBackoff(), 0),
    }


def _url_parts(url: str) -> tuple[str | None, str | None, int]:
    """(username, password, db) of a redis URL (its host is not used in sentinel mode)."""
    parts = urlsplit(url)
    path = parts.path.strip("/")
    db = int(path) if path.isdigit() else 0
    return (unquote(parts.username) if parts.username else None,
            unquote(parts.password) if parts.password else None, db)


def _sentinel(cfg: RedisConnectionSettings, limits: Limits) -> Sentinel:
    username, password, db = _url_parts(cfg.url)
    sentinel_kwargs: dict[str, Any] = {
        "socket_connect_timeout": limits.connect_timeout_s, "socket_timeout": limits.redis_timeout_s,
    }
    if cfg.sentinel_password:
        sentinel_kwargs["password"] = cfg.sentinel_password
    if cfg.sentinel_tls:
        sentinel_kwargs.update({"ssl": True, **tls_kwargs(cfg.model_copy(update={"url": "rediss://x"}))})
    hosts = [(h, int(p)) for h, _, p in (s.rpartition(":") for s in cfg.sentinels)]
    kwargs: dict[str, Any] = {**_deadlines(limits), "db": db, "username": username, "password": password,
                              "decode_responses": False}
    if cfg.tls:
        kwargs.update({"ssl": True, **tls_kwargs(cfg)})
    return Sentinel(hosts, sentinel_kwargs=sentinel_kwargs, **kwargs)


def build_clients(cfg: RedisConnectionSettings, limits: Limits) -> tuple[Any, Any]:
    """``(primary, reader)``: the client for writes and exact reads, and the one read tools use.

    The reader is the primary unless ``read_from_replicas`` is set.
    """
    if cfg.mode == "cluster":
        common = {**_deadlines(limits), **tls_kwargs(cfg), "decode_responses": False}
        primary = RedisCluster.from_url(cfg.url, **common)
        if not cfg.read_from_replicas:
            return primary, primary
        # the strategy makes redis-py send READONLY on each connection; the routing is ReplicaReadCluster's
        strategy = LoadBalancingStrategy.ROUND_ROBIN_REPLICAS
        reader = ReplicaReadCluster.from_url(cfg.url, load_balancing_strategy=strategy, **common)
        return primary, reader
    if cfg.mode == "sentinel":
        sentinel = _sentinel(cfg, limits)
        primary = sentinel.master_for(cfg.service_name or "")
        reader = sentinel.slave_for(cfg.service_name or "") if cfg.read_from_replicas else primary
        return primary, reader
    client = aioredis.Redis.from_url(cfg.url, decode_responses=False, **_deadlines(limits), **tls_kwargs(cfg))
    return client, client


_REPLICA_READS = frozenset(READ_COMMANDS | {"XINFO"})
"""Key commands a replica reader sends to a replica: redis-py's read commands, plus XINFO, which redis-py
leaves on the primary (a report would otherwise mix the primary's XINFO with a replica's XPENDING)."""


class ReplicaReadCluster(RedisCluster):
    """The read client of a cluster with ``read_from_replicas``: every key read goes to the first replica
    of the key's shard (one node per shard, so every read of one report sees the same replica, TIME
    included: see :func:`replica_of`); to its primary only when the shard has no replica."""

    async def get_nodes_from_slot(self, command: str, *args: Any) -> list[Any]:
        if command.split(" ", 1)[0].upper() not in _REPLICA_READS:
            return await super().get_nodes_from_slot(command, *args)
        return [_shard_reader(self.nodes_manager.slots_cache[await self._determine_slot(command, *args)])]

    async def _execute_pipeline_by_slot(self, command: str, slots_to_args: Any) -> list[Any]:
        """Multi-key reads split per slot (``exists(k1, k2)``, ``mget_nonatomic``): on each slot's replica too."""
        if command.upper() not in _REPLICA_READS:
            return await super()._execute_pipeline_by_slot(command, slots_to_args)
        if self._initialize:
            await self.initialize()
        pipe = self.pipeline()
        for slot, slot_args in slots_to_args.items():
            node = _shard_reader(self.nodes_manager.slots_cache[slot])
            pipe.execute_command(command, *slot_args, target_nodes=[node])
        return await pipe.execute()


def _shard_reader(nodes: list[Any]) -> Any:
    return nodes[1] if len(nodes) > 1 else nodes[0]


def replica_of(client: Any, key: str | bytes) -> Any:
    """The node a :class:`ReplicaReadCluster` reads ``key`` from (None for any other client)."""
    if not isinstance(client, ReplicaReadCluster):
        return None
    return _shard_reader(client.nodes_manager.slots_cache[client.keyslot(key)])


def is_cluster(client: Any) -> bool:
    return isinstance(client, RedisCluster)


async def scan_targets(client: Any) -> list[tuple[str, Any]]:
    """``[(node name, target)]`` a discovery SCANs: every primary of a cluster (a replica of each shard
    for a replica reader), else the client itself."""
    if not is_cluster(client):
        return [("", None)]
    if client._initialize:  # first command not sent yet: learn the topology
        await client.initialize()
    if isinstance(client, ReplicaReadCluster):
        shards: dict[str, Any] = {}
        for nodes in client.nodes_manager.slots_cache.values():
            shards.setdefault(nodes[0].name, _shard_reader(nodes))
        return [(node.name, node) for node in sorted(shards.values(), key=lambda n: n.name)]
    return [(node.name, node) for node in sorted(client.get_primaries(), key=lambda n: n.name)]


def key_slot(client: Any, key: str | bytes) -> int | None:
    """The cluster slot of ``key`` (None when ``client`` is not a cluster client)."""
    if not is_cluster(client):
        return None
    return int(client.keyslot(key))


async def single_server_client(cfg: RedisConnectionSettings, limits: Limits) -> tuple[aioredis.Redis, str]:
    """A plain client of one primary and its ``host:port``, for doctor probes (INFO, COMMAND).

    standalone: the server of ``url``; cluster: the node of ``url``; sentinel: the primary
    the sentinels name for ``service_name`` (asking them now). The caller closes it.
    """
    if cfg.mode == "sentinel":
        sentinel = _sentinel(cfg, limits)
        try:
            host, port = await sentinel.discover_master(cfg.service_name or "")
        finally:
            for s in sentinel.sentinels:
                await s.aclose()
        username, password, db = _url_parts(cfg.url)
        extra = {"ssl": True, **tls_kwargs(cfg)} if cfg.tls else {}
        client = aioredis.Redis(host=host, port=int(port), db=db, username=username, password=password,
                                decode_responses=False, **_deadlines(limits), **extra)
        return client, f"{host}:{port}"
    client = aioredis.Redis.from_url(cfg.url, decode_responses=False, **_deadlines(limits), **tls_kwargs(cfg))
    kwargs = client.connection_pool.connection_kwargs
    where = kwargs.get("path") or f"{kwargs.get('host')}:{kwargs.get('port')}"
    return client, str(where)
