"""Promise: a command Redis refuses is an error the tool reports, never a silent success.

``Connections.redis_errors`` translates redis-py failures into the server's errors; each
kind is provoked here on a real Redis (an invalid stream id, a key of the wrong type) and
the code after the refused command in the same block must not run.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from server.config import Settings
from server.connections import Connections
from server.errors import InvalidArgument, MeshError

pytestmark = pytest.mark.anyio


async def test_a_refused_command_raises_and_stops_the_block(make_settings: Callable[..., Settings],
                                                            redis_url: str) -> None:
    connections = Connections(make_settings(redis={"url": redis_url}))
    after: list[str] = []
    try:
        with pytest.raises(MeshError) as info:
            async with connections.redis_errors():
                await connections.redis().xadd("s:refused", {"f": "v"}, id="not-an-id")
                after.append("ran")
        assert not isinstance(info.value, InvalidArgument)
        assert str(info.value).startswith("Redis refused a command: ")
        assert "Invalid stream ID" in str(info.value)
        assert after == []
        assert await connections.redis().exists("s:refused") == 0
    finally:
        await connections.aclose()


async def test_a_key_of_the_wrong_type_is_an_invalid_argument(make_settings: Callable[..., Settings],
                                                              redis_url: str) -> None:
    connections = Connections(make_settings(redis={"url": redis_url}))
    after: list[str] = []
    try:
        await connections.redis().set("s:plain", "x")
        with pytest.raises(InvalidArgument) as info:
            async with connections.redis_errors():
                await connections.redis().xlen("s:plain")
                after.append("ran")
        assert str(info.value).startswith("WRONGTYPE")
        assert str(info.value).endswith(": the key exists but is not of the expected type")
        assert after == []
    finally:
        await connections.aclose()
