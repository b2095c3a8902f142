"""Promise: a replay carries the message the runbook says (the original's exact fields, else the one
rebuilt from the dead letter's event JSON), and a dead letter that cannot be replayed faithfully is
left out with the reason, never replayed from a guess.

Dead letters are written here as the target system's RetryHelper writes them (``messageId``,
``error``, ``payload`` = JSON of the ParseResult, ``timestamp``), straight into ``<stream>-dlq``.
"""

from __future__ import annotations

import json
import uuid

import pytest
import redis

from server.connections import Connections
from server.errors import InvalidArgument, NotFound
from tests.remediation.conftest import GROUP, STREAM, settings_for
from tests.remediation.target_sim import js, new_event, push_event
from tools.remediation.model import Plan
from tools.remediation.planner import Request, propose

pytestmark = pytest.mark.anyio

DLQ = f"{STREAM}-dlq"


async def _propose(settings, **kw) -> Plan:
    connections = Connections(settings)
    try:
        return await propose(settings, connections, Request("dlq_replay", kw.get("stream", STREAM), kw.get("group"),
                                                            kw.get("service"), None, kw.get("ids")))
    finally:
        await connections.aclose()


def _dead(r: redis.Redis, message_id: str, event: dict | None, *, payload: str | None = None) -> str:
    if payload is None:
        payload = js({"success": True, "type": event["type"], "id": event["id"], "payload": js(event)})
    return r.xadd(DLQ, {"messageId": message_id, "error": "boom", "payload": payload, "timestamp": "1"}).decode()


@pytest.fixture
def group(redis_client: redis.Redis) -> None:
    redis_client.xgroup_create(STREAM, GROUP, id="0", mkstream=True)


async def test_a_trimmed_original_is_rebuilt_field_by_field(settings, redis_client, group) -> None:
    event = new_event(name="café")
    event["version"] = 3
    dlq_id = _dead(redis_client, "1700000000000-0", event)
    plan = await _propose(settings)
    (message,) = plan.steps[1].operation.messages
    assert (message.dlq_key, message.dlq_id, message.message_id, message.source) == (
        DLQ, dlq_id, "1700000000000-0", "dlq_payload")
    assert message.fields == [
        ("id", event["id"]), ("type", event["type"]), ("emitter", event["emitter"]),
        ("emitterId", event["emitterId"]), ("correlationId", event["correlationId"]), ("traceId", event["traceId"]),
        ("version", "3"), ("createdAt", event["createdAt"]), ("payload", js(event["payload"])), ("event", js(event)),
    ]
    assert f"dead letter {dlq_id}: the original was trimmed; the replay is rebuilt from the dead letter's event " \
           "JSON (id, type, envelope fields and event)" in plan.notes
    assert [(e.key, e.id) for e in plan.steps[0].operation.entries] == [(DLQ, dlq_id)]  # no original to save
    assert plan.steps[0].description == f"save 1 dead letter(s) of {DLQ} and 0 original(s) to the backup file"


async def test_the_original_s_exact_fields_when_it_is_still_there(settings, redis_client, group) -> None:
    event = new_event()
    message_id = push_event(redis_client, STREAM, event)
    redis_client.hset("unrelated", "x", "1")
    _dead(redis_client, message_id, event)
    plan = await _propose(settings)
    (message,) = plan.steps[1].operation.messages
    original = redis_client.xrange(STREAM, message_id, message_id)[0][1]
    assert message.source == "stream"
    assert message.fields == [(k.decode(), v.decode()) for k, v in original.items()]
    assert plan.steps[1].description == f"XADD 1 message(s) back into {STREAM} with their original fields"


async def test_dead_letters_that_cannot_be_replayed_faithfully_are_left_out(settings, redis_client, group) -> None:
    binary = redis_client.xadd(STREAM, {"event": b"\xff\xfe"}).decode()
    bad_binary = _dead(redis_client, binary, new_event())
    no_json = _dead(redis_client, "1700000000001-0", None, payload=js({"success": False, "payload": "{not json"}))
    not_object = _dead(redis_client, "1700000000002-0", None, payload=js({"payload": js([1, 2])}))
    no_id = _dead(redis_client, "oops", new_event())
    with pytest.raises(NotFound) as info:
        await _propose(settings)
    message = str(info.value)
    assert message.startswith(f"no dead letter to replay in {DLQ} (")
    assert f"dead letter {bad_binary} cannot be replayed: its original entry holds non-UTF-8 bytes, which a JSON " \
           "plan cannot carry" in message
    for dlq_id in (no_json, not_object):
        assert f"dead letter {dlq_id} cannot be replayed: its original entry was trimmed from {STREAM} and the " \
               "dead letter does not hold the event JSON (it did not parse when it failed)" in message
    assert f"dead letter {no_id} has no usable messageId: skipped" in message
    assert len(message.split("; ")) == 4


