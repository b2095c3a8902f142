"""Promise: each ``inspect_stream`` anomaly rule fires exactly from its threshold, and says exactly
what it saw and what to call next.

The rules are plain functions over gathered facts, so boundaries are exact here: at the
threshold, one unit under and one unit over. The whole anomaly is compared (code, severity,
message, evidence, next step): the next step is a tool call the agent runs as written.
"""

from __future__ import annotations

import pytest

from tools.streams import anomalies as rules

S, G = "stream:event:created", "pp-event"


@pytest.mark.parametrize(("idle_ms", "fires"), [(59_999, False), (60_000, True), (60_001, True)])
def test_dead_consumer_from_its_idle_threshold(idle_ms: int, fires: bool) -> None:
    hit = rules.dead_consumer(S, G, "c1", 3, idle_ms, 60_000)
    assert (hit is not None) is fires


def test_dead_consumer_needs_pending_entries() -> None:
    assert rules.dead_consumer(S, G, "c1", 0, 10**9, 60_000) is None
    assert rules.dead_consumer(S, G, "c1", 1, 10**9, 60_000) is not None


def test_dead_consumer_says_what_it_saw() -> None:
    hit = rules.dead_consumer(S, G, "c1", 3, 90_000, 60_000)
    assert hit is not None
    assert hit.model_dump() == {
        "code": "dead_consumer", "severity": "error", "group": G, "consumer": "c1",
        "message": "consumer 'c1' of group 'pp-event' holds 3 pending entries and has not read or claimed for 1.5 min",
        "evidence": {"pending": 3, "idle_ms": 90_000, "threshold_ms": 60_000, "idle_ambiguous": False},
        "next_step": "list_pending(stream='stream:event:created', group='pp-event', consumer='c1') to see the "
                     "entries, then propose_remediation(symptom='claim_dead_consumer', stream='stream:event:created', "
                     "group='pp-event')",
    }
    ambiguous = rules.dead_consumer(S, G, "c1", 3, 90_000, 60_000, idle_ambiguous=True)
    assert ambiguous is not None and ambiguous.evidence["idle_ambiguous"] is True
    assert ambiguous.message.endswith(
        "for 1.5 min; nothing arrived on the stream since, and before Redis 7.2 an empty read or claim does not "
        "reset idle: confirm the consumer's process is gone before claiming")


@pytest.mark.parametrize(("ms", "text"), [(0, "0.0 s"), (59_999, "60.0 s"), (60_000, "1.0 min"),
                                          (81_000, "1.4 min"), (3_599_999, "60.0 min"), (3_600_000, "1.0 h"),
                                          (4_860_000, "1.4 h"), (5_400_000, "1.5 h")])
def test_durations_are_shown_in_the_right_unit(ms: int, text: str) -> None:
    hit = rules.dead_consumer(S, G, "c1", 1, ms, 0)
    assert hit is not None and hit.message.endswith(f"for {text}")


def test_stuck_pending_says_what_it_saw() -> None:
    hit = rules.stuck_pending(S, G, "c1", 4, "1-0", 120_000, 60_000, 10)
    assert hit.model_dump() == {
        "code": "stuck_pending", "severity": "warning", "group": G, "consumer": "c1",
        "message": "4 entries of group 'pp-event' have been pending with live consumer 'c1' for 2.0 min or more; a "
                   "consumer re-reads its own pending entries only on restart or claim",
        "evidence": {"count_in_sample": 4, "sampled": 10, "oldest_id": "1-0", "idle_ms": 120_000,
                     "threshold_ms": 60_000},
        "next_step": "list_pending(stream='stream:event:created', group='pp-event', consumer='c1', min_idle_ms=60000); "
                     "restart that consumer or claim the entries (propose_remediation symptom='claim_dead_consumer')",
    }


@pytest.mark.parametrize(("count", "fires"), [(-1, False), (0, False), (1, True)])
def test_trimmed_pending_needs_a_count(count: int, fires: bool) -> None:
    assert (rules.trimmed_pending(S, G, count, False, "5-0", ["1-0"]) is not None) is fires


def test_trimmed_pending_says_what_it_saw() -> None:
    hit = rules.trimmed_pending(S, G, 2, True, "5-0", ["1-0", "2-0"])
    dumped = hit.model_dump() if hit is not None else {}
    assert {k: v for k, v in dumped.get("evidence", {}).items() if k in (
        "count", "count_is_lower_bound", "first_entry_id", "sample_ids")} == {
        "count": 2, "count_is_lower_bound": True, "first_entry_id": "5-0", "sample_ids": ["1-0", "2-0"]}
    dumped.pop("evidence", None)
    assert dumped == {
        "code": "trimmed_pending", "severity": "error", "group": G, "consumer": None,
        "message": "2+ pending entries of group 'pp-event' are older than the first entry 5-0: their message was "
                   "trimmed; they can never be processed",
        "next_step": "list_pending(stream='stream:event:created', group='pp-event') shows them with "
                     "message_exists=false; find the events in event_queue (trace_event) before acknowledging them",
    }
    empty = rules.trimmed_pending(S, G, 1, False, None, ["1-0"])
    assert empty is not None and empty.message.startswith("1 pending entries of group 'pp-event'")
    assert " the stream is empty: " in empty.message and empty.evidence["first_entry_id"] is None


