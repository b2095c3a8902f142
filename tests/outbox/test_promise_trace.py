"""Promises of the traces: "late" thresholds in the right unit, and "trimmed" only with evidence.

Severities flip at ``[conventions] claim_interval_ms`` (a pending entry's idle, in ms),
``[limits] pending_ageing_s`` (an undelivered entry's age: its id time against Redis TIME,
compared in ms) and ``pending_ageing_s`` / ``processing_ageing_s`` for the jobs_outbox rows
(in s). Each is tested a few seconds each side of the limit with thresholds chosen so that
a unit slip (x1000 or /1000) flips the answer. A missing entry is ``trimmed`` only when the
stream's head moved past it and the stream sits at its MAXLEN; an entry deleted from a small
stream, an empty stream or a stream holding only later entries is *not* called trimmed.
"""

from __future__ import annotations

import time
import uuid

import pytest

from tests.outbox import sim

pytestmark = pytest.mark.anyio


def _group_hop(report, group: str):
    return next(h for h in report.hops if h.name == "group" and h.delivery is not None and h.delivery.group == group)


def _redis_now_ms(r) -> int:
    seconds, micros = r.time()
    return seconds * 1000 + micros // 1000


# -- in_pel: idle against claim_interval_ms (ms) -----------------------------------------------


@pytest.mark.parametrize(("idle_ms", "severity"), [(20_000, "info"), (28_000, "info"), (32_000, "warning"),
                                                   (90_000, "warning")])
async def test_in_pel_is_late_from_claim_interval_ms(db, r, outbox_settings, tools_for, idle_ms, severity) -> None:
    event_id = sim.insert_event(db)
    (stream, entry), = sim.runner_push_event(db, r, event_id)
    sim.ensure_group(r, stream, "pp-social")
    sim.consumer_read(r, stream, "pp-social", "social-1")
    sim.age_pending_entry(r, stream, "pp-social", "social-1", entry, idle_ms=idle_ms)
    settings = outbox_settings(conventions={"claim_interval_ms": 30_000},
                               limits={"dead_consumer_idle_ms": 3_600_000})
    async with tools_for(settings) as tools:
        report = await tools.trace_event(event_id)
    assert (report.verdict.code, report.verdict.severity) == ("in_pel", severity), report.verdict.sentence


# -- pushed_not_consumed: entry age against pending_ageing_s (compared in ms) -------------------


@pytest.mark.parametrize(("age_s", "severity"), [(1, "info"), (55, "info"), (65, "error"), (600, "error")])
async def test_an_undelivered_entry_is_late_after_pending_ageing_s(db, r, outbox_settings, tools_for, age_s,
                                                                   severity) -> None:
    event_id = sim.insert_event(db, status="COMPLETED", age_s=age_s, targets=["user:created"])
    db.execute("UPDATE event_queue SET processed_at = created_at, updated_at = created_at WHERE id = %s",
               (event_id,))
    stream = "stream:user:created"
    sim.ensure_group(r, stream, "pp-stopped")  # the group exists, its consumers never read
    pushed_ms = _redis_now_ms(r) - age_s * 1000
    r.xadd(stream, {"id": event_id, "type": "user:created"}, id=f"{pushed_ms}-0")
    settings = outbox_settings(limits={"pending_ageing_s": 60, "stream_window_ms": 3_600_000})
    async with tools_for(settings) as tools:
        report = await tools.trace_event(event_id)
    assert (report.verdict.code, report.verdict.severity) == ("pushed_not_consumed", severity), (
        report.verdict.sentence)
    assert _group_hop(report, "pp-stopped").state == "not_delivered"


# -- jobs_outbox: ages in seconds -------------------------------------------------------------


@pytest.mark.parametrize(("age_s", "severity"), [(50, "info"), (70, "error")])
async def test_a_pending_job_is_late_after_pending_ageing_s(db, r, outbox_settings, tools_for, age_s,
                                                            severity) -> None:
    job_id = sim.insert_job(db, age_s=age_s)
    async with tools_for(outbox_settings(limits={"pending_ageing_s": 60})) as tools:
        report = await tools.trace_job(job_id)
    assert (report.verdict.code, report.verdict.severity) == ("pending_in_outbox", severity), (
        report.verdict.sentence)


