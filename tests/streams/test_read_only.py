"""Every stream and queue tool leaves Redis byte-for-byte unchanged, and never sends a write.

The snapshot holds every key's DUMP (a stream's DUMP includes its groups, PELs with
delivery times and counts, and each consumer's seen time), its TTL presence, encoding
and content, and the streams' XINFO STREAM FULL (see tests/streams/snapshot.py for the
one exception Redis itself imposes: hash tables that are still rehashing). On the
private Redis 6.2 server, INFO commandstats also proves that no XREADGROUP, XCLAIM,
XACK, KEYS or other write ran while the tools did: every command sent is one of the read
commands the doctor checks (``tools.streams.doctor.USED_COMMANDS``), besides the client's
connection handshake. The calls cover every tool the stream and queue modules register.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from server.app import MeshServer
from server.config import Settings
from server.runtime import Runtime
from tests.helpers import in_process_client
from tests.streams import scenario as sc_mod
from tests.streams.conftest import Backend
from tests.streams.redis_servers import RedisProcess
from tests.streams.scenario import MAIN, ORPHAN, QUEUE, STREAM, USER_STREAM
from tests.streams.snapshot import WRITE_OR_FORBIDDEN, command_calls, differences, snapshot
from tools.queues import mcp_tools as queue_tools
from tools.streams import mcp_tools as stream_tools
from tools.streams.doctor import USED_COMMANDS

HANDSHAKE = {"hello", "client", "auth", "select", "ping"}
"""What redis-py sends when it opens a connection (HELLO, CLIENT SETINFO, ...)."""

pytestmark = pytest.mark.anyio


def calls(sc: sc_mod.Scenario) -> list[tuple[str, dict[str, Any]]]:
    return [
        ("inspect_stream", {"stream": STREAM}),
        ("inspect_stream", {"stream": STREAM + "-dlq"}),
        ("inspect_stream", {"stream": ORPHAN}),
        ("inspect_stream", {"stream": USER_STREAM}),
        ("list_pending", {"stream": STREAM, "group": MAIN}),
        ("list_pending", {"stream": STREAM, "group": MAIN, "consumer": "pp-dead", "min_idle_ms": 1, "count": 2}),
        ("dlq_list", {}),
        ("dlq_list", {"stream": STREAM, "count": 1}),
        ("dlq_list", {"type": sc_mod.USER_EVENT_TYPE, "contains": "timeout"}),
        ("list_streams", {"include_bullmq": True}),
        ("list_queues", {}),
        ("inspect_queue", {"queue": QUEUE}),
        ("inspect_queue", {"queue": QUEUE, "job_id": sc.jobs["failed"]}),
        ("inspect_queue", {"queue": QUEUE, "job_id": sc.jobs["wait"]}),
        ("inspect_queue", {"queue": QUEUE, "job_id": sc.jobs["removed"]}),
        ("inspect_queue", {"queue": sc_mod.FALLBACK_QUEUE}),
    ]


async def registered_tools(settings: Settings) -> set[str]:
    """The tools the stream and queue modules register (so a new tool cannot escape these tests)."""
    server = MeshServer("probe")  # the registrars name their result models by path: MeshServer reads them
    runtime = Runtime(settings)
    try:
        stream_tools.register(server, runtime)
        queue_tools.register(server, runtime)
        return {t.name for t in await server.list_tools()}
    finally:
        await runtime.aclose()


async def run_every_tool(settings: Settings, sc: sc_mod.Scenario) -> None:
    assert {name for name, _ in calls(sc)} == await registered_tools(settings)
    async with in_process_client(settings) as client:
        listed = {t.name for t in (await client.list_tools()).tools}
        for name, args in calls(sc):
            assert name in listed
            result = await client.call_tool(name, args)
            assert not result.is_error, (name, args, result.content)
            if "next_cursor" in (result.structured_content or {}) and result.structured_content["next_cursor"]:
                more = await client.call_tool(name, {**args, "cursor": result.structured_content["next_cursor"]})
                assert not more.is_error, (name, more.content)


async def test_every_tool_leaves_redis_unchanged(backend: Backend, settings_for: Callable[..., Settings]) -> None:
    settings = settings_for(backend)
    sc = sc_mod.build(backend.client, settings.conventions, age=False)
    before = snapshot(backend.client)
    await run_every_tool(settings, sc)
    after = snapshot(backend.client)
    assert len(before) >= 35 and {STREAM.encode(), f"bull:{QUEUE}:wait".encode()} <= before.keys()
    assert differences(before, after) == []


async def test_no_write_or_forbidden_command_reaches_redis(
    redis62: RedisProcess, settings_for: Callable[..., Settings]
) -> None:
    client = redis62.client(0)
    client.flushdb()
    try:
        backend = Backend(url=redis62.url(0), client=client, version="6.2")
        settings = settings_for(backend)
        sc = sc_mod.build(client, settings.conventions, age=False)
        before = command_calls(client)
        await run_every_tool(settings, sc)
        after = command_calls(client)
        ran = {name: after[name] - before.get(name, 0) for name in after if after[name] != before.get(name, 0)}
        assert {"xinfo", "xpending", "scan"} <= set(ran)
        assert [name for name in WRITE_OR_FORBIDDEN if ran.get(name)] == []
        assert sorted(set(ran) - HANDSHAKE - set(USED_COMMANDS)) == []
    finally:
        client.flushdb()
        client.close()
