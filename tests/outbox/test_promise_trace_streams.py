"""The stream part of a trace, on a real Redis, without a database: the search and the per-group verdicts.

:mod:`tools.outbox.trace_streams` is called directly with entries written at chosen ids
(so every window, page and age is known to the millisecond). Promises defended:

- the search: from the push time outwards in pages of 50, 100, ..., a short stream read
  whole on a miss, a long one searched in windows widened x4 up to
  ``stream_window_max_ms``, all within ``scan_max_iterations`` pages;
- a missing entry is ``trimmed`` only when ``XINFO STREAM`` proves it; an entry deleted by
  hand, or a stream that does not exist, is not;
- "late" in milliseconds: an undelivered entry's age (its id time against Redis TIME) against
  ``pending_ageing_s * 1000``, a pending entry's idle against ``claim_interval_ms``, each at
  exactly the limit and one millisecond each side.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio as aioredis

from server.config import Settings
from tools.outbox.delivery import GroupDelivery, MessageDeadLetter, PendingEntry
from tools.outbox.model import StreamEntryRef
from tools.outbox.trace_streams import (
    _delivery_state_text,
    _group_finding,
    _searched_text,
    get_key,
    locate_entry,
    redis_now_ms,
    stream_hops,
)
from tools.streams import keys
from tools.streams.records import IdempotencyLock, RetryState

pytestmark = pytest.mark.anyio

STREAM = "stream:user:created"
BASE = 1_700_000_000_000


@pytest.fixture
def r(redis_client):
    """The machine's Redis only (the package's ``r`` also runs on a cluster: this file tests no routing)."""
    return redis_client


@pytest.fixture
async def ar(redis_url: str) -> AsyncIterator[Any]:
    client = aioredis.Redis.from_url(redis_url)
    yield client
    await client.aclose()


def add(r, ms: int, event_id: str, seq: int = 0, stream: str = STREAM, **extra: str) -> str:
    return r.xadd(stream, {"id": event_id, "type": "user:created", **extra}, id=f"{ms}-{seq}").decode()


def fill(r, start_ms: int, n: int, stream: str = STREAM) -> None:
    """``n`` entries of other events, one per millisecond from ``start_ms``."""
    pipe = r.pipeline(transaction=False)
    for i in range(n):
        pipe.xadd(stream, {"id": f"other-{start_ms + i}", "type": "user:created"}, id=f"{start_ms + i}-0")
    pipe.execute()


# -- locate_entry: where and how much it reads -----------------------------------------------------


async def test_a_missing_or_empty_stream_is_not_searched(r, ar, make_settings) -> None:
    settings = make_settings()
    ref, exists = await locate_entry(ar, settings, STREAM, "e", [BASE])
    assert (exists, ref.entry_id, ref.first_entry_id, ref.scanned, ref.windows) == (False, None, None, 0, [])
    assert (ref.searched_from_ms, ref.searched_to_ms, ref.clock_offset_ms) == (BASE - 120_000, BASE + 120_000, 0)
    r.xgroup_create(STREAM, "pp", id="$", mkstream=True)
    ref, exists = await locate_entry(ar, settings, STREAM, "e", [BASE])
    assert (exists, ref.entry_id, ref.first_entry_id, ref.scanned) == (True, None, None, 0)


async def test_the_search_starts_at_the_push_time_and_grows_its_pages(r, ar, make_settings) -> None:
    """300 entries, one per ms; pushed at +100, found at +250: back 50, forward 50, back 100 (51 left), forward 100."""
    fill(r, BASE, 250)
    target = add(r, BASE + 250, "E", payload="p" * 100, note="")
    fill(r, BASE + 251, 49)
    settings = make_settings(limits={"stream_window_ms": 1000, "payload_max_bytes": 64})
    ref, exists = await locate_entry(ar, settings, STREAM, "E", [BASE + 50, BASE + 100], BASE + 100)
    assert exists and ref.entry_id == target
    assert ref.scanned == 50 + 50 + 51 + 100
    assert ref.windows == [[BASE - 950, BASE + 1100]]
    assert (ref.searched_from_ms, ref.searched_to_ms) == (BASE - 950, BASE + 1100)
    assert ref.first_entry_id == f"{BASE}-0"
    assert ref.fields == {"id": "E", "type": "user:created", "payload": "p" * 64, "note": ""} and ref.truncated
    assert (ref.read_whole, ref.length) == (False, None)


async def test_the_search_centre_defaults_to_the_latest_time_and_reads_every_entry_of_its_millisecond(
        r, ar, make_settings) -> None:
    """No expected time: the centre is the latest row time; entries sharing that millisecond are all read back."""
    fill(r, BASE, 10)
    add(r, BASE + 20, "other-a", 0)
    target = add(r, BASE + 20, "E", 1)
    add(r, BASE + 20, "other-b", 2)
    settings = make_settings(limits={"stream_window_ms": 5})
    ref, _ = await locate_entry(ar, settings, STREAM, "E", [BASE + 5, BASE + 20])
    assert ref.entry_id == target
    assert ref.windows == [[BASE, BASE + 25]]
    assert ref.scanned == 13  # back from BASE+20 inclusive: the 3 of that ms and the 10 older, in one page of 50
    ref, _ = await locate_entry(ar, settings, STREAM, "E", [BASE + 21, BASE + 30], BASE + 19)
    # window [+16, +35]: back from +19 finds nothing, forward from +20-0 reads that millisecond's 3 entries
    assert ref.entry_id == target and ref.scanned == 3 and ref.windows == [[BASE + 16, BASE + 35]]


async def test_the_window_is_shifted_by_the_clock_offset(r, ar, make_settings) -> None:
    fill(r, BASE, 5)
    target = add(r, BASE + 3_600_000, "E")
    settings = make_settings(limits={"stream_window_ms": 1000, "stream_read_whole_max": 0})
    ref, _ = await locate_entry(ar, settings, STREAM, "E", [BASE], BASE, offset_ms=3_600_000)
    assert ref.entry_id == target and ref.clock_offset_ms == 3_600_000
    assert ref.windows == [[BASE + 3_599_000, BASE + 3_601_000]]


async def test_a_window_never_starts_before_zero(r, ar, make_settings) -> None:
    target = add(r, 10, "E")
    ref, _ = await locate_entry(ar, make_settings(limits={"stream_window_ms": 1000}), STREAM, "E", [500])
    assert ref.entry_id == target and ref.windows == [[0, 1500]]


async def test_a_short_stream_is_read_whole_on_a_miss(r, ar, make_settings) -> None:
    fill(r, BASE, 20)
    target = add(r, BASE + 20, "E")
    fill(r, BASE + 21, 4)
    settings = make_settings(limits={"stream_window_ms": 1000, "max_count": 10, "stream_read_whole_max": 26})
    ref, _ = await locate_entry(ar, settings, STREAM, "E", [BASE + 900_000])
    assert ref.entry_id == target
    assert (ref.read_whole, ref.whole_complete, ref.length) == (True, False, 25)
    assert ref.scanned == 25  # the window: nothing; then pages of 10 oldest first, the third (5 entries) holds it
    assert ref.windows == [[BASE + 899_000, BASE + 901_000]]


async def test_a_whole_read_that_misses_says_it_reached_the_end(r, ar, make_settings) -> None:
    fill(r, BASE, 25)
    settings = make_settings(limits={"stream_window_ms": 1000, "max_count": 10})
    ref, _ = await locate_entry(ar, settings, STREAM, "E", [BASE + 900_000])
    assert (ref.entry_id, ref.read_whole, ref.whole_complete, ref.length, ref.scanned) == (None, True, True, 25, 25)
    fill(r, BASE + 25, 5)  # 30 entries: the third page is full, a fourth (empty) page ends the read
    ref, _ = await locate_entry(ar, settings, STREAM, "E", [BASE + 900_000])
    assert (ref.whole_complete, ref.scanned) == (True, 30)


async def test_a_whole_read_stops_at_the_page_budget(r, ar, make_settings) -> None:
    fill(r, BASE, 50)
    settings = make_settings(limits={"stream_window_ms": 1000, "max_count": 10, "scan_max_iterations": 4})
    ref, _ = await locate_entry(ar, settings, STREAM, "E", [BASE + 900_000])
    # the window takes 2 pages (back and forward, both empty), the whole read the 2 left
    assert (ref.read_whole, ref.whole_complete, ref.scanned) == (True, False, 20)
    assert _searched_text(ref) == "read part of the stream (page budget spent), 50 entries (20 entries read in all)"


async def test_a_long_stream_is_searched_in_windows_widened_four_times(r, ar, make_settings) -> None:
    fill(r, BASE - 3, 3)
    target = add(r, BASE + 10_000, "E")
    settings = make_settings(limits={"stream_window_ms": 1000, "stream_read_whole_max": 2,
                                     "stream_window_max_ms": 64_000})
    ref, _ = await locate_entry(ar, settings, STREAM, "E", [BASE])
    assert ref.entry_id == target
    assert ref.windows == [
        [BASE - 1000, BASE + 1000],
        [BASE - 4000, BASE - 1001], [BASE + 1001, BASE + 4000],
        [BASE - 16_000, BASE - 4001], [BASE + 4001, BASE + 16_000],
    ]
    assert (ref.length, ref.read_whole) == (4, False)
    assert (ref.searched_from_ms, ref.searched_to_ms) == (BASE - 4000, BASE + 4000)


async def test_a_long_stream_miss_reports_the_widest_window(r, ar, make_settings) -> None:
    fill(r, BASE - 3, 3)
    settings = make_settings(limits={"stream_window_ms": 1000, "stream_read_whole_max": 2,
                                     "stream_window_max_ms": 10_000})
    ref, _ = await locate_entry(ar, settings, STREAM, "E", [BASE])
    assert ref.entry_id is None
    assert ref.windows == [
        [BASE - 1000, BASE + 1000], [BASE - 4000, BASE - 1001], [BASE + 1001, BASE + 4000],
        [BASE - 10_000, BASE - 4001], [BASE + 4001, BASE + 10_000],
    ]
    assert (ref.searched_from_ms, ref.searched_to_ms) == (BASE - 10_000, BASE + 10_000)
    assert ref.scanned == 3
    assert _searched_text(ref) == (f"3 entries read between {BASE - 10_000} and {BASE + 10_000} ms in 5 step(s)")


async def test_the_widening_stops_at_the_page_budget(r, ar, make_settings) -> None:
    fill(r, BASE - 3, 3)
    settings = make_settings(limits={"stream_window_ms": 1000, "stream_read_whole_max": 2,
                                     "stream_window_max_ms": 10_000_000, "scan_max_iterations": 5})
    ref, _ = await locate_entry(ar, settings, STREAM, "E", [BASE])
    # 2 pages for the first window (back: 3 entries, forward: none); the first widening's older band 1 (its
    # centre is its end: nothing forward), its newer band 2: the budget of 5 is spent, no second widening
    assert ref.windows == [[BASE - 1000, BASE + 1000], [BASE - 4000, BASE - 1001], [BASE + 1001, BASE + 4000]]
    assert (ref.searched_from_ms, ref.searched_to_ms) == (BASE - 4000, BASE + 4000)


async def test_a_band_pages_forward_through_a_dense_window(r, ar, make_settings) -> None:
    """Forward pages continue after the last id read (exclusive), doubling: 50, 100, 200, capped at max_count."""
    fill(r, BASE, 330)
    target = add(r, BASE + 330, "E")
    fill(r, BASE + 331, 100)
    ref, _ = await locate_entry(ar, make_settings(limits={"stream_window_ms": 500}), STREAM, "E", [BASE], BASE)
    assert ref.entry_id == target
    # back: the entry at BASE (no older one: back is done); forward from BASE+1: 50, 100, then 200 holding +330
    assert ref.scanned == 1 + 50 + 100 + 200
    ref, _ = await locate_entry(ar, make_settings(limits={"stream_window_ms": 500, "max_count": 60}), STREAM, "E",
                                [BASE], BASE)
    assert ref.entry_id == target and ref.scanned == 1 + 50 + 60 * 5  # 50, then pages of 60: +330 ends the 5th


async def test_a_window_past_its_end_is_not_read(r, ar, make_settings) -> None:
    """The centre clamped to the window's end: nothing forward of it is read."""
    fill(r, BASE, 3)
    add(r, BASE + 5, "E")
    settings = make_settings(limits={"stream_window_ms": 2, "stream_read_whole_max": 0, "stream_window_max_ms": 2})
    ref, _ = await locate_entry(ar, settings, STREAM, "E", [BASE], BASE + 50)
    assert (ref.entry_id, ref.scanned, ref.windows) == (None, 3, [[BASE - 2, BASE + 2]])