@pytest.mark.parametrize(("age_s", "code"), [(50, "pending_in_outbox"), (70, "stuck_processing")])
async def test_a_processing_job_is_stuck_after_processing_ageing_s(db, r, outbox_settings, tools_for, age_s,
                                                                   code) -> None:
    job_id = sim.insert_job(db, status="PROCESSING", age_s=age_s)
    async with tools_for(outbox_settings(limits={"processing_ageing_s": 60})) as tools:
        report = await tools.trace_job(job_id)
    assert report.verdict.code == code, report.verdict.sentence


@pytest.mark.parametrize(("pushed_age_s", "severity"), [(50, "info"), (70, "error")])
async def test_a_pushed_job_nobody_takes_is_late_after_pending_ageing_s(db, r, outbox_settings, tools_for,
                                                                        pushed_age_s, severity) -> None:
    job_id = sim.insert_job(db, age_s=pushed_age_s)
    sim.runner_push_job(db, r, job_id, pushed_age_s=pushed_age_s)
    async with tools_for(outbox_settings(limits={"pending_ageing_s": 60})) as tools:
        report = await tools.trace_job(job_id)
    assert (report.verdict.code, report.verdict.severity) == ("pushed_not_consumed", severity), (
        report.verdict.sentence)


# -- trimmed only with evidence ---------------------------------------------------------------


async def _trace(outbox_settings, tools_for, event_id, **settings):
    async with tools_for(outbox_settings(**settings)) as tools:
        return await tools.trace_event(event_id)


def _entry_hop(report):
    return next(h for h in report.hops if h.name == "stream_entry")


async def test_an_entry_deleted_from_a_small_stream_is_not_called_trimmed(db, r, outbox_settings, tools_for):
    stream = "stream:user:created"
    for i in range(3):  # older entries: the stream's head is before the event
        r.xadd(stream, {"id": str(uuid.uuid4()), "type": "user:created", "n": str(i)})
    event_id = sim.insert_event(db, targets=["user:created"])
    (_, entry), = sim.runner_push_event(db, r, event_id)
    r.xadd(stream, {"id": str(uuid.uuid4()), "type": "user:created", "n": "after"})
    r.xdel(stream, entry)  # deleted by hand (XDEL), not trimmed: the stream holds 4 entries of 10,000
    report = await _trace(outbox_settings, tools_for, event_id)
    assert report.verdict.code != "trimmed", report.verdict.sentence
    assert _entry_hop(report).state != "trimmed"
    assert "trimmed by MAXLEN" not in report.verdict.sentence


async def test_an_empty_stream_is_not_evidence_of_trimming(db, r, outbox_settings, tools_for):
    """The stream exists only because a post-processor created its group (MKSTREAM); MAXLEN never empties it."""
    event_id = sim.insert_event(db, status="COMPLETED", targets=["user:created"])
    sim.ensure_group(r, "stream:user:created", "pp-social")
    report = await _trace(outbox_settings, tools_for, event_id)
    assert report.verdict.code != "trimmed", report.verdict.sentence
    assert _entry_hop(report).state != "trimmed"


async def test_a_small_stream_holding_only_later_entries_is_not_called_trimmed(db, r, outbox_settings, tools_for):
    """Entries newer than the window but a stream far below its MAXLEN: nothing was trimmed from it."""
    event_id = sim.insert_event(db, status="COMPLETED", age_s=7200, targets=["user:created"])
    db.execute("UPDATE event_queue SET processed_at = created_at, updated_at = created_at WHERE id = %s",
               (event_id,))
    for i in range(3):
        r.xadd("stream:user:created", {"id": str(uuid.uuid4()), "type": "user:created", "n": str(i)})
    report = await _trace(outbox_settings, tools_for, event_id, limits={"stream_window_ms": 60_000})
    assert report.verdict.code != "trimmed", report.verdict.sentence
    assert _entry_hop(report).state != "trimmed"


async def test_a_stream_really_trimmed_past_the_entry_is_called_trimmed(db, r, outbox_settings, tools_for):
    """Control: MAXLEN trimming that removed the entry (head past it, stream at its MAXLEN) is ``trimmed``."""
    event_id = sim.insert_event(db, targets=["user:created"])
    (stream, entry), = sim.runner_push_event(db, r, event_id)
    time.sleep(0.01)
    for i in range(30):
        r.xadd(stream, {"id": str(uuid.uuid4()), "type": "user:created", "n": str(i)})
    r.xtrim(stream, maxlen=20, approximate=False)
    report = await _trace(outbox_settings, tools_for, event_id, conventions={"stream_maxlen": 20})
    assert report.verdict.code == "trimmed", report.verdict.sentence
    hop = _entry_hop(report)
    assert hop.state == "trimmed" and hop.entry.first_entry_id > entry
