"""replay_state: a replay is confirmed only when the whole dead-letter stream after it was searched."""

from __future__ import annotations

import pytest
import redis

from server.connections import Connections
from tests.remediation.conftest import GROUP, STREAM, settings_for
from tools.remediation.replays import replay_state

pytestmark = pytest.mark.anyio


async def _state(settings, new_id: str) -> tuple[str, str]:
    connections = Connections(settings)
    try:
        return await replay_state(connections.redis(), settings, STREAM, GROUP, new_id)
    finally:
        await connections.aclose()


async def test_a_long_dlq_after_the_replay_is_never_taken_for_confirmed(tmp_path, topology) -> None:
    redis_url, redis_client = topology.redis, topology.client  # the machine's Redis, then a cluster
    client: redis.Redis = redis_client
    client.xgroup_create(STREAM, GROUP, id="0", mkstream=True)
    replay = client.xadd(STREAM, {"id": "e1"}).decode()
    client.xreadgroup(GROUP, "c1", {STREAM: ">"})
    client.xack(STREAM, GROUP, replay)  # delivered and acknowledged...
    for i in range(3):  # ...while other messages were dead-lettered
        client.xadd(f"{STREAM}-dlq", {"messageId": f"1-{i}", "error": "other"})
    client.xadd(f"{STREAM}-dlq", {"messageId": replay, "error": "failed again"})  # ...and so was the replay
    wide = settings_for(tmp_path, None, redis_url)
    narrow = settings_for(tmp_path, None, redis_url, limits={"max_count": 1, "scan_max_iterations": 2})
    assert (await _state(wide, replay))[0] == "dead_lettered"
    state, why = await _state(narrow, replay)
    assert state == "unknown" and "not confirmed" in why
    client.delete(f"{STREAM}-dlq")
    assert (await _state(narrow, replay))[0] == "confirmed"