# -- stream_hops: missing, trimmed (with proof only), no group -------------------------------------


async def test_a_stream_that_does_not_exist_is_not_found_never_trimmed(ar, make_settings) -> None:
    hops, findings = await stream_hops(ar, make_settings(), STREAM, "E", [BASE], BASE, "")
    (f,) = findings
    assert (f.code, f.severity, f.hop) == ("not_found", "error", "stream_entry")
    assert f.sentence == (f"stream {STREAM} does not exist: the target name is wrong or the stream was deleted "
                          "(event E)")
    assert f.next_step == "check target_services and [conventions] stream_prefix"
    (h,) = hops
    assert (h.name, h.ref, h.found, h.state, h.healthy) == ("stream_entry", STREAM, False, "stream_missing", False)
    assert h.detail == f"stream {STREAM} does not exist: the target name is wrong or the stream was deleted"


async def test_an_entry_trimmed_by_maxlen_is_trimmed_with_the_proof(r, ar, make_settings) -> None:
    fill(r, 1000, 2)
    add(r, 1002, "E")
    fill(r, 1003, 27)
    r.xtrim(STREAM, maxlen=20, approximate=False)
    settings = make_settings(conventions={"stream_maxlen": 20}, limits={"stream_window_ms": 0})
    # the row times span 900..1050, the push time (processed_at) is 1002: the proof is judged at 1002; the
    # window [900, 1050] is read first (the 20 entries left), then the whole stream (20 again)
    hops, findings = await stream_hops(ar, settings, STREAM, "E", [900, 1050], 5000, "outcome_event.", 1002)
    (f,) = findings
    assert (f.code, f.severity, f.hop) == ("trimmed", "warning", "outcome_event.stream_entry")
    detail = ("no entry with id=E (read the whole stream, 20 entries (40 entries read in all)); it was pushed about "
              "1002 ms (Redis clock) and is gone: entries-added 30 > length 20: 10 entries were removed from the head "
              "(the first entry is now 1010-0), and max-deleted-entry-id 0-0 shows no XDEL reached them: trimmed")
    assert f.sentence == f"stream {STREAM}: {detail}"
    (h,) = hops
    assert (h.name, h.state, h.found, h.healthy, h.detail) == ("outcome_event.stream_entry", "trimmed", False, False,
                                                               detail)
    assert h.entry is not None and h.entry.trim is not None and h.entry.trim.trimmed


