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
import sys
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from server.config import Limits
from server.lazy_modules import LazyModule
from server.redis_settings import RedisConnectionSettings

if TYPE_CHECKING:
    import redis.asyncio as aioredis
    from redis.asyncio.sentinel import Sentinel
else:  # imported when the first client is built (see server/lazy_modules.py)
    aioredis = LazyModule("redis.asyncio")
_cluster = LazyModule("redis.asyncio.cluster")
_sentinel_mod = LazyModule("redis.asyncio.sentinel")
_backoff = LazyModule("redis.backoff")
_retry = LazyModule("redis.asyncio.retry")  # the asyncio Retry: a synchronous one warns (redis-py >= 8)

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
        "retry": _retry.Retry(_backoff.NoBackoff(), 0),
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
    return _sentinel_mod.Sentinel(hosts, sentinel_kwargs=sentinel_kwargs, **kwargs)


def build_clients(cfg: RedisConnectionSettings, limits: Limits) -> tuple[Any, Any]:
    """``(primary, reader)``: the client for writes and exact reads, and the one read tools use.

    The reader is the primary unless ``read_from_replicas`` is set.
    """
    if cfg.mode == "cluster":
        common = {**_deadlines(limits), **tls_kwargs(cfg), "decode_responses": False}
        primary = _cluster.RedisCluster.from_url(cfg.url, **common)
        if not cfg.read_from_replicas:
            return primary, primary
        from redis.cluster import LoadBalancingStrategy

        from server.replica_reads import ReplicaReadCluster

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


def replica_of(client: Any, key: str | bytes) -> Any:
    """The node a :class:`ReplicaReadCluster` reads ``key`` from (None for any other client)."""
    if not _is_replica_reader(client):
        return None
    from server.replica_reads import shard_reader

    return shard_reader(client.nodes_manager.slots_cache[client.keyslot(key)])


def _is_replica_reader(client: Any) -> bool:
    module = sys.modules.get("server.replica_reads")  # not imported yet: no replica reader exists
    return module is not None and isinstance(client, module.ReplicaReadCluster)


def is_cluster(client: Any) -> bool:
    cluster = sys.modules.get("redis.asyncio.cluster")  # not imported yet: no cluster client exists
    return cluster is not None and isinstance(client, cluster.RedisCluster)


async def scan_targets(client: Any) -> list[tuple[str, Any]]:
    """``[(node name, target)]`` a discovery SCANs: every primary of a cluster (a replica of each shard
    for a replica reader), else the client itself."""
    if not is_cluster(client):
        return [("", None)]
    if client._initialize:  # first command not sent yet: learn the topology
        await client.initialize()
    if _is_replica_reader(client):
        from server.replica_reads import shard_reader

        shards: dict[str, Any] = {}
        for nodes in client.nodes_manager.slots_cache.values():
            shards.setdefault(nodes[0].name, shard_reader(nodes))
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
