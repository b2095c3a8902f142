"""Promise: a dead letter is replayed once; an earlier plan's replay is cleaned up only once it was
processed, and the cleanup (XDEL, retry keys, retry queue) touches only the dead letters of the plan,
behind the confirm step of this plan's own replays.

The earlier replays are the audit log's ``replayed`` records, written here as the replay runner writes
them; the replayed entries are put in the states :func:`replay_state` reads (acknowledged, pending,
never delivered). Dead letters are written as the target system's RetryHelper writes them.
"""

from __future__ import annotations

import json

import pytest
import redis

from server.approval.audit import audit_log
from server.connections import Connections
from tests.remediation.conftest import GROUP, STREAM, settings_for
from tests.remediation.target_sim import js, new_event, push_event
from tools.remediation import redis_reads as rr
from tools.remediation.model import Check, Plan
from tools.remediation.planner import Request, propose
from tools.streams.keys import idempotency_key, retry_attempt_key, retry_key, retry_queue_key

pytestmark = pytest.mark.anyio

DLQ = f"{STREAM}-dlq"


async def _propose(settings, **kw) -> Plan:
    connections = Connections(settings)
    try:
        return await propose(settings, connections, Request("dlq_replay", STREAM, kw.get("group"), kw.get("service"),
                                                            None, kw.get("ids")))
    finally:
        await connections.aclose()


def _dead(r: redis.Redis, message_id: str, event: dict | None = None, *, payload: str | None = None) -> str:
    event = event or new_event()
    if payload is None:
        payload = js({"success": True, "type": event["type"], "id": event["id"], "payload": js(event)})
    return r.xadd(DLQ, {"messageId": message_id, "error": "boom", "payload": payload, "timestamp": "1"}).decode()


def _replayed(settings, dlq_id: str, message_id: str, new_id: str) -> None:
    """The record the replay runner writes for each message it added."""
    audit_log(settings).record("replayed", plan_id="p-earlier", plan_sha256="0" * 64, approver="alice", step=2,
                               action="replay", result="done", detail=f"{DLQ} {dlq_id} replayed as {new_id}",
                               dlq_key=DLQ, dlq_id=dlq_id, message_id=message_id, new_id=new_id, stream=STREAM)


def _c(kind: str, **args) -> Check:
    return Check(kind=kind, args=args)


def _unchanged(r: redis.Redis, dlq_id: str) -> Check:
    fields = r.xrange(DLQ, dlq_id, dlq_id)[0][1]
    return _c("entry_unchanged", key=DLQ, id=dlq_id, digest=rr.digest(rr.fields_pairs(fields)))


@pytest.fixture
def group(redis_client: redis.Redis) -> None:
    redis_client.xgroup_create(STREAM, GROUP, id="0", mkstream=True)


async def test_an_earlier_replay_is_cleaned_up_once_processed_and_never_replayed_again(
    settings, redis_client, group
) -> None:
    r = redis_client
    conv = settings.conventions
    done_mid, pending_mid, waiting_mid, fresh_mid = (f"170000000000{i}-0" for i in range(4))
    done, pending, waiting, fresh = (_dead(r, m) for m in (done_mid, pending_mid, waiting_mid, fresh_mid))
    n_done, n_pending = (push_event(r, STREAM, new_event()) for _ in range(2))
    r.xreadgroup(GROUP, "pp-1", {STREAM: ">"}, count=2)
    r.xack(STREAM, GROUP, n_done)  # processed
    n_waiting = push_event(r, STREAM, new_event())  # not read by the group yet
    for dlq_id, mid, new_id in ((done, done_mid, n_done), (pending, pending_mid, n_pending),
                                (waiting, waiting_mid, n_waiting)):
        _replayed(settings, dlq_id, mid, new_id)
    # the processed replay's retry bookkeeping, and another message's that is not in the plan
    for mid in (done_mid, "1699999999999-0"):
        r.set(retry_attempt_key(conv, GROUP, mid), "3")
        r.set(idempotency_key(conv, GROUP, mid), "done", ex=600)
        r.zadd(retry_queue_key(conv, GROUP), {mid: 5})
    plan = await _propose(settings)

    assert [s.action for s in plan.steps] == ["export", "replay", "confirm_replay", "xdel_dlq", "delete_retry_keys",
                                              "zrem_retry_queue"]
    export, replay, confirm, xdel, keys, zrem = plan.steps
    assert [(e.key, e.id) for e in export.operation.entries] == [(DLQ, done), (DLQ, fresh)]  # both originals gone
    assert export.description == f"save 2 dead letter(s) of {DLQ} and 0 original(s) to the backup file"
    unchanged = [_unchanged(r, done), _unchanged(r, fresh)]
    assert export.checks == unchanged
    assert [(m.dlq_id, m.message_id) for m in replay.operation.messages] == [(fresh, fresh_mid)]  # not `done` again
    assert replay.checks == [unchanged[1], _c("step_ok", step=1, output_key=None)]
    assert replay.description == f"XADD 1 message(s) back into {STREAM} with their original fields"
    assert (confirm.operation.replay_step, confirm.checks) == (2, [_c("step_ok", step=2, output_key=None)])
    confirmed = _c("step_ok", step=3, output_key="confirmed")
    assert xdel.operation.ids == [done, fresh] and xdel.checks == [*unchanged, confirmed]
    lock, attempt = idempotency_key(conv, GROUP, done_mid), retry_attempt_key(conv, GROUP, done_mid)
    assert keys.operation.keys == [attempt, lock]
    assert keys.checks == [_c("key_unchanged", key=k, digest=d, allow_missing=True) for k, d in (
        (attempt, rr.digest({"type": "string", "content": "3"})),
        (lock, rr.digest({"type": "string", "content": "done"})))] + [confirmed]
    assert keys.description == f"delete 2 retry/idempotency key(s) of group {GROUP}" and keys.target == \
        f"{attempt}, {lock}"
    assert zrem.operation.members == [done_mid]
    assert zrem.checks == [_c("zset_member", key=retry_queue_key(conv, GROUP), member=done_mid, allow_missing=True),
                           confirmed]
    assert plan.blast_radius.messages == 2 and plan.blast_radius.keys == 3
    assert plan.summary == (f"replay 1 dead letter(s) of {DLQ} into {STREAM} for group {GROUP}, then clean up "
                            "2 dead letter(s) and their retry bookkeeping")
    assert f"dead letter {done} was replayed as {n_done} by plan p-earlier and processed: only its cleanup is " \
           "planned" in plan.notes
    (w_pending, w_waiting) = plan.warnings
    assert w_pending.startswith(f"dead letter {pending} was already replayed by plan p-earlier as {n_pending}: the "
                                f"replay {n_pending} is pending at consumer pp-1 (1 deliveries, idle ")
    assert w_pending.endswith(" ms); it is not replayed again")
    assert w_waiting == (f"dead letter {waiting} was already replayed by plan p-earlier as {n_waiting}: the replay "
                         f"{n_waiting} was not read by group {GROUP} yet (is a consumer running?); it is not "
                         "replayed again")
    assert plan.candidates_found == 4