async def test_an_entry_deleted_by_hand_is_not_called_trimmed(r, ar, make_settings) -> None:
    fill(r, 1000, 5)
    gone = add(r, 1005, "E")
    fill(r, 1006, 4)
    r.xdel(STREAM, gone)
    settings = make_settings(limits={"stream_window_ms": 0})
    hops, findings = await stream_hops(ar, settings, STREAM, "E", [1005], 5000, "", offset_ms=0)
    (f,) = findings
    assert (f.code, f.severity, f.hop) == ("entry_not_found", "error", "stream_entry")
    assert f.sentence.startswith(f"stream {STREAM}: no entry with id=E (read the whole stream, 9 entries (9 entries "
                                 "read in all)); not proven trimmed: ")
    assert f.sentence.endswith(". It could still exist: in another stream (check target_services), under another id "
                               "field ([conventions] event_id_field is 'id'), or pushed outside what was searched; or "
                               "it was deleted (XDEL)")
    assert hops[0].state == "not_found" and hops[0].entry.trim is not None and not hops[0].entry.trim.trimmed


async def test_the_trim_proof_uses_the_push_time_on_redis_clock(r, ar, make_settings) -> None:
    """Pushed (by the row) at 1002 + offset 50,000: entries up to 50,999 were trimmed, so the entry was too."""
    fill(r, 50_000, 30)
    r.xtrim(STREAM, maxlen=20, approximate=False)
    settings = make_settings(conventions={"stream_maxlen": 20}, limits={"stream_window_ms": 0})
    _, findings = await stream_hops(ar, settings, STREAM, "E", [1002], 99_000, "", None, 49_003)
    assert findings[0].code == "trimmed"
    assert "it was pushed about 50005 ms (Redis clock)" in findings[0].sentence
    _, findings = await stream_hops(ar, settings, STREAM, "E", [1002], 99_000, "", None, 49_015)
    assert findings[0].code == "entry_not_found"  # pushed at 50,017: after the first entry left (50,010)