@pytest.mark.parametrize(("length", "fires"), [(0, False), (1, True)])
def test_no_group_needs_entries(length: int, fires: bool) -> None:
    assert (rules.no_group(S, length) is not None) is fires


def test_no_group_says_what_it_saw() -> None:
    hit = rules.no_group(S, 7)
    assert hit is not None and hit.model_dump() == {
        "code": "no_group", "severity": "warning", "group": None, "consumer": None,
        "message": "stream 'stream:event:created' holds 7 entries but has no consumer group: nothing reads it",
        "evidence": {"length": 7},
        "next_step": "analyze_impact(target='stream:event:created') to find the post-processor that should read it "
                     "and check that it starts (it creates its group on start)",
    }


@pytest.mark.parametrize(("age_ms", "fires"), [(None, False), (29_999, False), (30_000, True), (30_001, True)])
def test_lag_growing_from_its_age_threshold(age_ms: int | None, fires: bool) -> None:
    assert (rules.lag_growing(S, G, 5, "xinfo", "9-0", age_ms, 30_000, 1) is not None) is fires


def test_lag_growing_needs_an_oldest_entry_and_says_what_it_saw() -> None:
    assert rules.lag_growing(S, G, 5, "xinfo", None, 10**9, 30_000, 1) is None
    hit = rules.lag_growing(S, G, None, "scan", "9-0", 45_000, 30_000, 0)
    assert hit is not None and hit.model_dump() == {
        "code": "lag_growing", "severity": "warning", "group": G, "consumer": None,
        "message": "group 'pp-event' has some undelivered entries, the oldest waiting for 45.0 s: it has no consumer",
        "evidence": {"lag": None, "lag_source": "scan", "oldest_undelivered_id": "9-0", "age_ms": 45_000,
                     "threshold_ms": 30_000, "consumers": 0},
        "next_step": "check that the consumers of group 'pp-event' run and are not failing (inspect_stream again to "
                     "see whether last_delivered_id moves)",
    }
    busy = rules.lag_growing(S, G, 5, "xinfo", "9-0", 45_000, 30_000, 2)
    assert busy is not None and busy.message.endswith("group 'pp-event' has 5 undelivered entries, the oldest "
                                                      "waiting for 45.0 s: its 2 consumer(s) do not keep up")


@pytest.mark.parametrize(("length", "fires"), [(0, False), (1, True)])
def test_dlq_not_empty_needs_entries(length: int, fires: bool) -> None:
    assert (rules.dlq_not_empty(S, f"{S}-dlq", length, "3-0", 10) is not None) is fires


def test_dlq_not_empty_says_what_it_saw() -> None:
    hit = rules.dlq_not_empty(S, f"{S}-dlq", 2, "3-0", 10)
    assert hit is not None and hit.model_dump() == {
        "code": "dlq_not_empty", "severity": "warning", "group": None, "consumer": None,
        "message": "dead-letter stream 'stream:event:created-dlq' holds 2 entries; nothing replays them",
        "evidence": {"dlq": "stream:event:created-dlq", "length": 2, "newest_id": "3-0", "newest_age_ms": 10},
        "next_step": "dlq_list(stream='stream:event:created') to read them; after fixing the cause, "
                     "propose_remediation(symptom='dlq_replay', stream='stream:event:created')",
    }


def test_stale_idempotency_lock_says_what_it_saw() -> None:
    assert rules.stale_idempotency_lock(S, G, [], 5) is None
    locks = [{"message_id": f"{i}-0", "key": f"k{i}"} for i in range(25)]
    hit = rules.stale_idempotency_lock(S, G, locks, 30)
    assert hit is not None
    ids = [f"{i}-0" for i in range(20)]
    assert hit.model_dump() == {
        "code": "stale_idempotency_lock", "severity": "error", "group": G, "consumer": None,
        "message": "25 message(s) of group 'pp-event' are not done but hold an idempotency lock: their next read "
                   "will be acknowledged with no effect",
        "evidence": {"locks": locks[:20], "checked": 30},
        "next_step": f"propose_remediation(symptom='clear_stale_lock', stream='stream:event:created', "
                     f"group='pp-event', ids={ids!r}) then let the consumer re-read them",
    }
