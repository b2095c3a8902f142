"""Sentinel and TLS-only Redis, through real MCP sessions: the tools find the keys, change nothing,
name the instance they read, and doctor describes the topology."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from server.config import Settings
from server.doctor import run_doctor
from server.runtime import Runtime
from tests.helpers import in_process_client
from tests.streams import scenario as sc_mod
from tests.streams.snapshot import differences, snapshot
from tests.topologies.servers import Sentinel, TlsRedis

pytestmark = pytest.mark.anyio


def sentinel_config(s: Sentinel, **extra: object) -> dict[str, object]:
    return {"url": "redis://ignored/0", "mode": "sentinel", "sentinels": [f"127.0.0.1:{s.sentinel_port}"],
            "service_name": s.service_name, **extra}


async def test_sentinel_primary_is_found_and_left_unchanged(
    sentinel: Sentinel, make_settings: Callable[..., Settings]
) -> None:
    primary = sentinel.primary()
    primary.flushdb()
    try:
        settings = make_settings(redis=sentinel_config(sentinel))
        sc = sc_mod.build(primary, settings.conventions, age=False)
        before = snapshot(primary)
        async with in_process_client(settings) as client:
            streams = await client.call_tool("list_streams", {})
            report = await client.call_tool("inspect_stream", {"detail": "full", "stream": sc_mod.STREAM})
            queue = await client.call_tool("inspect_queue", {"queue": sc_mod.QUEUE})
        assert not streams.is_error and not report.is_error and not queue.is_error, streams.content
        assert sc_mod.STREAM in {s["name"] for s in streams.structured_content["streams"]}
        assert report.structured_content["redis_source"] == {"instance": "default", "mode": "sentinel",
                                                             "replica": False}
        assert report.structured_content["length"] == 27
        assert "(Redis instance 'default', sentinel)" in report.content[0].text
        assert differences(before, snapshot(primary)) == []
        doctor = await _doctor(settings)
        assert doctor["redis"].status == "ok"
        assert f"127.0.0.1:{sentinel.primary_port}" in doctor["redis"].detail
        _ = sc
    finally:
        primary.flushdb()


async def test_sentinel_reads_from_the_replica_only_when_asked(
    sentinel: Sentinel, make_settings: Callable[..., Settings]
) -> None:
    primary, replica = sentinel.primary(), sentinel.replica()
    primary.flushdb()
    try:
        primary.xadd("stream:replicated", {"n": "1"})
        primary.wait(1, 5000)  # the replica has the entry before the tool reads it
        settings = make_settings(redis=sentinel_config(sentinel, read_from_replicas=True))
        calls_before = _xinfo_calls(replica)
        async with in_process_client(settings) as client:
            result = await client.call_tool("inspect_stream", {"detail": "full", "stream": "stream:replicated"})
        assert not result.is_error, result.content
        assert result.structured_content["redis_source"]["replica"] is True
        assert "replica, which may lag the primary" in result.content[0].text
        assert _xinfo_calls(replica) > calls_before  # the replica answered the reads
        doctor = await _doctor(settings)
        assert doctor["redis:replicas"].status == "warn"
    finally:
        primary.flushdb()


async def test_tls_only_redis(tls_redis: TlsRedis, make_settings: Callable[..., Settings]) -> None:
    client = tls_redis.client()
    client.flushdb()
    try:
        client.xadd("stream:secure", {"n": "1"})
        client.xgroup_create("stream:secure", "g", id="0")
        good = make_settings(redis={"url": tls_redis.url, "ssl_ca_certs": str(tls_redis.ca)})
        before = snapshot(client)
        async with in_process_client(good) as mcp:
            listed = await mcp.call_tool("list_streams", {})
            report = await mcp.call_tool("inspect_stream", {"detail": "full", "stream": "stream:secure"})
        assert not listed.is_error and not report.is_error, listed.content
        assert [s["name"] for s in listed.structured_content["streams"]] == ["stream:secure"]
        assert report.structured_content["groups"][0]["name"] == "g"
        assert differences(before, snapshot(client)) == []
        assert "TLS" in (await _doctor(good))["redis"].detail

        # no CA: the self-signed chain is refused, and the tool says which Redis failed, within its deadline
        unverified = make_settings(redis={"url": tls_redis.url})
        async with in_process_client(unverified) as mcp:
            refused = await mcp.call_tool("list_streams", {})
        assert refused.is_error and "certificate" in refused.content[0].text.lower()
        assert f"rediss://127.0.0.1:{tls_redis.port}" in refused.content[0].text

        # plain redis:// against the TLS port: an error naming the service, never a hang
        plain = make_settings(redis={"url": f"redis://127.0.0.1:{tls_redis.port}/0"},
                              limits={"redis_timeout_s": 1, "connect_timeout_s": 1})
        async with in_process_client(plain) as mcp:
            wrong = await mcp.call_tool("list_streams", {})
        assert wrong.is_error and "Redis at redis://127.0.0.1" in wrong.content[0].text
    finally:
        client.flushdb()
        client.close()


def _xinfo_calls(client: object) -> int:
    stats = client.info("commandstats")  # type: ignore[attr-defined]
    return sum(int(v["calls"]) for k, v in stats.items() if k.startswith("cmdstat_xinfo"))


async def _doctor(settings: Settings) -> dict[str, object]:
    runtime = Runtime(settings)
    try:
        report = await run_doctor(runtime)
    finally:
        await runtime.aclose()
    return {c.name: c for c in report.checks}