async def test_a_stream_with_no_group_is_pushed_not_consumed(r, ar, make_settings) -> None:
    entry = add(r, BASE, "E")
    hops, findings = await stream_hops(ar, make_settings(), STREAM, "E", [BASE], BASE + 1, "x.")
    assert [(h.name, h.ref, h.found, h.state, h.healthy, h.detail) for h in hops] == [
        ("x.stream_entry", f"{STREAM} {entry}", True, "present", True, f"entry {entry} in {STREAM}"),
        ("x.group", STREAM, False, "no_group", False, f"stream {STREAM} has no consumer group: nothing consumes it"),
    ]
    (f,) = findings
    assert (f.code, f.severity, f.sentence, f.hop) == (
        "pushed_not_consumed", "error", f"stream {STREAM} has no consumer group: nothing consumes it", "x.group")
    assert f.next_step == f"inspect_stream(stream='{STREAM}'); start the post-processor that reads it"


# -- stream_hops: per group, undelivered entries late in ms ----------------------------------------


@pytest.mark.parametrize(("age_ms", "severity"), [(299_999, "info"), (300_000, "info"), (300_001, "error")])
async def test_an_undelivered_entry_is_late_after_pending_ageing_s_in_ms(r, ar, make_settings, age_ms,
                                                                         severity) -> None:
    entry = add(r, BASE, "E")
    r.xgroup_create(STREAM, "pp-stopped", id="0")
    hops, findings = await stream_hops(ar, make_settings(), STREAM, "E", [BASE], BASE + age_ms, "")
    (f,) = findings
    tail = "the group's consumers are stopped or far behind" if severity == "error" else "the group may just be behind"
    assert (f.code, f.severity, f.hop) == ("pushed_not_consumed", severity, "group")
    assert f.sentence == (f"stream {STREAM}, group pp-stopped: not read yet (entry {entry}, {age_ms // 1000}s old, "
                          f"group at 0-0): {tail}")
    assert f.next_step == (f"inspect_stream(stream='{STREAM}') for the group's lag and consumers; start the "
                           "post-processor")
    group_hop = hops[1]
    assert (group_hop.name, group_hop.ref, group_hop.found, group_hop.state, group_hop.healthy, group_hop.detail) == (
        "group", f"{STREAM} pp-stopped", True, "not_delivered", False, "not delivered (group last-delivered-id 0-0)")
    assert group_hop.delivery is not None and (group_hop.delivery.group, group_hop.delivery.entry_id) == (
        "pp-stopped", entry)


async def test_an_entry_newer_than_redis_clock_is_zero_seconds_old(r, ar, make_settings) -> None:
    add(r, BASE, "E")
    r.xgroup_create(STREAM, "pp", id="0")
    _, findings = await stream_hops(ar, make_settings(), STREAM, "E", [BASE], BASE - 900_000, "")
    assert (findings[0].severity, "0s old" in findings[0].sentence) == ("info", True)


async def test_groups_acknowledged_pending_and_behind_are_ranked(r, ar, make_settings) -> None:
    entry = add(r, BASE, "E")
    r.xgroup_create(STREAM, "a-behind", id="0")
    r.xgroup_create(STREAM, "b-reading", id="0")
    r.xgroup_create(STREAM, "c-done", id="0")
    r.xreadgroup("b-reading", "worker-1", {STREAM: ">"})
    r.xreadgroup("c-done", "worker-2", {STREAM: ">"})
    r.xack(STREAM, "c-done", entry)
    hops, findings = await stream_hops(ar, make_settings(), STREAM, "E", [BASE], BASE + 1000, "")
    assert [(h.ref, h.state, h.healthy) for h in hops[1:]] == [
        (f"{STREAM} a-behind", "not_delivered", False), (f"{STREAM} b-reading", "pending", False),
        (f"{STREAM} c-done", "acknowledged", True)]
    assert hops[3].detail == "delivered and acknowledged"
    assert hops[2].detail.startswith("pending on worker-1 for ") and hops[2].detail.endswith(" ms (1 deliveries)")
    assert [(f.code, f.hop) for f in findings] == [("in_pel", "group"), ("pushed_not_consumed", "group")]


