"""``read_from_replicas``: reads go to a replica only when asked, on a Redis Cluster and on a Sentinel.

Against real replicas (``redis-cli --cluster create --cluster-replicas 1``: three primaries
with one replica each; ``--replicaof`` under a Sentinel), ``INFO commandstats`` of every
node tells who answered. With the setting off, every stream and queue tool reads the
primaries and no replica sees a single read command; with it on, the replicas answer
every read (XINFO included, which redis-py alone would leave on the primary), no primary
sees one, and every result says it was read from a replica, which may lag the primary.
Nothing changes on any node either way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import redis

from server.config import Settings
from tests.helpers import in_process_client
from tests.streams import scenario as sc_mod
from tests.streams.conftest import merged
from tests.streams.scenario import SETTINGS, STREAM
from tests.streams.snapshot import WRITE_OR_FORBIDDEN, differences, snapshot
from tests.streams.test_read_only import calls
from tests.topologies.servers import Cluster, Sentinel
from tools.streams.doctor import USED_COMMANDS

pytestmark = pytest.mark.anyio

NOT_READS = {"hello", "client", "auth", "select", "ping", "cluster", "readonly", "command", "config", "replconf"}
"""Connection handshake, topology discovery, this test's CONFIG RESETSTAT and replication traffic."""
SENTINEL_TRAFFIC = {"info", "publish"}
"""What the Sentinel itself sends every server it watches (INFO every 10 s, PUBLISH of its hellos)."""
LAG_LINE = "read from a replica, which may lag the primary"


def _stats(port: int) -> dict[str, int]:
    """Calls per command (subcommands summed: ``xinfo|stream`` + ``xinfo|groups`` = ``xinfo``)."""
    out: dict[str, int] = {}
    with redis.Redis(port=port) as node:
        for name, row in node.info("commandstats").items():
            command = name.removeprefix("cmdstat_").split("|")[0]
            out[command] = out.get(command, 0) + int(row["calls"])
    return out


def _reads(port: int) -> dict[str, int]:
    return {name: n for name, n in _stats(port).items() if n and name not in NOT_READS}


def _reset(ports: list[int]) -> None:
    for port in ports:
        with redis.Redis(port=port) as node:
            node.config_resetstat()


async def _every_tool(settings: Settings, sc: sc_mod.Scenario) -> list[tuple[str, Any]]:
    results = []
    async with in_process_client(settings) as mcp:
        for name, args in calls(sc):
            result = await mcp.call_tool(name, args)
            assert not result.is_error, (name, args, result.content)
            results.append((name, result))
    return results


def _replica_of(cluster: Cluster) -> dict[int, int]:
    """primary port -> its replica's port."""
    out = {}
    for port in cluster.replica_ports:
        with redis.Redis(port=port) as node:
            out[int(node.info("replication")["master_port"])] = port
    return out


async def test_cluster_reads_go_to_replicas_only_when_asked(
    replicated_cluster: Cluster, make_settings: Callable[..., Settings]
) -> None:
    cluster = replicated_cluster
    client = cluster.client()
    client.flushall(target_nodes=redis.RedisCluster.PRIMARIES)
    try:
        sc = sc_mod.build(client, make_settings().conventions, age=False)
        for port in cluster.ports:  # every replica holds what its primary holds before the tools read
            with redis.Redis(port=port) as node:
                assert node.wait(1, 5000) == 1
        replica_of = _replica_of(cluster)
        home = client.get_node_from_key(STREAM).port
        assert set(replica_of) == set(cluster.ports) and home in replica_of
        before = snapshot(client)
        everyone = cluster.ports + cluster.replica_ports

        for asked in (False, True):
            settings = make_settings(**merged(SETTINGS, {"redis": {"url": cluster.url, "mode": "cluster",
                                                                  "read_from_replicas": asked}}))
            _reset(everyone)
            results = await _every_tool(settings, sc)
            readers = [replica_of[p] for p in cluster.ports] if asked else cluster.ports
            idle = cluster.ports if asked else cluster.replica_ports
            for port in idle:
                assert _reads(port) == {}, (asked, port, _reads(port))
            for port in readers:
                reads = _reads(port)
                assert "scan" in reads, (asked, port, reads)  # discovery walked this shard here
                assert [c for c in WRITE_OR_FORBIDDEN if reads.get(c)] == []
                assert sorted(set(reads) - set(USED_COMMANDS)) == []
            stream_reader = replica_of[home] if asked else home
            assert {"xinfo", "xpending", "xrange"} <= set(_reads(stream_reader))
            for name, result in results:
                source = result.structured_content.get("redis_source") or result.structured_content[
                    "redis_sources"][0]
                assert source["replica"] is asked, (name, source)
                assert (LAG_LINE in result.content[0].text) is asked, (name, result.content[0].text)
        assert differences(before, snapshot(client)) == []
    finally:
        client.flushall(target_nodes=redis.RedisCluster.PRIMARIES)
        client.close()


