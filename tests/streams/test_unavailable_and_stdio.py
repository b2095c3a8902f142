"""Redis down or password-protected: clear tool errors. And the tools over a stdio subprocess."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from server.config import Conventions, Settings
from server.demo.embedded import free_port
from tests.helpers import in_process_client, stdio_client
from tests.streams import scenario as sc_mod
from tests.streams.conftest import Backend
from tests.streams.redis_servers import RedisProcess, start_redis
from tests.streams.scenario import MAIN, QUEUE, SETTINGS, STREAM

pytestmark = pytest.mark.anyio

EVERY_TOOL = [
    ("inspect_stream", {"stream": STREAM}),
    ("list_pending", {"stream": STREAM, "group": MAIN}),
    ("dlq_list", {}),
    ("list_streams", {}),
    ("list_queues", {}),
    ("inspect_queue", {"queue": QUEUE}),
]


@pytest.fixture
def protected_redis() -> Iterator[RedisProcess]:
    server = start_redis(password="s3cret-pw")
    yield server
    server.stop()


async def test_redis_down_gives_a_clear_error(make_settings: Callable[..., Settings]) -> None:
    settings = make_settings(redis={"url": f"redis://127.0.0.1:{free_port()}/0"},
                             limits={"connect_timeout_s": 0.5})
    async with in_process_client(settings) as client:
        for name, args in EVERY_TOOL:
            result = await client.call_tool(name, args)
            assert result.is_error, name
            text = result.content[0].text
            assert "Redis at redis://127.0.0.1:" in text and "is unavailable" in text, (name, text)
            assert "Traceback" not in text


async def test_password_needed_but_not_configured(
    protected_redis: RedisProcess, make_settings: Callable[..., Settings]
) -> None:
    settings = make_settings(redis={"url": protected_redis.url(0, with_password=False)})
    async with in_process_client(settings) as client:
        for name, args in EVERY_TOOL:
            result = await client.call_tool(name, args)
            assert result.is_error, name
            assert "a password is required" in result.content[0].text and "[redis] url" in result.content[0].text, name


async def test_wrong_password_and_right_password(
    protected_redis: RedisProcess, make_settings: Callable[..., Settings]
) -> None:
    wrong = make_settings(redis={"url": f"redis://:nope@127.0.0.1:{protected_redis.port}/0"})
    async with in_process_client(wrong) as client:
        result = await client.call_tool("list_streams", {})
    assert result.is_error
    assert "authentication failed" in result.content[0].text or "password" in result.content[0].text
    assert "nope" not in result.content[0].text  # the password is never echoed

    protected_redis.client(0).xadd("stream:p", {"a": "1"})
    right = make_settings(redis={"url": protected_redis.url(0)})
    async with in_process_client(right) as client:
        result = await client.call_tool("list_streams", {})
    assert not result.is_error
    assert [s["name"] for s in result.structured_content["streams"]] == ["stream:p"]


async def test_tools_over_stdio(machine: Backend, mesh_config: Callable[..., Path]) -> None:
    sc = sc_mod.build(machine.client, Conventions(), age=True)
    config = mesh_config({**SETTINGS, "redis": {"url": machine.url}})
    async with stdio_client(config) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert {"inspect_stream", "list_pending", "dlq_list", "list_streams", "inspect_queue",
                "list_queues"} <= names
        inspected = await client.call_tool("inspect_stream", {"detail": "full", "stream": STREAM})
        dead = await client.call_tool("dlq_list", {"stream": STREAM, "count": 1})
        queue = await client.call_tool("inspect_queue", {"queue": QUEUE, "job_id": sc.jobs["failed"]})
    assert not inspected.is_error, inspected.content
    assert {a["code"] for a in inspected.structured_content["anomalies"]} >= {
        "dead_consumer", "trimmed_pending", "stale_idempotency_lock", "dlq_not_empty"}
    assert dead.structured_content["entries"][0]["message_id"] == sc.ids[12]
    assert dead.structured_content["next_cursor"] is not None
    job = queue.structured_content["job"]
    assert (job["state"], job["attempts_made"], job["failed_reason"]) == ("failed", 3, "EntityNotFound: event e-8")
