"""On a three-primary Redis Cluster every read tool sees the keys of every node and sends no write.

The scenario's keys spread over the three primaries by slot. After every stream and queue
tool ran (the same calls as tests/streams/test_read_only.py, which also runs on this
cluster and compares the DUMP of every key on every node), ``INFO commandstats`` of each
node shows that each primary was SCANned, and that no write or forbidden command
(XREADGROUP, XACK, KEYS, ...) reached any of them.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from server.config import Settings
from tests.helpers import in_process_client
from tests.streams import scenario as sc_mod
from tests.streams.conftest import Backend
from tests.streams.snapshot import WRITE_OR_FORBIDDEN, command_calls, differences, snapshot
from tests.streams.test_read_only import run_every_tool
from tools.streams.doctor import USED_COMMANDS

pytestmark = pytest.mark.anyio

HANDSHAKE = {"hello", "client", "auth", "select", "ping", "cluster", "readonly", "command", "info"}
"""What redis-py's cluster client sends to learn the topology (CLUSTER SLOTS, COMMAND, ...)."""


def _calls(nodes: list) -> list[dict[str, int]]:
    return [{k.split("|")[0]: v for k, v in command_calls(n).items()} for n in nodes]


async def test_every_tool_reads_every_node_and_writes_none(
    cluster_backend: Backend, settings_for: Callable[..., Settings]
) -> None:
    settings = settings_for(cluster_backend)
    sc = sc_mod.build(cluster_backend.client, settings.conventions, age=False)
    nodes = cluster_backend.node_clients()
    assert len(nodes) == 3 and all(n.dbsize() > 0 for n in nodes)  # the keys really are on every node
    before_keys = snapshot(cluster_backend.client)
    for n in nodes:
        n.config_resetstat()
    try:
        await run_every_tool(settings, sc)
        ran = []
        for stats in _calls(nodes):
            ran.append({name: calls for name, calls in stats.items() if calls})
    finally:
        for n in nodes:
            n.close()
    assert differences(before_keys, snapshot(cluster_backend.client)) == []
    for per_node in ran:
        assert "scan" in per_node  # discovery walked this primary
        assert [name for name in WRITE_OR_FORBIDDEN if per_node.get(name)] == []
        assert sorted(set(per_node) - HANDSHAKE - set(USED_COMMANDS) - {"config"}) == []


async def test_discovery_lists_keys_of_every_node(
    cluster_backend: Backend, settings_for: Callable[..., Settings]
) -> None:
    client = cluster_backend.client
    names = [f"stream:node-spread:{n}" for n in range(30)]
    for name in names:
        client.xadd(name, {"n": "1"})
    queues = [f"q{n}" for n in range(12)]
    for q in queues:
        client.set(f"bull:{q}:id", 1)
    homes = {client.get_node_from_key(n).name for n in names}
    assert len(homes) == 3
    settings = settings_for(cluster_backend)
    async with in_process_client(settings) as mcp:
        streams = await mcp.call_tool("list_streams", {"match": "stream:node-spread:*"})
        listed = await mcp.call_tool("list_queues", {})
        dlq = await mcp.call_tool("dlq_list", {})
    assert not streams.is_error and not listed.is_error and not dlq.is_error
    assert sorted(s["name"] for s in streams.structured_content["streams"]) == sorted(names)
    assert streams.structured_content["scan_nodes"] == 3 and streams.structured_content["scan_complete"]
    assert sorted(q["name"] for q in listed.structured_content["queues"]) == sorted(queues)
    assert listed.structured_content["redis_sources"][0]["mode"] == "cluster"