async def test_the_cleanup_of_processed_replays_alone_waits_on_no_confirm_step(settings, redis_client, group) -> None:
    r = redis_client
    conv = settings.conventions
    r.xgroup_create(STREAM, "audit", id="0")  # a second group: nothing is delivered to it by a cleanup
    mid = "1700000000000-0"
    dlq_id = _dead(r, mid)
    new_id = push_event(r, STREAM, new_event())
    for g in (GROUP, "audit"):
        r.xreadgroup(g, "c", {STREAM: ">"})
        r.xack(STREAM, g, new_id)
    _replayed(settings, dlq_id, mid, new_id)
    r.set(retry_key(conv, GROUP, mid), "x", ex=600)
    plan = await _propose(settings, group=GROUP)
    assert [s.action for s in plan.steps] == ["export", "xdel_dlq", "delete_retry_keys"]
    export, xdel, keys = plan.steps
    unchanged = _unchanged(r, dlq_id)
    assert export.checks == [unchanged] and xdel.checks == [unchanged]
    assert keys.checks == [_c("key_unchanged", key=retry_key(conv, GROUP, mid),
                              digest=rr.digest({"type": "string", "content": "x"}), allow_missing=True)]
    assert plan.blast_radius.consumer_groups_reached == [] and plan.warnings == []
    assert plan.summary == (f"replay 0 dead letter(s) of {DLQ} into {STREAM} for group {GROUP}, then clean up "
                            "1 dead letter(s) and their retry bookkeeping")


async def test_a_replay_reaching_several_groups_is_named_with_each(settings, redis_client, group) -> None:
    redis_client.xgroup_create(STREAM, "audit", id="0")
    _dead(redis_client, "1700000000000-0")
    plan = await _propose(settings, group="audit")
    assert plan.steps[2].operation.group == "audit"
    assert plan.warnings == [f"a replay is delivered to every group of {STREAM} (audit, {GROUP}), not only audit: "
                             "their consumers must tolerate a second delivery (idempotence, runbook golden rule 2)"]
    assert plan.blast_radius.consumer_groups_reached == ["audit", GROUP]


async def test_a_rebuilt_replay_takes_what_the_dead_letter_holds_and_nothing_more(settings, redis_client,
                                                                                group) -> None:
    event = new_event()
    del event["traceId"], event["version"]
    event["emitterId"] = 5
    text = json.dumps(event)  # not JSON.stringify's spacing: carried as it is
    bare = _dead(redis_client, "1700000000000-0", payload=js({"success": False, "payload": text}))
    plan = await _propose(settings)
    (message,) = plan.steps[1].operation.messages
    assert (message.dlq_id, message.source) == (bare, "dlq_payload")
    assert message.fields == [
        ("id", event["id"]), ("type", event["type"]), ("emitter", event["emitter"]), ("emitterId", "5"),
        ("correlationId", event["correlationId"]), ("createdAt", event["createdAt"]),
        ("payload", js(event["payload"])), ("event", text),
    ]