def _sentinel_config(s: Sentinel, asked: bool) -> dict[str, object]:
    return {"url": "redis://ignored/0", "mode": "sentinel", "sentinels": [f"127.0.0.1:{s.sentinel_port}"],
            "service_name": s.service_name, "read_from_replicas": asked}


async def test_sentinel_reads_go_to_the_replica_only_when_asked(
    sentinel: Sentinel, make_settings: Callable[..., Settings]
) -> None:
    primary = sentinel.primary()
    primary.flushdb()
    try:
        sc = sc_mod.build(primary, make_settings().conventions, age=False)
        assert primary.wait(1, 5000) == 1
        before = snapshot(primary)
        for asked in (False, True):
            settings = make_settings(**merged(SETTINGS, {"redis": _sentinel_config(sentinel, asked)}))
            _reset([sentinel.primary_port, sentinel.replica_port])
            results = await _every_tool(settings, sc)
            reader, idle = ((sentinel.replica_port, sentinel.primary_port) if asked
                            else (sentinel.primary_port, sentinel.replica_port))
            assert set(_reads(idle)) - SENTINEL_TRAFFIC == set(), (asked, _reads(idle))
            reads = _reads(reader)
            assert {"scan", "xinfo", "xpending", "xrange", "zcard"} <= set(reads), (asked, reads)
            assert sorted(set(reads) - set(USED_COMMANDS) - SENTINEL_TRAFFIC) == []
            for name, result in results:
                source = result.structured_content.get("redis_source") or result.structured_content[
                    "redis_sources"][0]
                assert source == {"instance": "default", "mode": "sentinel", "replica": asked}, (name, source)
                assert (LAG_LINE in result.content[0].text) is asked, (name, result.content[0].text)
        assert differences(before, snapshot(primary)) == []
    finally:
        primary.flushdb()
        primary.close()


async def test_doctor_names_the_shards_without_a_replica(
    replicated_cluster: Cluster, redis_cluster: Cluster, make_settings: Callable[..., Settings]
) -> None:
    """A shard without a replica is read on its primary: doctor names it (results cannot tell)."""
    from server.doctor import run_doctor
    from server.runtime import Runtime

    async def replicas_check(cluster: Cluster) -> Any:
        runtime = Runtime(make_settings(redis={"url": cluster.url, "mode": "cluster", "read_from_replicas": True}))
        try:
            report = await run_doctor(runtime)
        finally:
            await runtime.aclose()
        return next(c for c in report.checks if c.name == "redis:replicas")

    covered = await replicas_check(replicated_cluster)
    assert covered.status == "warn" and "every shard has a replica" in covered.detail, covered.detail
    bare = await replicas_check(redis_cluster)
    assert bare.status == "warn" and "have no replica" in bare.detail, bare.detail
    assert all(f"127.0.0.1:{port}" in bare.detail for port in redis_cluster.ports)
    assert "add a replica to each shard" in (bare.fix or "")
