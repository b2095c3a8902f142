"""trace_event: each delivery verdict reproduced with real streams, groups and consumers."""

from __future__ import annotations

import time
import uuid

import pytest

from tests.outbox import sim

pytestmark = pytest.mark.anyio


def groups(report):
    return {h.delivery.group: h for h in report.hops if h.name == "group" and h.delivery is not None}


async def test_pending_event_ageing_is_event_pending(db, r, outbox_settings, tools_for) -> None:
    event_id = sim.insert_event(db, age_s=1200)
    async with tools_for(outbox_settings()) as tools:
        report = await tools.trace_event(event_id)
    assert (report.verdict.code, report.verdict.severity) == ("event_pending", "error")
    assert "Redis is unreachable" in report.verdict.sentence
    assert report.hops[0].name == "event_queue" and report.hops[0].state == "PENDING"


async def test_failed_push_is_event_pending_with_the_error(db, r, outbox_settings, tools_for) -> None:
    event_id = sim.insert_event(db, status="FAILED", age_s=100)
    db.execute('UPDATE event_queue SET "lastError" = %s WHERE id = %s', ("ECONNREFUSED 10.0.0.5:6379", event_id))
    async with tools_for(outbox_settings()) as tools:
        report = await tools.trace_event(event_id)
    assert report.verdict.code == "event_pending"
    assert "ECONNREFUSED" in report.verdict.sentence


async def test_processing_event_ageing_is_stuck_processing(db, r, outbox_settings, tools_for) -> None:
    event_id = sim.insert_event(db, status="PROCESSING", age_s=2000, updated_age_s=1900)
    async with tools_for(outbox_settings()) as tools:
        report = await tools.trace_event(event_id)
    assert report.verdict.code == "stuck_processing"


async def test_acknowledged_by_every_group_is_ok(db, r, outbox_settings, tools_for) -> None:
    event_id = sim.insert_event(db, targets=["user:created", "ws:user-created"])
    pushed = sim.runner_push_event(db, r, event_id)
    for stream, entry in pushed:
        for group in ("pp-social", "pp-ranking"):
            sim.ensure_group(r, stream, group)
            assert sim.consumer_read(r, stream, group, f"{group}-1") == [entry]
            sim.consumer_ack(r, stream, group, entry)
    async with tools_for(outbox_settings()) as tools:
        report = await tools.trace_event(event_id)
    assert report.verdict.code == "ok"
    entries = [h for h in report.hops if h.name == "stream_entry"]
    assert [(h.entry.stream, h.entry.entry_id) for h in entries] == pushed
    assert entries[0].entry.fields["type"] == "user:created"
    states = [(h.ref, h.state) for h in report.hops if h.name == "group"]
    assert len(states) == 4 and all(state == "acknowledged" for _, state in states)


async def test_group_behind_is_pushed_not_consumed(db, r, outbox_settings, tools_for) -> None:
    event_id = sim.insert_event(db)
    (stream, entry), = sim.runner_push_event(db, r, event_id)
    sim.ensure_group(r, stream, "pp-fast")
    sim.consumer_read(r, stream, "pp-fast", "c1")
    sim.consumer_ack(r, stream, "pp-fast", entry)
    sim.ensure_group(r, stream, "pp-stopped")  # its consumers never run: the entry is ahead of the group
    async with tools_for(outbox_settings()) as tools:
        report = await tools.trace_event(event_id)
    assert report.verdict.code == "pushed_not_consumed"
    g = groups(report)
    assert g["pp-stopped"].state == "not_delivered" and g["pp-stopped"].delivery.delivered is False
    assert g["pp-fast"].state == "acknowledged"


async def test_stream_without_group_is_pushed_not_consumed(db, r, outbox_settings, tools_for) -> None:
    event_id = sim.insert_event(db, targets=["post-created"])
    sim.runner_push_event(db, r, event_id)
    async with tools_for(outbox_settings()) as tools:
        report = await tools.trace_event(event_id)
    assert report.verdict.code == "pushed_not_consumed"
    assert "no consumer group" in report.verdict.sentence


async def test_unacknowledged_entry_is_in_pel(db, r, outbox_settings, tools_for) -> None:
    event_id = sim.insert_event(db)
    (stream, entry), = sim.runner_push_event(db, r, event_id)
    sim.ensure_group(r, stream, "pp-social")
    sim.consumer_read(r, stream, "pp-social", "social-1")  # DB down in the handler: no ack, no attempt counted
    sim.age_pending_entry(r, stream, "pp-social", "social-1", entry, idle_ms=120_000)
    async with tools_for(outbox_settings()) as tools:
        report = await tools.trace_event(event_id)
    assert (report.verdict.code, report.verdict.severity) == ("in_pel", "warning")
    pending = groups(report)["pp-social"].delivery.pending
    assert pending.consumer == "social-1" and pending.idle_ms >= 120_000 and pending.consumer_dead is False
    assert "list_pending" in report.verdict.next_step


async def test_entry_held_by_a_dead_consumer(db, r, outbox_settings, tools_for) -> None:
    event_id = sim.insert_event(db)
    (stream, _entry), = sim.runner_push_event(db, r, event_id)
    sim.ensure_group(r, stream, "pp-social")
    sim.consumer_read(r, stream, "pp-social", "social-crashed")
    time.sleep(1.1)  # the consumer never reads again
    settings = outbox_settings(limits={"dead_consumer_idle_ms": 1000})
    async with tools_for(settings) as tools:
        report = await tools.trace_event(event_id)
    assert report.verdict.code == "dead_consumer"
    assert "social-crashed" in report.verdict.sentence
    assert "claim_dead_consumer" in report.verdict.next_step
    assert groups(report)["pp-social"].delivery.pending.consumer_dead is True


