"""Promise: a plan rests on what was read, never on guesses, and its hash binds exactly what will run.

- A Redis or a database that cannot be read makes ``propose`` refuse with the service named
  (nothing written: no plan file, no audit record), or, for the optional SQL reconciliation
  of a replay, leaves that step out and says so in the plan's warnings.
- ``plan_sha256`` is the SHA-256 of the canonical JSON of every other field (recomputed here
  independently of :meth:`Plan.content_hash`); changing any one value a step runs with
  changes it, and each step's command is the rendering of its operation.
- :mod:`tools.remediation.redis_reads`, the planner's reads, on a real Redis: exact values,
  binary values kept exact, digests that change when the value or its type changes.
"""

from __future__ import annotations

import base64
import hashlib
import json
import socket
from pathlib import Path

import pytest
import redis

from server.approval.audit import audit_path
from server.connections import Connections
from server.errors import ServiceUnavailable
from tests.remediation.conftest import GROUP, STREAM, Poison, settings_for
from tools.remediation import redis_reads as rr
from tools.remediation import store
from tools.remediation.model import Plan
from tools.remediation.operations import render
from tools.remediation.planner import Request, propose

pytestmark = pytest.mark.anyio


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def _propose(settings, request: Request) -> Plan:
    connections = Connections(settings)
    try:
        return await propose(settings, connections, request)
    finally:
        await connections.aclose()


def _nothing_written(settings) -> None:
    assert not store.plans_dir(settings).exists()
    assert not audit_path(settings).exists()


@pytest.mark.parametrize("request_", [
    Request("dlq_replay", STREAM, None, None, None, None),
    Request("claim_dead_consumer", STREAM, None, None, None, None),
    Request("clear_stale_lock", STREAM, None, None, None, None),
    Request("retry_failed_job", None, None, None, "mail", None),
])
async def test_an_unreachable_redis_refuses_the_plan(tmp_path: Path, request_: Request) -> None:
    settings = settings_for(tmp_path, None, f"redis://127.0.0.1:{_closed_port()}/0")
    with pytest.raises(ServiceUnavailable, match="is unavailable"):
        await _propose(settings, request_)
    _nothing_written(settings)


@pytest.mark.parametrize("symptom", ["reconcile_outbox", "requeue_stuck_job"])
async def test_an_unreachable_database_refuses_the_plan(tmp_path: Path, redis_url: str, symptom: str) -> None:
    settings = settings_for(tmp_path, f"postgresql://postgres@127.0.0.1:{_closed_port()}/postgres", redis_url)
    ids = ["0b0e4a4e-1111-4222-8333-444455556666"]
    with pytest.raises(ServiceUnavailable, match="event"):
        await _propose(settings, Request(symptom, None, None, "event", None, ids))
    _nothing_written(settings)


async def test_requeue_with_redis_unreachable_refuses_rather_than_guess_unpushed(
    tmp_path: Path, outbox_db: str
) -> None:
    import psycopg

    settings = settings_for(tmp_path, outbox_db, f"redis://127.0.0.1:{_closed_port()}/0")
    with psycopg.connect(outbox_db, autocommit=True) as conn:
        conn.execute("INSERT INTO jobs_outbox (id, status, type, emitter, target, updated_at) VALUES "
                     "(gen_random_uuid(), 'PROCESSING', 't', 'ms-event', 'q', now() - interval '1 hour')")
    with pytest.raises(ServiceUnavailable, match="is unavailable"):
        await _propose(settings, Request("requeue_stuck_job", None, None, "event", None, None))
    _nothing_written(settings)


async def test_a_replay_whose_database_is_down_plans_no_sql_and_says_why(tmp_path: Path, redis_url: str,
                                                                       redis_client: redis.Redis) -> None:
    down = f"postgresql://postgres@127.0.0.1:{_closed_port()}/postgres"
    settings = settings_for(tmp_path, down, redis_url)
    poison = Poison(redis_client, None, settings)
    plan = await _propose(settings, Request("dlq_replay", STREAM, None, "event", None, None))
    assert "reconcile_sql" not in [s.action for s in plan.steps]
    assert any(w.startswith("event_queue of service event could not be read, no SQL reconciliation planned: ")
               for w in plan.warnings), plan.warnings
    assert plan.blast_radius.rows == 0 and plan.blast_radius.tables == []
    # without service=, the emitter picks it (the one configured service emitting ms-event) and says so
    guessed = await _propose(settings, Request("dlq_replay", STREAM, None, None, None, None))
    assert "service event chosen from the events' emitter" in guessed.notes
    assert poison.dlq_id in [e.id for e in plan.steps[0].operation.entries]


def _independent_hash(plan: Plan) -> str:
    body = plan.model_dump(mode="json")
    del body["plan_sha256"]
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
                          .encode("utf-8")).hexdigest()


