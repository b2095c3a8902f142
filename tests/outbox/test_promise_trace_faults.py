"""The tracer when Redis fails part-way, and the ``[limits]`` that bound its Redis reads.

A Redis lost between two commands is played by a loopback TCP proxy in front of the real Redis
(:mod:`tests.redis_fault_proxy`): it forwards every command until the one named, then closes the
connection and refuses the later ones. Nothing of the code under test is replaced. Promises defended:

- Redis lost after the first of the clock offset's two ``TIME`` reads: no offset is kept or used,
  and Redis is named unavailable;
- Redis lost once an event's stream hop has started: that stream's hop and the next ones are
  ``unknown`` (each one named), Redis is named, and the verdict is not ``ok``;
- ``[limits] bull_list_scan_max`` and ``payload_max_bytes`` really bound the BullMQ reads of a trace;
- with Redis's clock off the database's (its ``TIME`` pinned by the proxy), a trimmed entry's push time is
  given on Redis's clock (the measured offset applied).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from tests.outbox import sim
from tests.outbox import trace_fixtures as fx
from tests.redis_fault_proxy import RedisFaultProxy

pytestmark = pytest.mark.anyio

module_db, db, r, tracer_for = fx.module_db, fx.db, fx.r, fx.tracer_for


@pytest.fixture
def proxy(redis_url: str) -> Iterator[RedisFaultProxy]:
    """A proxy to the test's scratch Redis database (same logical db)."""
    p = RedisFaultProxy.in_front_of(redis_url)
    yield p
    p.close()


def via(proxy: RedisFaultProxy) -> dict[str, str]:
    return {"url": proxy.url()}


async def test_redis_lost_between_the_clock_offsets_two_time_reads_gives_no_offset(tracer_for, proxy) -> None:
    tracer = tracer_for(redis=via(proxy))
    proxy.cut_at("TIME", nth=2)
    assert await tracer.clock_offset("user", "default", "stream:x") == 0
    assert proxy.commands.count("TIME") == 1 and proxy.is_cut  # the first TIME was answered, the second lost
    assert tracer.offsets == {}
    assert [p.service for p in tracer.unavailable] == ["redis"] and tracer.redis_down == {"default"}


async def test_redis_lost_during_a_stream_hop_marks_it_and_the_next_unknown(db, r, tracer_for, proxy) -> None:
    event_id = sim.insert_event(db, targets=["user:created", "user:audit"])
    for stream, entry in sim.runner_push_event(db, r, event_id):
        sim.ensure_group(r, stream, "pp")
        sim.consumer_read(r, stream, "pp", "c-1")
        sim.consumer_ack(r, stream, "pp", entry)
    proxy.cut_at("XRANGE")  # the stream hop's first read, after Redis's clock and the offset were read
    report = await tracer_for(redis=via(proxy)).trace_event("user", event_id)
    assert proxy.commands.count("TIME") == 3 and proxy.is_cut
    assert [(h.name, h.ref, h.found, h.state, h.healthy) for h in report.hops] == [
        ("event_queue", f"user.event_queue {event_id}", True, "COMPLETED", True),
        ("stream_entry", "stream:user:created", False, "unknown", None),
        ("stream_entry", "stream:user:audit", False, "unknown", None)]
    assert report.hops[1].detail == "Redis is unavailable: this hop could not be observed"
    assert [p.service for p in report.unavailable] == ["redis"]
    v = report.verdict
    assert (v.code, v.severity, v.hop) == ("inconclusive", "warning", "stream_entry"), v.sentence
    assert v.sentence == (f"event {event_id} was pushed, but redis could not be read for stream:user:created, "
                          "stream:user:audit: whether its consumer groups got it is not known (see unavailable)")
    assert v.next_step == "fix the access to redis and trace again"
    assert report.findings == [v]