async def test_dead_lettered_entry_is_in_dlq(db, r, outbox_settings, tools_for) -> None:
    event_id = sim.insert_event(db)
    (stream, entry), = sim.runner_push_event(db, r, event_id)
    for group in ("pp-social", "pp-ranking"):
        sim.ensure_group(r, stream, group)
        sim.consumer_read(r, stream, group, f"{group}-1")
    sim.consumer_ack(r, stream, "pp-ranking", entry)
    sim.consumer_dead_letter(r, stream, "pp-social", entry, "TypeError: cannot read properties of undefined")
    async with tools_for(outbox_settings()) as tools:
        report = await tools.trace_event(event_id)
    assert report.verdict.code == "in_dlq"
    assert "TypeError" in report.verdict.sentence
    g = groups(report)
    assert g["pp-social"].state == "dead_lettered"
    social = g["pp-social"].delivery
    assert social.retry.attempt == 5 and social.retry.last_error.startswith("TypeError")
    assert social.dead_letters[0].dlq_stream == stream + "-dlq" and social.dead_letters[0].message_id == entry
    assert g["pp-ranking"].state == "acknowledged"  # the other group's plain ack is not blamed
    assert g["pp-ranking"].delivery.idempotency.exists and not g["pp-ranking"].delivery.lock_stale
    assert [f.code for f in report.findings] == ["in_dlq"]


async def test_stale_idempotency_lock(db, r, outbox_settings, tools_for) -> None:
    event_id = sim.insert_event(db)
    (stream, entry), = sim.runner_push_event(db, r, event_id)
    sim.ensure_group(r, stream, "pp-social")
    sim.consumer_read(r, stream, "pp-social", "social-1")
    sim.consumer_lock_during_outage(r, "pp-social", entry)
    sim.age_pending_entry(r, stream, "pp-social", "social-1", entry, idle_ms=45_000)
    async with tools_for(outbox_settings()) as tools:
        report = await tools.trace_event(event_id)
    assert report.verdict.code == "idempotency_lock_stale"
    lock = groups(report)["pp-social"].delivery.idempotency
    assert lock.exists and lock.key == f"idempotency:post-processor:pp-social:{entry}" and lock.ttl_s > 86000
    assert "clear_stale_lock" in report.verdict.next_step


async def test_trimmed_entry(db, r, outbox_settings, tools_for) -> None:
    event_id = sim.insert_event(db, targets=["user:created"])
    (stream, entry), = sim.runner_push_event(db, r, event_id, maxlen=5)
    sim.ensure_group(r, stream, "pp-social")
    for i in range(10):
        r.xadd(stream, {"id": str(uuid.uuid4()), "type": "user:created", "n": str(i)}, maxlen=5, approximate=False)
    settings = outbox_settings(conventions={"stream_maxlen": 5})
    async with tools_for(settings) as tools:
        report = await tools.trace_event(event_id)
    assert report.verdict.code == "trimmed", report.verdict.sentence
    entry_hop = next(h for h in report.hops if h.name == "stream_entry")
    assert entry_hop.found is False and entry_hop.state == "trimmed"
    assert entry_hop.entry.first_entry_id > entry


async def test_missing_stream_is_named(db, r, outbox_settings, tools_for) -> None:
    event_id = sim.insert_event(db, status="COMPLETED", targets=["nobody-reads-this"])
    async with tools_for(outbox_settings()) as tools:
        report = await tools.trace_event(event_id)
    assert report.verdict.code == "not_found"
    assert "stream:nobody-reads-this does not exist" in report.verdict.sentence


async def test_unknown_event_is_not_found(db, r, outbox_settings, tools_for) -> None:
    async with tools_for(outbox_settings()) as tools:
        report = await tools.trace_event(str(uuid.uuid4()), service=None)
    assert report.verdict.code == "not_found"
    assert "purged" in report.verdict.sentence
    assert report.searched_services == ["user"]


async def test_event_id_must_be_a_uuid_for_a_named_service(db, r, outbox_settings, tools_for) -> None:
    from server.errors import InvalidArgument

    async with tools_for(outbox_settings()) as tools:
        with pytest.raises(InvalidArgument, match="not a UUID"):
            await tools.trace_event("1; DROP TABLE event_queue")
    assert db.execute("SELECT count(*) FROM event_queue").fetchone() == (0,)


async def test_stream_entry_id_field_comes_from_conventions(db, r, outbox_settings, tools_for) -> None:
    event_id = sim.insert_event(db, targets=["user:created"])
    db.execute("UPDATE event_queue SET status = 'COMPLETED', processed_at = now(), updated_at = now() "
               "WHERE id = %s", (event_id,))
    entry = r.xadd("stream:user:created", {"eventId": event_id, "type": "user:created"}).decode()
    async with tools_for(outbox_settings(conventions={"event_id_field": "eventId"})) as tools:
        report = await tools.trace_event(event_id)
    entry_hop = next(h for h in report.hops if h.name == "stream_entry")
    assert entry_hop.found and entry_hop.entry.entry_id == entry
    assert report.verdict.code == "pushed_not_consumed" and "no consumer group" in report.verdict.sentence