async def test_a_dead_lettered_entry_is_in_dlq(r, ar, make_settings) -> None:
    entry = add(r, BASE, "E")
    r.xgroup_create(STREAM, "pp", id="0")
    r.xreadgroup("pp", "w", {STREAM: ">"})
    r.xack(STREAM, "pp", entry)
    dlq = r.xadd(f"{STREAM}-dlq", {"messageId": entry, "error": "bad payload"}, id=f"{BASE + 5}-0").decode()
    hops, findings = await stream_hops(ar, make_settings(), STREAM, "E", [BASE], BASE + 1000, "")
    assert [(f.code, f.severity) for f in findings] == [("in_dlq", "error")]
    assert findings[0].sentence == (f"stream {STREAM}, group pp: dead-lettered to {STREAM}-dlq (entry {dlq}) after "
                                    "maxRetries (5): bad payload")
    assert hops[1].dead_letters and hops[1].detail == f"acknowledged after dead-lettering to {STREAM}-dlq"


# -- _group_finding on plain data: every sentence, thresholds at the millisecond -------------------


def delivery(state: str, *, pending: PendingEntry | None = None, attempt: int | None = None,
             last_error: str | None = None, dead: list[MessageDeadLetter] | None = None, lock_stale: bool = False,
             lock_ttl: int | None = None) -> GroupDelivery:
    return GroupDelivery(
        stream=STREAM, group="pp", entry_id=f"{BASE}-0", state=state, delivered=state != "not_delivered",
        last_delivered_id=f"{BASE - 5}-0", pending=pending, acknowledged=state in ("acknowledged", "dead_lettered"),
        dead_letters=dead or [],
        retry=RetryState(key="retry:post-processor:pp:E", exists=attempt is not None, attempt=attempt,
                         last_error=last_error, retry_queue_key="retry-queue:post-processor:pp"),
        idempotency=IdempotencyLock(key="idem:pp:E", exists=lock_stale, ttl_s=lock_ttl),
        lock_stale=lock_stale, message_id_used="E")


def pel(idle_ms: int, *, dead: bool = False, consumer_idle_ms: int | None = None) -> PendingEntry:
    return PendingEntry(consumer="worker-1", idle_ms=idle_ms, times_delivered=2, consumer_idle_ms=consumer_idle_ms,
                        consumer_dead=dead)


@pytest.fixture
def settings(make_settings) -> Settings:
    s = make_settings()
    assert (s.conventions.claim_interval_ms, s.limits.pending_ageing_s, s.limits.dead_consumer_idle_ms) == (
        30_000, 300, 300_000)
    return s


@pytest.mark.parametrize(("idle_ms", "severity"), [(29_999, "info"), (30_000, "warning"), (30_001, "warning")])
def test_in_pel_is_late_from_claim_interval_ms(settings, idle_ms, severity) -> None:
    f = _group_finding(delivery("pending", pending=pel(idle_ms)), settings, BASE, "group")
    assert f is not None and (f.code, f.severity, f.hop) == ("in_pel", severity, "group")
    tail = "" if severity == "warning" else " (probably still being processed)"
    assert f.sentence == (f"stream {STREAM}, group pp: delivered to worker-1 2 time(s), unacknowledged for "
                          f"{idle_ms} ms{tail}")
    assert f.next_step == (f"list_pending(stream='{STREAM}', group='pp') and the consumer logs; it is re-read after "
                           "30000 ms")


def test_in_pel_names_the_retry_attempt_and_last_error(settings) -> None:
    f = _group_finding(delivery("pending", pending=pel(40_000), attempt=3, last_error="db down"), settings, BASE, "g")
    assert f is not None and f.sentence == (f"stream {STREAM}, group pp: delivered to worker-1 2 time(s), "
                                            "unacknowledged for 40000 ms; retry attempt 3, last error: db down")


def test_a_dead_consumer(settings) -> None:
    f = _group_finding(delivery("pending", pending=pel(400_000, dead=True, consumer_idle_ms=350_000)), settings,
                       BASE, "group")
    assert f is not None and (f.code, f.severity, f.hop) == ("dead_consumer", "error", "group")
    assert f.sentence == (f"stream {STREAM}, group pp: pending for 400000 ms on consumer worker-1, idle 350000 ms "
                          "(> 300000 ms): that consumer is gone and nobody reclaims its entries")
    assert f.next_step == (f"propose_remediation(symptom='claim_dead_consumer', stream='{STREAM}', group='pp', "
                           f"ids=['{BASE}-0'])")


def test_a_stale_idempotency_lock(settings) -> None:
    f = _group_finding(delivery("pending", pending=pel(90_000), lock_stale=True, lock_ttl=77), settings, BASE, "g")
    assert f is not None and (f.code, f.severity, f.hop) == ("idempotency_lock_stale", "error", "g")
    assert f.sentence == (f"stream {STREAM}, group pp: the idempotency lock idem:pp:E is held (ttl 77s) while the "
                          "message sits in the PEL: its next read will be acknowledged with no effect")
    assert f.next_step == (f"propose_remediation(symptom='clear_stale_lock', stream='{STREAM}', group='pp', "
                           f"ids=['{BASE}-0'])")
    f = _group_finding(delivery("acknowledged", lock_stale=True, lock_ttl=5, last_error="x"), settings, BASE, "g")
    assert f is not None and "is held (ttl 5s) while the message failed: its next read" in f.sentence