async def test_the_hash_binds_every_value_a_step_runs_with(settings, poison: Poison) -> None:
    plan = await _propose(settings, Request("dlq_replay", STREAM, None, "event", None, None))
    assert plan.plan_sha256 == _independent_hash(plan) == plan.content_hash()
    assert len(plan.plan_sha256) == 64
    for step in plan.steps:
        assert step.command == render(step.operation, settings.conventions)
    replay = plan.steps[1]
    message = replay.operation.messages[0]
    edits = [
        plan.model_copy(update={"summary": plan.summary + " "}),
        plan.model_copy(update={"redis_instance": "other"}),
        plan.model_copy(update={"expires_at": "2999-01-01T00:00:00+00:00"}),
        plan.model_copy(update={"steps": plan.steps[:-1]}),
        plan.model_copy(update={"steps": [replay.model_copy(update={"operation": replay.operation.model_copy(
            update={"messages": [message.model_copy(update={"fields": [*message.fields, ("x", "1")]})]})}),
            *plan.steps[2:]]}),
        plan.model_copy(update={"steps": [plan.steps[0].model_copy(update={"checks": []}), *plan.steps[1:]]}),
        plan.model_copy(update={"steps": [plan.steps[0].model_copy(update={"runs_on": "elsewhere"}), *plan.steps[1:]]}),
    ]
    for edited in edits:
        assert edited.content_hash() != plan.plan_sha256
        assert edited.content_hash() == _independent_hash(edited)
    assert plan.sealed() == plan and plan.model_copy(update={"plan_sha256": ""}).sealed() == plan
    text = plan.summary_text()
    assert text.splitlines()[:3] == [
        f"plan {plan.plan_id} (dlq_replay): {plan.summary}",
        f"sha256 {plan.plan_sha256}; expires {plan.expires_at}",
        f"blast radius: {plan.blast_radius.messages} message(s), {plan.blast_radius.rows} row(s), "
        f"{plan.blast_radius.keys} key(s)",
    ]
    assert f"  2. [replay] {replay.description} (NOT reversible, on {replay.runs_on})" in text
    assert f"  1. [export] {plan.steps[0].description} (reversible, on {plan.steps[0].runs_on})" in text
    assert replay.runs_on.startswith("Redis instance 'default' at redis://")
    assert f"To apply, a human runs `{plan.approve_command}` at a terminal" in text
    assert text.endswith(plan.approval_note)
    assert all(f"note: {n}" in text for n in plan.notes)


@pytest.fixture
async def ar(redis_url: str):
    client = redis.asyncio.Redis.from_url(redis_url)
    try:
        yield client
    finally:
        await client.aclose()


async def test_values_are_kept_exact(ar) -> None:
    assert rr.text(b"caf\xc3\xa9") == "café" and rr.text(b"\xff") == "\ufffd" and rr.text(7) == "7"
    assert rr.jsonable(b"caf\xc3\xa9") == "café" and rr.jsonable("x") == "x"
    assert rr.jsonable(b"\xff\x00") == {"base64": base64.b64encode(b"\xff\x00").decode()}
    await ar.xadd("s", {b"k": b"\xff", "a": "1"}, id="5-1")
    assert await rr.read_entry(ar, "s", "5-1") == {b"k": b"\xff", b"a": b"1"}
    assert await rr.read_entry(ar, "s", "5-2") is None and await rr.entry_digest(ar, "s", "5-2") is None
    pairs = rr.fields_pairs(await rr.read_entry(ar, "s", "5-1"))
    assert pairs == [["k", {"base64": "/w=="}], ["a", "1"]]
    assert await rr.entry_digest(ar, "s", "5-1") == rr.digest(pairs)
    assert rr.digest({"a": 1}) == hashlib.sha256(b'{"a":1}').hexdigest()


async def test_key_snapshots(ar) -> None:
    assert await rr.key_snapshot(ar, "nothing") is None
    await ar.set("lock", "processing", px=600_000)
    snap = await rr.key_snapshot(ar, "lock")
    assert (snap.key, snap.type, snap.value) == ("lock", "string", "processing")
    assert 590_000 < snap.pttl_ms <= 600_000
    assert snap.digest == rr.digest({"type": "string", "content": "processing"})
    assert base64.b64decode(snap.dump_base64) == await ar.dump("lock")
    await ar.set("forever", b"\xfe")
    forever = await rr.key_snapshot(ar, "forever")
    assert forever.pttl_ms is None and forever.value == {"base64": "/g=="}
    await ar.zadd("z", {"m": 1})
    zsnap = await rr.key_snapshot(ar, "z")
    dumped = await ar.dump("z")
    assert (zsnap.type, zsnap.value) == ("zset", None)
    assert zsnap.digest == rr.digest({"type": "zset", "content": base64.b64encode(dumped).decode()})
    await ar.zadd("z", {"m": 2})
    assert (await rr.key_snapshot(ar, "z")).digest != zsnap.digest
    await ar.set("lock", "done", keepttl=True)
    assert (await rr.key_snapshot(ar, "lock")).digest != snap.digest