async def test_the_service_comes_from_the_event_s_emitter_else_the_parse_result_s(tmp_path, outbox_db, redis_url,
                                                                                redis_client, group) -> None:
    services = {"event": {"postgres": outbox_db}, "user": {"postgres": outbox_db}}
    settings = settings_for(tmp_path, None, redis_url, services=services)
    inner = new_event(emitter="ms-event")
    outer = new_event()
    del outer["emitter"]
    for message_id, event in (("1700000000000-0", inner), ("1700000000001-0", outer)):
        doc = {"success": True, "type": event["type"], "id": event["id"], "emitter": "ms-user", "payload": js(event)}
        _dead(redis_client, message_id, payload=js(doc))
    first = await _propose(settings, ids=["1700000000000-0"])
    assert "service event chosen from the events' emitter" in first.notes  # the event JSON's, not the envelope's
    second = await _propose(settings, ids=["1700000000001-0"])
    assert "service user chosen from the events' emitter" in second.notes  # no emitter in the event: the envelope's


async def test_every_dead_letter_is_taken_in_order_up_to_the_cap(tmp_path, outbox_db, redis_url, redis_client,
                                                               group) -> None:
    settings = settings_for(tmp_path, outbox_db, redis_url, limits={"max_plan_messages": 2})
    dlq_ids = [_dead(redis_client, f"170000000000{i}-0") for i in range(3)]
    plan = await _propose(settings)
    assert [e.id for e in plan.steps[0].operation.entries] == dlq_ids[:2]
    assert plan.truncated and plan.candidates_found == 3 and plan.blast_radius.messages == 2


async def test_a_rebuilt_replay_keeps_the_parse_result_s_id_and_type(settings, redis_client, group) -> None:
    """The ParseResult's ``id`` and ``type`` are the original entry's own fields: an event JSON without them
    (an emitter that sends the type as a stream field only) still replays with both."""
    event = new_event()
    bare = {k: v for k, v in event.items() if k not in ("id", "type")}
    doc = {"success": True, "type": event["type"], "id": event["id"], "payload": js(bare)}
    _dead(redis_client, "1700000000000-0", payload=js(doc))
    plan = await _propose(settings)
    (message,) = plan.steps[1].operation.messages
    assert message.fields[:3] == [("id", event["id"]), ("type", event["type"]), ("emitter", event["emitter"])]
    assert message.fields[-1] == ("event", js(bare))


async def test_a_dead_letter_whose_payload_is_no_json_object_is_replayed_from_its_original(settings, redis_client,
                                                                                          group) -> None:
    message_id = push_event(redis_client, STREAM, new_event())
    for i, payload in enumerate(("not json", js([1, 2]))):
        _dead(redis_client, message_id if i == 0 else push_event(redis_client, STREAM, new_event()), payload=payload)
    plan = await _propose(settings)
    assert [m.source for m in plan.steps[1].operation.messages] == ["stream", "stream"]
    assert plan.warnings == [] and "reconcile_sql" not in [s.action for s in plan.steps]


async def test_message_ids_are_searched_page_after_page_from_each_page_s_last_entry(tmp_path, outbox_db, redis_url,
                                                                                  redis_client, group) -> None:
    """Nine dead letters, pages of 3, 3 pages allowed: exactly enough when each page starts after the last."""
    settings = settings_for(tmp_path, outbox_db, redis_url, limits={"max_count": 3, "scan_max_iterations": 3})
    dlq_ids = [_dead(redis_client, f"170000000000{i}-0") for i in range(9)]
    plan = await _propose(settings, ids=["1700000000008-0"])
    assert [e.id for e in plan.steps[0].operation.entries] == [dlq_ids[8]] and plan.warnings == []


async def test_dead_letters_are_read_with_the_configured_field_names(tmp_path, outbox_db, redis_url, redis_client,
                                                                   group) -> None:
    settings = settings_for(tmp_path, outbox_db, redis_url, conventions={"dlq_message_id_field": "msgId"})
    event = new_event()
    payload = js({"success": True, "type": event["type"], "id": event["id"], "payload": js(event)})
    dlq_id = redis_client.xadd(DLQ, {"msgId": "1700000000000-0", "error": "boom", "payload": payload}).decode()
    plan = await _propose(settings)
    assert [(m.dlq_id, m.message_id) for m in plan.steps[1].operation.messages] == [(dlq_id, "1700000000000-0")]


async def test_a_dead_letter_without_a_message_id_does_not_hide_the_next_ones(settings, redis_client, group) -> None:
    bad = _dead(redis_client, "oops")
    good = _dead(redis_client, "1700000000000-0")
    plan = await _propose(settings)
    assert [e.id for e in plan.steps[0].operation.entries] == [good]
    assert plan.warnings == [f"dead letter {bad} has no usable messageId: skipped"]