async def test_message_ids_are_found_across_pages_of_the_dlq(tmp_path, outbox_db, redis_url, redis_client,
                                                             group) -> None:
    settings = settings_for(tmp_path, outbox_db, redis_url, limits={"max_count": 2})
    events = [new_event() for _ in range(5)]
    dlq_ids = [_dead(redis_client, f"17000000000{i:02d}-0", e) for i, e in enumerate(events)]
    plan = await _propose(settings, ids=["1700000000004-0", "1700000000002-0", dlq_ids[0]])
    assert [e.id for e in plan.steps[0].operation.entries] == [dlq_ids[0], dlq_ids[2], dlq_ids[4]]
    assert plan.candidates_found == 3 and plan.warnings == []
    few = settings_for(tmp_path, outbox_db, redis_url, limits={"max_count": 2, "scan_max_iterations": 1})
    capped = await _propose(few, ids=["1700000000004-0", "1700000000001-0"])
    assert [e.id for e in capped.steps[0].operation.entries] == [dlq_ids[1]]
    assert capped.warnings == [f"1700000000004-0 is neither an entry id nor a messageId of {DLQ}"]


async def test_every_dead_letter_up_to_the_cap(tmp_path, outbox_db, redis_url, redis_client, group) -> None:
    settings = settings_for(tmp_path, outbox_db, redis_url, limits={"max_plan_messages": 2})
    dlq_ids = [_dead(redis_client, f"17000000000{i:02d}-0", new_event()) for i in range(2)]
    plan = await _propose(settings)
    assert [e.id for e in plan.steps[0].operation.entries] == dlq_ids
    assert not plan.truncated and plan.candidates_found == 2


async def test_streams_and_groups_are_resolved_or_refused_by_name(settings, redis_client) -> None:
    conv = settings.conventions
    short = STREAM.removeprefix(conv.stream_prefix)
    with pytest.raises(NotFound) as info:
        await _propose(settings, stream=short)
    assert str(info.value) == (f"no stream {short!r} (tried {short}, {STREAM}): list_streams shows the streams")
    redis_client.xadd(STREAM, {"a": "1"})
    with pytest.raises(NotFound) as info:
        await _propose(settings, stream=short)
    assert str(info.value) == f"stream {STREAM} has no consumer group: nothing would process a replay or a claim"
    redis_client.xgroup_create(STREAM, "g1", id="0")
    redis_client.xgroup_create(STREAM, "g2", id="0")
    with pytest.raises(InvalidArgument) as info:
        await _propose(settings, stream=short)
    assert str(info.value) == f"stream {STREAM} has several consumer groups (g1, g2): pass group"
    with pytest.raises(NotFound) as info:
        await _propose(settings, stream=f"{short}-dlq", group="g3")
    assert str(info.value) == f"group 'g3' is not a group of {STREAM}; its groups: g1, g2"
    _dead(redis_client, "1700000000000-0", new_event())
    assert (await _propose(settings, stream=f"{short}-dlq", group="g2")).steps[2].operation.group == "g2"
    redis_client.xgroup_destroy(STREAM, "g1")
    assert (await _propose(settings, stream=DLQ)).steps[2].operation.group == "g2"  # the only group


async def test_event_rows_in_another_state_are_named_not_reconciled(settings, redis_client, group, outbox_db) -> None:
    import psycopg

    done, failed = new_event(), new_event()
    with psycopg.connect(outbox_db, autocommit=True) as conn:
        for event, status in ((done, "COMPLETED"), (failed, "FAILED")):
            conn.execute("INSERT INTO event_queue (id, status, type, emitter) VALUES (%s, %s, 't', 'ms-event')",
                         (event["id"], status))
    for i, event in enumerate((done, failed, new_event(emitter="ms-other"))):
        _dead(redis_client, f"170000000000{i}-0", event)
    other = await _propose(settings, ids=["1700000000002-0"])  # no configured service emits ms-other
    assert "service event chosen from the events' emitter" not in other.notes
    assert "pass service=<name> to also reconcile the replayed events' event_queue rows" in other.notes
    one = await _propose(settings)  # the one configured service whose emitter (ms-event) is among the events'

    assert "service event chosen from the events' emitter" in one.notes
    sql = one.steps[-1]
    assert sql.action == "reconcile_sql" and [r.id for r in sql.operation.rows] == [failed["id"]]
    assert f"event_queue row {done['id']} is COMPLETED: nothing to reconcile" in one.notes
    assert sql.description == "event_queue: 1 row(s) FAILED -> COMPLETED (replay confirmed), one transaction"
    bare = settings_for(settings.resolved_state_dir.parent / "bare", None, settings.redis.url)
    nothing = await _propose(bare, ids=["1700000000001-0"])
    assert "reconcile_sql" not in [s.action for s in nothing.steps]
    assert not any("pass service=" in n for n in nothing.notes)  # no service is configured at all
    assert str(uuid.UUID(failed["id"])) == failed["id"] and json.loads(js(failed)) == failed
