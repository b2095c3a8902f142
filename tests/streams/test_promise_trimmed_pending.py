"""Promise: ``inspect_stream`` calls a pending entry trimmed only with evidence (its id is older than the
stream's first entry), on Redis 7 and 6.2; a pending entry deleted from the middle of the stream is not."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from server.config import Settings
from server.connections import Connections
from tests.streams.conftest import Backend
from tools.streams.inspect import inspect_stream

pytestmark = pytest.mark.anyio

STREAM = "stream:orders:created"
GROUP = "pp-orders"


async def _report(settings: Settings) -> dict:
    connections = Connections(settings)
    try:
        return (await inspect_stream(connections, settings, STREAM)).model_dump()
    finally:
        await connections.aclose()


def _trimmed(report: dict) -> list[dict]:
    return [a for a in report["anomalies"] if a["code"] == "trimmed_pending"]


async def test_pending_entries_deleted_mid_stream_are_not_trimmed(backend: Backend, settings_for: Callable) -> None:
    r = backend.client
    ids = [r.xadd(STREAM, {"id": f"m{i}"}).decode() for i in range(5)]
    r.xgroup_create(STREAM, GROUP, id="0")
    r.xreadgroup(GROUP, "c1", {STREAM: ">"})
    r.xdel(STREAM, ids[2])  # gone from the middle: not older than the first entry
    report = await _report(settings_for(backend, limits={"dead_consumer_idle_ms": 3_600_000}))
    assert _trimmed(report) == []


async def test_pending_entries_older_than_the_first_entry_are_trimmed(backend: Backend,
                                                                      settings_for: Callable) -> None:
    r = backend.client
    ids = [r.xadd(STREAM, {"id": f"m{i}"}).decode() for i in range(5)]
    r.xgroup_create(STREAM, GROUP, id="0")
    r.xreadgroup(GROUP, "c1", {STREAM: ">"})
    r.xtrim(STREAM, maxlen=3, approximate=False)  # ids[0] and ids[1] were trimmed away, still pending
    report = await _report(settings_for(backend, limits={"dead_consumer_idle_ms": 3_600_000}))
    if backend.version.startswith("6."):
        # Redis 6.2 keeps no entries-added counter: an XTRIM below the configured MAXLEN is no proof
        assert _trimmed(report) == []
        assert [a for a in report["anomalies"] if a["code"] == "missing_pending"]
        return
    (found,) = _trimmed(report)
    assert found["group"] == GROUP and found["evidence"]["count"] == 2
    assert found["evidence"]["first_entry_id"] == ids[2]
    assert sorted(found["evidence"]["sample_ids"]) == sorted(ids[:2])