async def test_an_event_whose_stream_instance_is_down_is_inconclusive_naming_it(db, r, tracer_for, redis_url) -> None:
    """stream:audit:* lives on instance 'events' (down), stream:user:* on the default (up): only the first is lost."""
    event_id = sim.insert_event(db, targets=["audit:created", "user:created"])
    ((_, _), (stream, entry)) = sim.runner_push_event(db, r, event_id)
    sim.ensure_group(r, stream, "pp")
    sim.consumer_read(r, stream, "pp", "c-1")
    sim.consumer_ack(r, stream, "pp", entry)
    events = {"url": fx.dead_port_url(), "streams": ["stream:audit:*"]}
    report = await tracer_for(redis={"url": redis_url, "instances": {"events": events}}).trace_event("user", event_id)
    assert [(h.name, h.ref, h.state) for h in report.hops] == [
        ("event_queue", f"user.event_queue {event_id}", "COMPLETED"),
        ("stream_entry", "stream:audit:created", "unknown"),
        ("stream_entry", f"{stream} {entry}", "present"), ("group", f"{stream} pp", "acknowledged")]
    assert [p.service for p in report.unavailable] == ["redis:events"]
    v = report.verdict
    assert (v.code, v.hop) == ("inconclusive", "stream_entry")
    assert v.sentence == (f"event {event_id} was pushed, but redis:events could not be read for stream:audit:created: "
                          "whether its consumer groups got it is not known (see unavailable)")
    assert v.next_step == "fix the access to redis:events and trace again"


async def test_the_bullmq_reads_of_a_trace_are_bounded_by_the_limits(db, r, tracer_for) -> None:
    """A job at index 12 of a 25-long wait list: [limits] bull_list_scan_max = 12 scans indexes 0-11 from the head
    and 24-13 from the tail, so it is not found (state unknown); 13 finds it. payload_max_bytes = 64 cuts its data."""
    job_id = sim.insert_job(db, target="scan-q", payload={"blob": "x" * 200})
    sim.runner_push_job(db, r, job_id)  # LPUSH: the job is at the head
    r.lpush("bull:scan-q:wait", *[f"before-{i}" for i in range(12)])  # 12 newer ones in front of it
    r.rpush("bull:scan-q:wait", *[f"after-{i}" for i in range(12)])  # 12 older ones behind it
    assert r.lpos("bull:scan-q:wait", job_id) == 12 and r.llen("bull:scan-q:wait") == 25
    report = await tracer_for(limits={"bull_list_scan_max": 12, "payload_max_bytes": 64}).trace_job("user", job_id)
    bull = next(h for h in report.hops if h.name == "bullmq_job").bull
    assert bull is not None and (bull.state, bull.found_in) == ("unknown", [])
    assert bull.data_truncated is True and bull.data is not None and len(bull.data.encode()) <= 64
    report = await tracer_for(limits={"bull_list_scan_max": 13, "payload_max_bytes": 4096}).trace_job("user", job_id)
    bull = next(h for h in report.hops if h.name == "bullmq_job").bull
    assert bull is not None and (bull.state, bull.found_in) == ("waiting", ["bull:scan-q:wait"])
    assert bull.data_truncated is False and '"blob"' in (bull.data or "")


async def test_an_event_whose_two_redis_instances_are_down_names_both(db, tracer_for) -> None:
    event_id = sim.insert_event(db, status="COMPLETED", targets=["user:created", "audit:created"])
    config = {"url": fx.dead_port_url(), "instances": {"events": {"url": fx.dead_port_url(),
                                                                  "streams": ["stream:audit:*"]}}}
    report = await tracer_for(redis=config).trace_event("user", event_id)
    assert sorted(p.service for p in report.unavailable) == ["redis", "redis:events"]
    assert report.verdict.sentence == (
        f"event {event_id} was pushed, but redis, redis:events could not be read for stream:user:created, "
        "stream:audit:created: whether its consumer groups got it is not known (see unavailable)")


async def test_a_trimmed_entry_is_looked_for_at_its_push_time_on_redis_s_clock(db, r, tracer_for, proxy) -> None:
    """Redis's clock an hour behind the database's (TIME pinned by the proxy): the measured offset is applied to
    the row's processed_at, so the push time given is on Redis's clock, not the database's."""
    event_id = sim.insert_event(db, targets=["user:trimmed-clock"])
    ((stream, _),) = sim.runner_push_event(db, r, event_id, maxlen=1)
    r.xadd(stream, {"id": "another"}, maxlen=1, approximate=False)
    processed_ms, db_now_ms = db.execute(
        "SELECT (EXTRACT(EPOCH FROM processed_at) * 1000)::bigint, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)"
        "::bigint FROM event_queue WHERE id = %s", (event_id,)).fetchone()
    proxy.pin_time(db_now_ms - 3_600_000)
    report = await tracer_for(redis=via(proxy)).trace_event("user", event_id)
    offset = report.clock_offsets_ms["user"]
    assert -3_610_000 < offset < -3_590_000, offset
    hop = report.hops[1]
    match = re.search(r"it was pushed about (\d+) ms \(Redis clock\)", hop.detail or "")
    assert match is not None, hop.detail
    assert abs(int(match[1]) - (processed_ms + offset)) < 1000, (match[1], processed_ms, offset)