def test_a_dead_letter(settings) -> None:
    dl = MessageDeadLetter(dlq_stream=f"{STREAM}-dlq", dlq_entry_id="9-0", message_id=f"{BASE}-0", error=None)
    f = _group_finding(delivery("dead_lettered", dead=[dl], attempt=4), settings, BASE, "g")
    assert f is not None and (f.code, f.severity, f.hop) == ("in_dlq", "error", "g")
    assert f.sentence == (f"stream {STREAM}, group pp: dead-lettered to {STREAM}-dlq (entry 9-0) after 4 attempts: "
                          "no error recorded")
    assert f.next_step == (f"dlq_list(stream='{STREAM}') to export it; fix the cause; then "
                           f"propose_remediation(symptom='dlq_replay', stream='{STREAM}', group='pp', "
                           f"ids=['{BASE}-0'])")


def test_an_acknowledged_delivery_has_no_finding(settings) -> None:
    assert _group_finding(delivery("acknowledged"), settings, BASE, "g") is None


def test_the_delivery_state_texts() -> None:
    assert _delivery_state_text(delivery("pending", pending=pel(1234))) == (
        "pending on worker-1 for 1234 ms (2 deliveries)")
    assert _delivery_state_text(delivery("pending")) == "delivered and acknowledged"  # no PEL detail to show
    dl = MessageDeadLetter(dlq_stream="s-dlq", dlq_entry_id="9-0", message_id="1-0")
    assert _delivery_state_text(delivery("dead_lettered", dead=[dl])) == "acknowledged after dead-lettering to s-dlq"
    assert _delivery_state_text(delivery("not_delivered")) == f"not delivered (group last-delivered-id {BASE - 5}-0)"


def test_the_searched_texts() -> None:
    ref = StreamEntryRef(stream=STREAM, searched_from_ms=10, searched_to_ms=20, scanned=7, windows=[[10, 20]],
                         clock_offset_ms=-250)
    assert _searched_text(ref) == "7 entries read between 10 and 20 ms in 1 step(s), clock offset -250 ms applied"
    ref.read_whole, ref.whole_complete, ref.length, ref.clock_offset_ms = True, True, 12, 0
    assert _searched_text(ref) == "read the whole stream, 12 entries (7 entries read in all)"


# -- the clock and the key hops --------------------------------------------------------------------


async def test_redis_now_is_redis_time_in_ms(r, ar) -> None:
    seconds, micros = r.time()
    before = seconds * 1000 + micros // 1000
    now = await redis_now_ms(ar, STREAM)
    seconds, micros = r.time()
    assert before <= now <= seconds * 1000 + micros // 1000


async def test_a_key_hop_value_and_ttl(r, ar) -> None:
    r.set("guard:forever", "w-1")
    r.set("guard:ttl", "w-2", ex=100)
    r.set("guard:long", "v" * 100)
    r.rpush("guard:list", "x")
    assert await get_key(ar, "guard:forever", 64) == {"key": "guard:forever", "exists": True, "value": "w-1",
                                                      "truncated": False, "ttl_s": None}
    ttl = await get_key(ar, "guard:ttl", 64)
    assert ttl["value"] == "w-2" and 90 <= ttl["ttl_s"] <= 100
    assert await get_key(ar, "guard:long", 99) == {"key": "guard:long", "exists": True, "value": "v" * 99,
                                                   "truncated": True, "ttl_s": None}
    assert (await get_key(ar, "guard:long", 100))["truncated"] is False
    assert await get_key(ar, "guard:list", 64) == {"key": "guard:list", "exists": True, "value": None,
                                                   "truncated": False, "ttl_s": None}
    assert await get_key(ar, "guard:absent", 64) == {"key": "guard:absent", "exists": False, "value": None,
                                                     "truncated": False, "ttl_s": None}


async def test_a_key_in_its_last_second_shows_ttl_zero_not_none(r, ar) -> None:
    """Redis rounds TTL to the nearest second: under 500 ms left it says 0, which is a TTL (not "no expiry")."""
    for _ in range(5):
        r.set("guard:ending", "w", px=490)
        hop = await get_key(ar, "guard:ending", 64)
        if hop["exists"]:  # read before it expired (a loaded machine may miss the 490 ms: try again)
            assert hop["ttl_s"] == 0
            return
    pytest.fail("the key expired before each of 5 reads")


async def test_stream_hops_searches_from_the_expected_push_time(r, ar, make_settings) -> None:
    """The row's push time (processed_at) is where the search starts, not the latest row time."""
    target = add(r, BASE, "E")
    fill(r, BASE + 1, 100)
    r.xgroup_create(STREAM, "pp", id="$")
    hops, _ = await stream_hops(ar, make_settings(), STREAM, "E", [BASE - 10, BASE + 100], BASE + 200, "", BASE)
    assert hops[0].entry is not None and (hops[0].entry.entry_id, hops[0].entry.scanned) == (target, 1)
    hops, _ = await stream_hops(ar, make_settings(), STREAM, "E", [BASE - 10, BASE + 100], BASE + 200, "")
    assert hops[0].entry is not None and hops[0].entry.scanned == 101  # from the latest time (+100) back


async def test_stream_hops_shifts_its_search_by_the_clock_offset(r, ar, make_settings) -> None:
    fill(r, BASE + 3_599_500, 100)  # older entries inside the window: the search must start at the entry
    target = add(r, BASE + 3_600_000, "E")
    r.xgroup_create(STREAM, "pp", id="$")
    settings = make_settings(limits={"stream_window_ms": 1000, "stream_read_whole_max": 0,
                                     "stream_window_max_ms": 1000})
    hops, findings = await stream_hops(ar, settings, STREAM, "E", [BASE], BASE + 3_600_500, "", BASE, 3_600_000)
    assert (hops[0].state, hops[0].entry.entry_id, findings) == ("present", target, [])
    assert hops[0].entry.scanned == 50  # one page back from the shifted push time holds it
    hops, _ = await stream_hops(ar, settings, STREAM, "E", [BASE], BASE + 3_600_500, "", BASE, 0)
    assert hops[0].state == "not_found"