async def test_pending_and_consumers(ar, redis_client: redis.Redis) -> None:
    for i in (1, 2, 3):
        redis_client.xadd(STREAM, {"n": str(i)}, id=f"{i}-0")
    redis_client.xgroup_create(STREAM, GROUP, id="0")
    redis_client.xreadgroup(GROUP, "alice", {STREAM: ">"}, count=2)
    redis_client.xreadgroup(GROUP, "bob", {STREAM: ">"}, count=1)
    redis_client.xclaim(STREAM, GROUP, "alice", 0, ["1-0"], idle=90_000)
    redis_client.xclaim(STREAM, GROUP, "alice", 0, ["2-0"], idle=90_000)
    one = await rr.pending_of(ar, STREAM, GROUP, "1-0")
    assert (one.id, one.consumer) == ("1-0", "alice") and 90_000 <= one.idle_ms < 150_000
    assert one.deliveries == 2  # read once, claimed once (XCLAIM without JUSTID counts a delivery)
    assert await rr.pending_of(ar, STREAM, GROUP, "9-0") is None
    every = await rr.pending_range(ar, STREAM, GROUP, count=10)
    assert [(p.id, p.consumer) for p in every] == [("1-0", "alice"), ("2-0", "alice"), ("3-0", "bob")]
    assert [p.id for p in await rr.pending_range(ar, STREAM, GROUP, count=2)] == ["1-0", "2-0"]
    assert [p.id for p in await rr.pending_range(ar, STREAM, GROUP, count=10, consumer="bob")] == ["3-0"]
    assert [p.id for p in await rr.pending_range(ar, STREAM, GROUP, count=10, min_idle_ms=60_000)] == ["1-0", "2-0"]
    consumers = {c.name: c for c in await rr.consumers_of(ar, STREAM, GROUP)}
    assert (consumers["alice"].pending, consumers["bob"].pending) == (2, 1)
    assert all(0 <= c.idle_ms < 60_000 for c in consumers.values())
    groups = await rr.groups_of(ar, STREAM)
    assert [(g["name"], g["last-delivered-id"]) for g in groups] == [(GROUP, "3-0")]
    assert await rr.groups_of(ar, "stream:none") == []


def test_hash_digest_ignores_field_order_not_values() -> None:
    a = rr.hash_digest({b"x": b"1", b"y": b"2"})
    assert a == rr.hash_digest({b"y": b"2", b"x": b"1"})
    assert a != rr.hash_digest({b"x": b"2", b"y": b"1"})
    assert a == rr.digest([["x", "1"], ["y", "2"]])


def test_hash_digest_orders_by_canonical_json_and_takes_binary_field_names() -> None:
    # "a " sorts before "a" in canonical JSON ('"' > ' '), after it as plain strings
    assert rr.hash_digest({b"a": b"1", b"a ": b"2"}) == rr.digest([["a ", "2"], ["a", "1"]])
    mixed = rr.hash_digest({b"\xff": b"1", b"a": b"2"})  # a non-UTF-8 field name (base64 form) beside a text one
    assert mixed == rr.digest(sorted([[{"base64": "/w=="}, "1"], ["a", "2"]], key=lambda p: json.dumps(
        p, sort_keys=True, separators=(",", ":"), ensure_ascii=False)))



async def test_a_plan_reads_the_instance_its_stream_lives_on(tmp_path: Path, redis_url: str,
                                                            redis_client: redis.Redis) -> None:
    """The default instance cannot be reached; the stream's instance can: the plan is built from the latter and
    names it (a planner reading the default instance would refuse, one guessing would plan on nothing)."""
    settings = settings_for(tmp_path, None, f"redis://127.0.0.1:{_closed_port()}/0", redis={
        "url": f"redis://127.0.0.1:{_closed_port()}/0",
        "instances": {"events": {"url": redis_url, "streams": ["stream:event:*"]}},
    })
    Poison(redis_client, None, settings)
    plan = await _propose(settings, Request("dlq_replay", STREAM, None, None, None, None))
    assert plan.redis_instance == "events"
    assert [s.action for s in plan.steps][:3] == ["export", "replay", "confirm_replay"]
    created = plan.created_at.replace("-", "").replace(":", "").replace("T", "-")[:15]
    assert plan.plan_id.startswith(f"p-{created}-")  # the id names the moment the plan was made (UTC)
