"""Promise: every idle-time limit holds to the millisecond: at the limit, and one millisecond each side.

Redis's idle times move while a test reads them, so equality cannot be set up on a real Redis by
timing. The test puts :class:`tests.redis_fault_proxy.RedisFaultProxy` between the code and a real
Redis and pins the idle times Redis reports (``XPENDING``, ``XINFO CONSUMERS``) and a key's ``PTTL``;
everything else (the stream, the group, the entries, the keys) is real. The limits:

- ``pending_owner`` holds while the entry has been idle *at least* ``min_idle_ms``;
- ``consumer_live`` holds while the consumer has been idle *at most* ``max_idle_ms``;
- a consumer idle ``dead_consumer_idle_ms`` or more is dead (below it, live), in both plans that
  look at consumers, and a pending entry is claimed from a dead consumer only once idle that long;
- a stale-lock plan skips an entry delivered less than ``claim_interval_ms`` ago;
- a key snapshot keeps a time to live of 0 ms (the key's last millisecond) as 0, not as "no TTL";
- on Redis >= 7.2 a consumer's idle time is its ``inactive`` time (since its last successful read).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from server.connections import Connections
from server.errors import NotFound
from tests.redis_fault_proxy import RedisFaultProxy
from tests.remediation.conftest import GROUP, STREAM, settings_for
from tests.remediation.target_sim import new_event, push_event
from tools.remediation import redis_reads as rr
from tools.remediation.model import Check, Plan
from tools.remediation.planner import Request, propose
from tools.remediation.preconditions import CheckContext, evaluate
from tools.streams.keys import idempotency_key

pytestmark = pytest.mark.anyio

LIMIT = 5_000
DEAD_MS = 1_000
CLAIM_MS = 200


@pytest.fixture
def proxy(redis_url: str) -> Iterator[RedisFaultProxy]:
    p = RedisFaultProxy.in_front_of(redis_url)
    yield p
    p.close()


@pytest.fixture
def settings(tmp_path, outbox_db, proxy):
    return settings_for(tmp_path, outbox_db, proxy.url(), conventions={"claim_interval_ms": CLAIM_MS},
                        limits={"dead_consumer_idle_ms": DEAD_MS})


@pytest.fixture
async def connections(settings):
    c = Connections(settings)
    yield c
    await c.aclose()


def _read(r: redis.Redis, consumer: str) -> str:
    (_, rows), = r.xreadgroup(GROUP, consumer, {STREAM: ">"}, count=1)
    return rows[0][0].decode()


def _pending_at(r: redis.Redis, *consumers: str) -> list[str]:
    """One pending entry per consumer, in order (each consumer reads one new entry)."""
    r.xgroup_create(STREAM, GROUP, id="0", mkstream=True)
    for _ in consumers:
        push_event(r, STREAM, new_event())
    return [_read(r, c) for c in consumers]


async def _check(settings, connections, kind: str, **args) -> str | None:
    return await evaluate(Check(kind=kind, args=args), CheckContext(settings, connections), dynamic=True)


async def test_the_proxy_pins_the_idle_times_and_the_ttl_redis_reports(redis_client, proxy) -> None:
    """The fixture itself: unpinned, the proxy answers what Redis answers; pinned, only the idle times change."""
    [entry] = _pending_at(redis_client, "alice")
    redis_client.xgroup_createconsumer(STREAM, GROUP, "bob")
    redis_client.set("k", "v", px=60_000)
    via = redis.Redis.from_url(proxy.url())
    try:
        [row] = via.xpending_range(STREAM, GROUP, "-", "+", 10)
        assert row["message_id"].decode() == entry and row["consumer"] == b"alice" and row["times_delivered"] == 1
        assert 0 <= row["time_since_delivered"] < 60_000 and 0 < via.pttl("k") <= 60_000
        proxy.pin_idle(entries=LIMIT, consumers={"bob": 7})
        [row] = via.xpending_range(STREAM, GROUP, "-", "+", 10)
        assert (row["message_id"].decode(), row["consumer"], row["time_since_delivered"], row["times_delivered"]) == (
            entry, b"alice", LIMIT, 1)
        assert via.xpending(STREAM, GROUP)["pending"] == 1  # the summary form is left alone
        by_name = {c["name"]: c for c in via.xinfo_consumers(STREAM, GROUP)}
        assert by_name[b"bob"]["idle"] == 7 and by_name[b"alice"]["idle"] < 60_000 and by_name[b"alice"]["pending"] == 1
        proxy.pin_idle(consumers=0)
        assert [c["idle"] for c in via.xinfo_consumers(STREAM, GROUP)] == [0, 0]
        proxy.pin_pttl(0)
        assert via.pttl("k") == 0 and via.pttl("no-such-key") == -2
        redis_client.persist("k")
        assert via.pttl("k") == -1  # no time to live: not pinned
    finally:
        via.close()


@pytest.mark.parametrize(("idle", "holds"), [(LIMIT - 1, False), (LIMIT, True), (LIMIT + 1, True)])
async def test_pending_owner_holds_from_exactly_its_min_idle(settings, connections, redis_client, proxy,
                                                              idle, holds) -> None:
    [entry] = _pending_at(redis_client, "alice")
    proxy.pin_idle(entries=idle)
    drift = await _check(settings, connections, "pending_owner", stream=STREAM, group=GROUP, id=entry,
                         consumer="alice", min_idle_ms=LIMIT)
    assert drift == (None if holds else f"entry {entry} was delivered again {idle} ms ago (someone is processing it)")


@pytest.mark.parametrize("min_idle", [None, 0])
async def test_pending_owner_without_an_idle_condition_holds_for_an_entry_delivered_this_millisecond(
    settings, connections, redis_client, proxy, min_idle
) -> None:
    [entry] = _pending_at(redis_client, "alice")
    proxy.pin_idle(entries=0)
    assert await _check(settings, connections, "pending_owner", stream=STREAM, group=GROUP, id=entry,
                        consumer="alice", min_idle_ms=min_idle) is None


@pytest.mark.parametrize(("idle", "holds"), [(LIMIT - 1, True), (LIMIT, True), (LIMIT + 1, False)])
async def test_consumer_live_holds_up_to_exactly_its_max_idle(settings, connections, redis_client, proxy,
                                                              idle, holds) -> None:
    _pending_at(redis_client, "alice")
    proxy.pin_idle(consumers=idle)
    drift = await _check(settings, connections, "consumer_live", stream=STREAM, group=GROUP, consumer="alice",
                         max_idle_ms=LIMIT)
    assert drift == (None if holds else f"consumer alice has been idle {idle} ms: it no longer looks alive")


async def test_a_consumer_that_read_this_millisecond_is_idle_0(connections, redis_client, proxy) -> None:
    _pending_at(redis_client, "alice")
    proxy.pin_idle(consumers=0)
    assert [(c.name, c.idle_ms) for c in await rr.consumers_of(connections.redis(), STREAM, GROUP)] == [("alice", 0)]


@pytest.mark.parametrize(("inactive", "seen"), [(10, 10), (0, 0), (-1, LIMIT)])
async def test_on_redis_7_2_a_consumer_is_as_idle_as_its_last_successful_read(connections, redis_client, proxy,
                                                                              inactive, seen) -> None:
    """Redis >= 7.2 reports ``inactive`` (since the last successful read) next to ``idle`` (since the last
    attempt, an empty read included): liveness is read from ``inactive``, 0 included; -1 (never read) falls
    back to ``idle``. The reply has 7.2's shape through the proxy (the machine's Redis is 7.0)."""
    _pending_at(redis_client, "alice")
    proxy.pin_idle(consumers=LIMIT)
    proxy.report_inactive(inactive)
    via = redis.Redis.from_url(proxy.url())
    try:
        [raw] = via.xinfo_consumers(STREAM, GROUP)
    finally:
        via.close()
    assert (raw["name"], raw["idle"], raw["inactive"], raw["pending"]) == (b"alice", LIMIT, inactive, 1)
    assert [(c.name, c.idle_ms, c.pending) for c in await rr.consumers_of(connections.redis(), STREAM, GROUP)] == [
        ("alice", seen, 1)]


@pytest.mark.parametrize("pttl", [0, 1])
async def test_a_key_in_its_last_milliseconds_keeps_its_ttl(connections, redis_client, proxy, pttl) -> None:
    redis_client.set("lock", "processing", px=60_000)
    proxy.pin_pttl(pttl)
    snap = await rr.key_snapshot(connections.redis(), "lock")
    assert snap is not None and snap.pttl_ms == pttl


async def _propose(settings, connections, symptom: str, ids: list[str] | None = None) -> Plan:
    return await propose(settings, connections, Request(symptom, STREAM, GROUP, None, None, ids))


async def test_a_consumer_idle_exactly_the_dead_limit_is_dead(settings, connections, redis_client, proxy) -> None:
    _pending_at(redis_client, "pp-a", "pp-b")
    proxy.pin_idle(entries=DEAD_MS, consumers=DEAD_MS)  # both dead, neither live
    with pytest.raises(NotFound) as info:
        await _propose(settings, connections, "claim_dead_consumer")
    assert str(info.value).startswith(f"every consumer of group {GROUP} is idle more than {DEAD_MS} ms: there is no")
    proxy.pin_idle(entries=DEAD_MS, consumers=DEAD_MS - 1)  # both live, neither dead
    with pytest.raises(NotFound) as info:
        await _propose(settings, connections, "claim_dead_consumer")
    assert str(info.value) == f"no consumer of group {GROUP} idle more than {DEAD_MS} ms holds pending entries"


@pytest.mark.parametrize(("entry_idle", "claimed"), [(DEAD_MS - 1, False), (DEAD_MS, True)])
async def test_an_entry_is_claimed_from_a_dead_consumer_from_exactly_the_dead_limit(
    settings, connections, redis_client, proxy, entry_idle, claimed
) -> None:
    dead_entry, _ = _pending_at(redis_client, "pp-dead", "pp-live")
    proxy.pin_idle(entries=entry_idle, consumers={"pp-dead": DEAD_MS, "pp-live": DEAD_MS - 1})
    if not claimed:
        with pytest.raises(NotFound):
            await _propose(settings, connections, "claim_dead_consumer")
        return
    plan = await _propose(settings, connections, "claim_dead_consumer")
    [claim] = [s for s in plan.steps if s.action == "xclaim"]
    assert (claim.operation.consumer, claim.operation.ids) == ("pp-live", [dead_entry])


def _locked_entry(settings, r: redis.Redis) -> str:
    """One entry pending at pp-a whose idempotency lock is held (a stale lock, once its owner is gone)."""
    [entry] = _pending_at(r, "pp-a")
    r.set(idempotency_key(settings.conventions, GROUP, entry), "processing", ex=600)
    return entry


@pytest.mark.parametrize(("idle", "skipped"), [(CLAIM_MS - 1, True), (CLAIM_MS, False)])
async def test_a_stale_lock_is_skipped_only_when_delivered_less_than_claim_interval_ago(
    settings, connections, redis_client, proxy, idle, skipped
) -> None:
    entry = _locked_entry(settings, redis_client)
    proxy.pin_idle(entries=idle, consumers=0)
    if skipped:
        with pytest.raises(NotFound):
            await _propose(settings, connections, "clear_stale_lock", ids=[entry])
        return
    plan = await _propose(settings, connections, "clear_stale_lock", ids=[entry])
    assert plan.warnings == []
    [locks] = [s for s in plan.steps if s.action == "delete_stale_locks"]
    assert locks.operation.keys == [idempotency_key(settings.conventions, GROUP, entry)]


@pytest.mark.parametrize(("consumer_idle", "dead"), [(DEAD_MS - 1, False), (DEAD_MS, True)])
async def test_the_stale_lock_plan_splits_dead_and_live_owners_at_exactly_the_dead_limit(
    settings, connections, redis_client, proxy, consumer_idle, dead
) -> None:
    entry = _locked_entry(settings, redis_client)
    proxy.pin_idle(entries=CLAIM_MS, consumers=consumer_idle)
    plan = await _propose(settings, connections, "clear_stale_lock", ids=[entry])
    if dead:  # its only consumer is dead: nobody to claim to, and no live owner to restart
        assert plan.warnings == ["the entries of dead consumers stay where they are: no live consumer to claim them to"]
        assert not any(n.startswith("live owner(s)") for n in plan.notes)
    else:
        assert plan.warnings == []
        assert any(n.startswith("live owner(s) pp-a re-read") for n in plan.notes)