async def test_redis_now_on_a_cluster_is_the_clock_of_the_keys_node(cluster_backend) -> None:
    client = aioredis.RedisCluster.from_url(cluster_backend.url)
    try:
        seconds, micros = cluster_backend.client.time(target_nodes=cluster_backend.client.get_node_from_key(STREAM))
        now = await redis_now_ms(client, STREAM)
        assert 0 <= now - (seconds * 1000 + micros // 1000) < 5000
    finally:
        await client.aclose()


async def test_the_trim_proof_allows_the_clock_slack_of_the_search_window(r, ar, make_settings) -> None:
    """The push time is known within ``stream_window_ms``: 40 ms after the first entry left is still "trimmed"."""
    fill(r, 50_000, 30)
    r.xtrim(STREAM, maxlen=20, approximate=False)  # first entry now 50,010
    settings = make_settings(conventions={"stream_maxlen": 20}, limits={"stream_window_ms": 100})
    _, findings = await stream_hops(ar, settings, STREAM, "E", [50_050], 99_000, "", 50_050)
    assert findings[0].code == "trimmed", findings[0].sentence
    settings = make_settings(conventions={"stream_maxlen": 20}, limits={"stream_window_ms": 10})
    _, findings = await stream_hops(ar, settings, STREAM, "E", [50_050], 99_000, "", 50_050)
    assert findings[0].code == "entry_not_found"  # 50,040 with 10 ms of slack: not older than the first entry


async def test_an_entry_pushed_in_the_first_entrys_millisecond_before_it_was_trimmed(r, ar, make_settings) -> None:
    """Pushed at ms P (sequence unknown: 0, the earliest), the first entry left is P-1: the entry was before it."""
    fill(r, 60_000, 5)
    r.xadd(STREAM, {"id": "other-a"}, id="60005-0")
    r.xadd(STREAM, {"id": "other-b"}, id="60005-1")
    fill(r, 60_006, 3)
    r.xtrim(STREAM, maxlen=4, approximate=False)  # left: 60005-1, 60006, 60007, 60008
    settings = make_settings(conventions={"stream_maxlen": 4}, limits={"stream_window_ms": 0})
    hops, findings = await stream_hops(ar, settings, STREAM, "E", [60_005], 99_000, "", 60_005)
    assert hops[0].entry is not None and hops[0].entry.first_entry_id == "60005-1"
    assert findings[0].code == "trimmed", findings[0].sentence


async def test_the_retry_keys_are_found_under_the_event_id(r, ar, make_settings) -> None:
    """Post-processors key their retries by the event's own id (the entry's ``id`` field), not the entry id."""
    settings = make_settings()
    entry = add(r, BASE, "E")
    r.xgroup_create(STREAM, "pp", id="0")
    r.xreadgroup("pp", "worker-1", {STREAM: ">"})
    r.set(keys.retry_attempt_key(settings.conventions, "pp", "E"), "2")
    r.set(keys.retry_last_error_key(settings.conventions, "pp", "E"), "db down")
    hops, findings = await stream_hops(ar, settings, STREAM, "E", [BASE], BASE + 1000, "")
    assert [f.code for f in findings] == ["in_pel"]
    assert "; retry attempt 2, last error: db down" in findings[0].sentence
    assert hops[1].delivery is not None and hops[1].delivery.message_id_used == "E"
    assert hops[1].delivery.entry_id == entry



# -- the band's edges and its page budget ------------------------------------------------------------


async def test_a_one_millisecond_window_is_searched(r, ar, make_settings) -> None:
    target = add(r, BASE, "E")
    settings = make_settings(limits={"stream_window_ms": 0, "stream_read_whole_max": 0, "stream_window_max_ms": 0})
    ref, _ = await locate_entry(ar, settings, STREAM, "E", [BASE])
    assert (ref.entry_id, ref.windows) == (target, [[BASE, BASE]])


async def test_the_widening_goes_on_when_the_older_side_reaches_zero(r, ar, make_settings) -> None:
    fill(r, 100, 3)
    target = add(r, 10_000, "E")
    settings = make_settings(limits={"stream_window_ms": 1000, "stream_read_whole_max": 0,
                                     "stream_window_max_ms": 64_000})
    ref, _ = await locate_entry(ar, settings, STREAM, "E", [500])
    assert ref.entry_id == target
    assert ref.windows == [[0, 1500], [1501, 4500], [4501, 16_500]]  # no band below 0 is recorded


async def test_a_window_ending_at_its_centre_spends_one_page(r, ar, make_settings) -> None:
    """Centre at the window's end: one page back, none forward, so the whole read still has its page."""
    target = add(r, BASE, "E")
    fill(r, BASE + 1, 2)
    settings = make_settings(limits={"stream_window_ms": 10, "max_count": 10, "scan_max_iterations": 2})
    ref, _ = await locate_entry(ar, settings, STREAM, "E", [BASE + 1000], BASE + 2000)
    assert (ref.entry_id, ref.read_whole, ref.scanned) == (target, True, 3)


async def test_a_short_page_ends_its_direction(r, ar, make_settings) -> None:
    """A page shorter than asked is the end of that side: no empty page after it (the budget is kept)."""
    target = add(r, BASE - 5000, "E")
    fill(r, BASE - 3, 3)
    settings = make_settings(limits={"stream_window_ms": 10, "max_count": 10, "scan_max_iterations": 3})
    ref, _ = await locate_entry(ar, settings, STREAM, "E", [BASE], BASE)
    # back: 3 entries (short: done), forward: none (done); the whole read gets the last page
    assert (ref.entry_id, ref.read_whole, ref.scanned) == (target, True, 3 + 4)


async def test_the_page_budget_is_never_exceeded(r, ar, make_settings) -> None:
    fill(r, BASE - 60, 60)
    add(r, BASE + 10, "E")
    settings = make_settings(limits={"stream_window_ms": 100, "scan_max_iterations": 1})
    ref, _ = await locate_entry(ar, settings, STREAM, "E", [BASE], BASE)
    assert (ref.entry_id, ref.scanned, ref.read_whole) == (None, 50, True)  # one page back, then nothing


async def test_the_back_side_keeps_paging_when_there_is_no_forward_side(r, ar, make_settings) -> None:
    target = add(r, BASE, "E")
    fill(r, BASE + 1, 120)
    settings = make_settings(limits={"stream_window_ms": 200, "stream_read_whole_max": 0, "stream_window_max_ms": 0})
    ref, _ = await locate_entry(ar, settings, STREAM, "E", [BASE], BASE + 120)
    # centre +120, window [-200, +200]: back 50 (+120..+71), forward 0 (done), back 100 (+70..+0): found
    assert (ref.entry_id, ref.scanned) == (target, 50 + 71)
    settings = make_settings(limits={"stream_window_ms": 0, "stream_read_whole_max": 0, "stream_window_max_ms": 0})
    ref, _ = await locate_entry(ar, settings, STREAM, "E", [BASE - 10, BASE + 120], BASE + 500)
    # the centre clamped to the end (+120): no forward side at all; back 50, then 100 (71 left)
    assert (ref.entry_id, ref.scanned) == (target, 50 + 71)


async def test_back_pages_are_bounded_even_far_from_the_start(r, ar, make_settings) -> None:
    fill(r, BASE - 200, 200)
    add(r, BASE, "other")
    fill(r, BASE + 1, 100)
    target = add(r, BASE + 250, "E")
    settings = make_settings(limits={"stream_window_ms": 1000})
    ref, _ = await locate_entry(ar, settings, STREAM, "E", [BASE], BASE)
    # back 50 (+0..-49), forward 50 (+1..+50), back 100 (-50..-149), forward 100 (+51..+100 and +250): each
    # back page holds at most its count, though 201 entries lie back to the window's start
    assert ref.entry_id == target
    assert ref.scanned == 50 + 50 + 100 + 51


@pytest.mark.parametrize(("whole_max", "read_whole"), [(5, False), (6, True)])
async def test_a_stream_is_read_whole_only_below_stream_read_whole_max(r, ar, make_settings, whole_max,
                                                                       read_whole) -> None:
    fill(r, BASE, 5)
    settings = make_settings(limits={"stream_window_ms": 10, "stream_read_whole_max": whole_max,
                                     "stream_window_max_ms": 10})
    ref, _ = await locate_entry(ar, settings, STREAM, "E", [BASE + 900_000])
    assert (ref.length, ref.read_whole) == (5, read_whole)


async def test_the_widening_runs_on_the_last_page_left(r, ar, make_settings) -> None:
    fill(r, BASE - 3, 3)
    settings = make_settings(limits={"stream_window_ms": 1000, "stream_read_whole_max": 0,
                                     "stream_window_max_ms": 10_000_000, "scan_max_iterations": 3})
    ref, _ = await locate_entry(ar, settings, STREAM, "E", [BASE])
    # 2 pages for the first window, the last one for the older band; the newer band is recorded, not read
    assert ref.windows == [[BASE - 1000, BASE + 1000], [BASE - 4000, BASE - 1001], [BASE + 1001, BASE + 4000]]


async def test_a_widened_window_reaches_millisecond_zero(r, ar, make_settings) -> None:
    target = r.xadd(STREAM, {"id": "E"}, id="0-1").decode()
    settings = make_settings(limits={"stream_window_ms": 1000, "stream_read_whole_max": 0,
                                     "stream_window_max_ms": 64_000})
    ref, _ = await locate_entry(ar, settings, STREAM, "E", [5000])
    assert ref.entry_id == target and ref.windows[-1] == [0, 999]


async def test_each_widened_band_starts_next_to_the_window_already_read(r, ar, make_settings) -> None:
    fill(r, BASE - 1100, 99)  # BASE-1100 .. BASE-1002
    older = add(r, BASE - 1001, "E-old")
    add(r, BASE + 1001, "E-new")
    fill(r, BASE + 1002, 5)
    settings = make_settings(limits={"stream_window_ms": 1000, "stream_read_whole_max": 0,
                                     "stream_window_max_ms": 4000})
    ref, _ = await locate_entry(ar, settings, STREAM, "E-old", [BASE])
    assert ref.entry_id == older and ref.scanned == 50  # the older band's first page back holds it first
    ref, _ = await locate_entry(ar, settings, STREAM, "E-new", [BASE])
    # the older band: 50 + 50 (short: done); the newer band: back from BASE+1001 reads that millisecond only
    assert ref.entry_id is not None and ref.scanned == 50 + 50 + 1
