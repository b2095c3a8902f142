"""list_streams and list_queues: bounded SCAN ... TYPE, kinds, joins, iteration cap."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from server.config import Settings
from server.connections import Connections
from server.errors import InvalidArgument
from tests.helpers import in_process_client
from tests.streams import scenario as sc_mod
from tests.streams.conftest import Backend
from tests.streams.scenario import FALLBACK_QUEUE, MAIN, ORPHAN, QUEUE, STREAM, USER_STREAM
from tools.queues.discovery import list_queues
from tools.streams.discovery import list_streams

pytestmark = pytest.mark.anyio


async def test_list_streams_names_kinds_and_joins(backend: Backend, settings_for: Callable[..., Settings]) -> None:
    settings = settings_for(backend)
    sc_mod.build(backend.client, settings.conventions, age=False)
    async with in_process_client(settings) as client:
        plain = await client.call_tool("list_streams", {})
        with_bull = await client.call_tool("list_streams", {"include_bullmq": True})
        only_user = await client.call_tool("list_streams", {"match": "stream:user:*"})
    assert not plain.is_error, plain.content
    streams = {s["name"]: s for s in plain.structured_content["streams"]}
    assert list(streams) == sorted([STREAM, STREAM + "-dlq", ORPHAN, USER_STREAM, USER_STREAM + "-dlq"])
    assert plain.structured_content["scan_complete"] and plain.structured_content["total_found"] == 5
    main = streams[STREAM]
    assert (main["kind"], main["length"], main["groups"], main["pending"], main["dead_letters"]) == (
        "stream", 27, ["pp-lag", MAIN, "pp-ok"], 7, 3)
    assert streams[STREAM + "-dlq"]["kind"] == "dlq" and streams[STREAM + "-dlq"]["length"] == 3
    assert streams[ORPHAN]["groups"] == [] and streams[ORPHAN]["dead_letters"] is None
    bull = [s for s in with_bull.structured_content["streams"] if s["kind"] == "bullmq_events"]
    assert [s["name"] for s in bull] == [f"bull:{QUEUE}:events"]
    assert [s["name"] for s in only_user.structured_content["streams"]] == [USER_STREAM, USER_STREAM + "-dlq"]
    assert STREAM in plain.content[0].text


async def test_scan_iteration_cap_and_limit_are_reported(
    machine: Backend, settings_for: Callable[..., Settings]
) -> None:
    pipe = machine.client.pipeline()
    for n in range(2000):
        pipe.set(f"noise:{n}", "x")
    for n in range(30):
        pipe.xadd(f"stream:s{n:02d}", {"n": str(n)})
    pipe.execute()
    conns = Connections(capped := settings_for(machine, limits={"scan_count": 10, "scan_max_iterations": 2}))
    full_settings = settings_for(machine)
    try:
        partial = await list_streams(conns, capped)
        assert partial.scan_complete is False and partial.scan_iterations == 2
        assert partial.total_found < 30
        conns2 = Connections(full_settings)
        try:
            whole = await list_streams(conns2, full_settings, limit=10)
            with pytest.raises(InvalidArgument, match="limit must be"):
                await list_streams(conns2, full_settings, limit=0)
            with pytest.raises(InvalidArgument, match="SCAN glob"):
                await list_streams(conns2, full_settings, match="a\nb")
        finally:
            await conns2.aclose()
    finally:
        await conns.aclose()
    assert whole.scan_complete and whole.total_found == 30 and whole.truncated
    assert [s.name for s in whole.streams] == [f"stream:s{n:02d}" for n in range(10)]


async def test_list_queues_finds_queues_not_jobs(backend: Backend, settings_for: Callable[..., Settings]) -> None:
    settings = settings_for(backend)
    sc_mod.build(backend.client, settings.conventions, age=False)
    async with in_process_client(settings) as client:
        result = await client.call_tool("list_queues", {})
        fallback_only = await client.call_tool("list_queues", {"match": "fallback-*"})
    assert not result.is_error, result.content
    queues = {q["name"]: q for q in result.structured_content["queues"]}
    assert list(queues) == [QUEUE, FALLBACK_QUEUE]  # sorted by name
    assert queues[QUEUE]["counts"] == {"wait": 3, "active": 1, "paused": 1, "delayed": 1, "prioritized": 1,
                                       "waiting-children": 1, "failed": 2, "completed": 1}
    assert queues[QUEUE]["paused"] is False
    assert queues[FALLBACK_QUEUE]["paused"] is True and not any(queues[FALLBACK_QUEUE]["counts"].values())
    assert [q["name"] for q in fallback_only.structured_content["queues"]] == [FALLBACK_QUEUE]


async def test_list_queues_with_another_prefix(
    machine_or_cluster: Backend, settings_for: Callable[..., Settings]
) -> None:
    machine = machine_or_cluster  # the machine's Redis, then the cluster
    machine.client.set("bull:old-queue:id", 3)
    machine.client.rpush("jobs:new-queue:wait", "1")
    settings = settings_for(machine, conventions={"bullmq_prefix": "jobs"})
    conns = Connections(settings)
    try:
        found = await list_queues(conns, settings)
    finally:
        await conns.aclose()
    assert [q.name for q in found.queues] == ["new-queue"] and found.prefix == "jobs"
    assert found.queues[0].counts["wait"] == 1
