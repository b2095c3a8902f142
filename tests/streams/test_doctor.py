"""Doctor checks of the stream tools on Redis 7, Redis 6.2, an evicting Redis and no Redis."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from server.config import Settings
from server.demo.embedded import free_port
from server.doctor import run_doctor
from server.runtime import Runtime
from tests.streams.conftest import Backend
from tests.streams.redis_servers import start_redis
from tools.streams import doctor

pytestmark = pytest.mark.anyio


async def run(settings: Settings) -> dict[str, doctor.Check]:
    runtime = Runtime(settings)
    try:
        return {c.name: c for c in await doctor.checks(runtime)}
    finally:
        await runtime.aclose()


async def test_version_commands_and_memory(backend: Backend, settings_for: Callable[..., Settings]) -> None:
    checks = await run(settings_for(backend))
    assert set(checks) == {"redis-streams:version", "redis-streams:commands", "redis-streams:memory"}
    assert all(c.status == "ok" for c in checks.values()), checks
    version = checks["redis-streams:version"].detail
    assert backend.version in version
    if backend.version.startswith("6."):
        assert "group lag estimated" in version
    else:
        assert "group lag reported by Redis" in version


async def test_eviction_policy_is_warned(make_settings: Callable[..., Settings]) -> None:
    server = start_redis("--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru")
    try:
        checks = await run(make_settings(redis={"url": server.url(0)}))
    finally:
        server.stop()
    memory = checks["redis-streams:memory"]
    assert memory.status == "warn" and "allkeys-lru" in memory.detail and "noeviction" in (memory.fix or "")


async def test_renamed_command_fails_the_check(make_settings: Callable[..., Settings]) -> None:
    server = start_redis("--rename-command", "XPENDING", "")
    try:
        checks = await run(make_settings(redis={"url": server.url(0)}))
    finally:
        server.stop()
    assert checks["redis-streams:commands"].status == "fail"
    assert "XPENDING" in checks["redis-streams:commands"].detail


async def test_unreachable_redis_is_skipped_not_crashed(make_settings: Callable[..., Settings]) -> None:
    settings = make_settings(redis={"url": f"redis://127.0.0.1:{free_port()}/0"}, limits={"connect_timeout_s": 0.5})
    checks = await run(settings)
    assert list(checks) == ["redis-streams"] and checks["redis-streams"].status == "warn"
    runtime = Runtime(settings)
    try:
        report = await run_doctor(runtime)
    finally:
        await runtime.aclose()
    assert not report.ok  # the core redis check fails; ours only adds a skip
