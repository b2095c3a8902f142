"""The reusable Redis readers (also used by tools.streams / tools.queues): BullMQ job state and
per-group message delivery, on a real Redis, and proof that they only read."""

from __future__ import annotations

import json

import pytest
import redis.asyncio as aioredis

from server.config import Conventions, Limits
from tests.outbox import sim
from tools.outbox.bull_state import bull_job_state
from tools.outbox.delivery import find_dead_letters, message_delivery, scan_dead_letters

pytestmark = pytest.mark.anyio

CONV = Conventions()


@pytest.fixture
async def ar(r, request):
    """An async client of the same Redis as ``r`` (a RedisCluster client on the cluster)."""
    cfg = request.node.mesh_redis
    cls = aioredis.RedisCluster if cfg.get("mode") == "cluster" else aioredis.Redis
    client = cls.from_url(cfg["url"])
    yield client
    await client.aclose()


def snapshot(r) -> dict[bytes, object]:
    """Every key with its type and content, to prove a reader changed nothing."""
    out: dict[bytes, object] = {}
    for key in r.scan_iter(count=1000):
        kind = r.type(key)
        if kind == b"stream":
            groups = [(g["name"], g["last-delivered-id"], g["pending"]) for g in r.xinfo_groups(key)]
            out[key] = (r.xrange(key), groups)
        elif kind == b"hash":
            out[key] = r.hgetall(key)
        elif kind == b"list":
            out[key] = r.lrange(key, 0, -1)
        elif kind == b"zset":
            out[key] = r.zrange(key, 0, -1, withscores=True)
        else:
            out[key] = r.get(key)
    return out


async def test_bull_states_from_every_structure(r, ar) -> None:
    r.hset("bull:q:j-delayed", mapping={"name": "t", "data": json.dumps({"x": 1}), "attemptsMade": 1})
    r.zadd("bull:q:delayed", {"j-delayed": 1_800_000_000_000 * 4096 + 7})
    r.hset("bull:q:j-prio", mapping={"name": "t", "atm": 0})
    r.zadd("bull:q:prioritized", {"j-prio": 5})
    r.hset("bull:q:j-paused", mapping={"name": "t"})
    r.rpush("bull:q:paused", "j-paused")
    r.hset("bull:q:j-done", mapping={"name": "t", "finishedOn": 1700000000000})
    r.zadd("bull:q:completed", {"j-done": 1700000000000})
    r.hset("bull:q:j-big", mapping={"name": "t", "data": "x" * 10_000})
    r.rpush("bull:q:wait", "j-big")
    before = snapshot(r)
    delayed = await bull_job_state(ar, CONV, "q", "j-delayed")
    assert (delayed.state, delayed.attempts_made, delayed.delayed_until_ms) == ("delayed", 1, 1_800_000_000_000)
    assert delayed.data == '{"x": 1}' and not delayed.data_truncated
    assert (await bull_job_state(ar, CONV, "q", "j-prio")).state == "prioritized"
    assert (await bull_job_state(ar, CONV, "q", "j-prio")).attempts_made == 0
    assert (await bull_job_state(ar, CONV, "q", "j-paused")).state == "paused"
    done = await bull_job_state(ar, CONV, "q", "j-done")
    assert done.state == "completed" and done.finished_on_ms == 1700000000000
    big = await bull_job_state(ar, CONV, "q", "j-big", value_max_bytes=100)
    assert big.state == "waiting" and big.data_truncated and len(big.data) == 100
    assert await bull_job_state(ar, CONV, "q", "nope") is None
    assert snapshot(r) == before


async def test_bull_wait_list_is_scanned_from_both_ends_within_the_bound(r, ar) -> None:
    r.rpush("bull:q:wait", *[f"j{i}" for i in range(100)])
    for job in ("j0", "j99", "j50"):
        r.hset(f"bull:q:{job}", "name", "t")
    assert (await bull_job_state(ar, CONV, "q", "j0", list_scan_max=10)).state == "waiting"
    assert (await bull_job_state(ar, CONV, "q", "j99", list_scan_max=10)).state == "waiting"
    middle = await bull_job_state(ar, CONV, "q", "j50", list_scan_max=10)
    assert middle.state == "unknown" and middle.hash_exists  # beyond the bound: said, not guessed


async def test_delivery_states_and_only_reads(r, ar) -> None:
    stream = "stream:user:created"
    a = r.xadd(stream, {"id": "e-a"}).decode()
    b = r.xadd(stream, {"id": "e-b"}).decode()
    for group in ("g1", "g2"):
        sim.ensure_group(r, stream, group)
    sim.consumer_read(r, stream, "g1", "c1")
    sim.consumer_ack(r, stream, "g1", a, lock=False)
    sim.consumer_dead_letter(r, stream, "g1", b, "boom")
    r.zadd("retry-queue:post-processor:g1", {b: 1234})
    before = snapshot(r)
    da = {d.group: d for d in await message_delivery(ar, CONV, Limits(), stream, a)}
    db = {d.group: d for d in await message_delivery(ar, CONV, Limits(), stream, b.encode())}
    assert da["g1"].state == "acknowledged" and da["g2"].state == "not_delivered"
    assert da["g1"].delivered and da["g1"].last_delivered_id == b
    assert db["g1"].state == "dead_lettered" and db["g1"].retry.next_retry_at_ms == 1234
    assert db["g1"].retry.attempt == 5 and db["g1"].retry.last_error == "boom"
    assert db["g2"].state == "not_delivered" and db["g2"].dead_letters == []
    assert snapshot(r) == before
    assert await message_delivery(ar, CONV, Limits(), "stream:absent", a) == []


async def test_keys_under_the_event_id_are_found_too(r, ar) -> None:
    stream = "stream:user:created"
    entry = r.xadd(stream, {"id": "evt-1"}).decode()
    sim.ensure_group(r, stream, "g1")
    sim.consumer_read(r, stream, "g1", "c1")
    r.set("idempotency:post-processor:g1:evt-1", "1", ex=100)
    (d,) = await message_delivery(ar, CONV, Limits(), stream, entry, message_id="evt-1")
    assert d.message_id_used == "evt-1" and d.idempotency.exists and d.state == "pending"


async def test_dead_letters_are_read_in_bounded_pages(r, ar) -> None:
    stream = "stream:s"
    target = r.xadd(stream, {"id": "x"}).decode()
    for i in range(30):
        r.xadd(stream + "-dlq", {"messageId": f"0-{i}", "error": "other"})
    r.xadd(stream + "-dlq", {"messageId": target, "error": "mine"})
    found = await find_dead_letters(ar, CONV, Limits(max_count=7), stream, [target])
    assert [d.error for d in found] == ["mine"]
    capped = await find_dead_letters(ar, CONV, Limits(max_count=7, scan_max_iterations=2), stream, [target])
    assert capped == []  # 14 entries read at most: the bound holds


async def test_dead_letter_field_names_come_from_conventions(r, ar) -> None:
    stream = "stream:s"
    target = r.xadd(stream, {"id": "x"}).decode()
    r.xadd(stream + "-dlq", {"sourceId": target, "reason": "é" * 100, "at": "1700000000000"})
    renamed = Conventions(dlq_message_id_field="sourceId", dlq_error_field="reason", dlq_timestamp_field="at")
    (found,) = await find_dead_letters(ar, renamed, Limits(payload_max_bytes=64), stream, [target])
    assert found.message_id == target and found.timestamp == "1700000000000"
    assert found.error == "é" * 32  # cut at the byte cap, on a character boundary
    assert await find_dead_letters(ar, CONV, Limits(), stream, [target]) == []  # default names: not this DLQ


async def test_dead_letter_scan_says_when_its_bound_stopped_it(r, ar) -> None:
    stream = "stream:s"
    target = r.xadd(stream, {"id": "x"}).decode()
    for i in range(3):
        r.xadd(stream + "-dlq", {"messageId": f"0-{i}", "error": "other"})
    assert await scan_dead_letters(ar, CONV, Limits(), stream, [target]) == ([], True)
    assert await scan_dead_letters(ar, CONV, Limits(max_count=1, scan_max_iterations=2), stream, [target]) == (
        [], False)


async def test_a_huge_job_field_is_not_read(r, ar) -> None:
    from tools.outbox.bull_state import MAX_FIELD_BYTES

    r.hset("bull:q:huge", mapping={"name": "t", "data": "x" * (MAX_FIELD_BYTES + 1), "attemptsMade": 2,
                                   "failedReason": "boom"})
    r.zadd("bull:q:failed", {"huge": 1})
    job = await bull_job_state(ar, CONV, "q", "huge", value_max_bytes=100)
    assert job.hash_exists and job.state == "failed" and job.name == "t" and job.attempts_made == 2
    assert job.data is None and job.data_truncated and job.failed_reason == "boom"
    r.hset("bull:q:wide", mapping={f"f{i}": i for i in range(100)} | {"name": "w"})
    wide = await bull_job_state(ar, CONV, "q", "wide")
    assert wide.hash_exists and wide.name == "w" and wide.state == "unknown"


async def test_job_name_and_failed_reason_are_capped_with_flags(r, ar) -> None:
    from tools.outbox.bull_state import MAX_FIELD_BYTES

    r.hset("bull:q:long", mapping={"name": "n" * 300, "failedReason": "é" * 100, "attemptsMade": "3"})
    r.zadd("bull:q:failed", {"long": 1})
    job = await bull_job_state(ar, CONV, "q", "long", value_max_bytes=64)
    assert (job.name, job.name_truncated) == ("n" * 64, True)
    assert (job.failed_reason, job.failed_reason_truncated) == ("é" * 32, True)
    short = await bull_job_state(ar, CONV, "q", "long", value_max_bytes=300)
    assert short.name == "n" * 300 and not short.name_truncated and short.failed_reason_truncated is False
    r.hset("bull:q:huge-name", mapping={"name": "n" * (MAX_FIELD_BYTES + 1), "attemptsMade": 1})
    r.zadd("bull:q:failed", {"huge-name": 2})
    huge = await bull_job_state(ar, CONV, "q", "huge-name")
    assert huge.name is None and huge.name_truncated and huge.attempts_made == 1  # not read at all


async def test_last_error_is_read_up_to_the_byte_cap(r, ar) -> None:
    stream = "stream:user:created"
    entry = r.xadd(stream, {"id": "e-1"}).decode()
    sim.ensure_group(r, stream, "g1")
    sim.consumer_read(r, stream, "g1", "c1")
    sim.consumer_dead_letter(r, stream, "g1", entry, "E" * 65)
    before = snapshot(r)
    (d,) = await message_delivery(ar, CONV, Limits(payload_max_bytes=64), stream, entry)
    assert d.retry.last_error == "E" * 64 and d.retry.last_error_truncated
    assert d.dead_letters[0].error == "E" * 64 and d.dead_letters[0].error_truncated
    (whole,) = await message_delivery(ar, CONV, Limits(payload_max_bytes=65), stream, entry)
    assert whole.retry.last_error == "E" * 65 and whole.retry.last_error_truncated is False
    assert not whole.dead_letters[0].error_truncated
    assert snapshot(r) == before


async def test_empty_retry_keys_still_count_as_bookkeeping(r, ar) -> None:
    stream = "stream:user:created"
    entry = r.xadd(stream, {"id": "e-1"}).decode()
    sim.ensure_group(r, stream, "g1")
    r.set(f"retry:post-processor:g1:{entry}:lastError", "")
    (d,) = await message_delivery(ar, CONV, Limits(), stream, entry)
    assert d.retry.exists and d.retry.last_error == "" and d.retry.attempt is None
    r.set(f"retry:post-processor:g1:{entry}:attempt", "x" * 1000)  # no counter: not a number, read bounded
    (d,) = await message_delivery(ar, CONV, Limits(), stream, entry)
    assert d.retry.exists and d.retry.attempt is None


async def test_a_dead_letter_names_its_group_when_the_entry_carries_one(r, ar) -> None:
    stream = "stream:s"
    target = r.xadd(stream, {"id": "x"}).decode()
    r.xadd(stream + "-dlq", {"messageId": target, "error": "boom", "group": "g7", "timestamp": "1700000000000"})
    (found,) = await find_dead_letters(ar, CONV, Limits(), stream, [target])
    assert (found.group, found.error, found.timestamp, found.dlq_stream) == ("g7", "boom", "1700000000000",
                                                                              stream + "-dlq")


async def test_a_key_hop_reads_its_value_up_to_the_cap(r, ar) -> None:
    from tools.outbox.trace_streams import get_key

    r.set("guard:long", "v" * 100, ex=50)
    r.rpush("guard:list", "x")
    long = await get_key(ar, "guard:long", 64)
    assert (long["exists"], long["value"], long["truncated"]) == (True, "v" * 64, True) and 0 < long["ttl_s"] <= 50
    assert (await get_key(ar, "guard:long", 100))["truncated"] is False
    assert await get_key(ar, "guard:list", 64) == {"key": "guard:list", "exists": True, "value": None,
                                                   "truncated": False, "ttl_s": None}
    assert (await get_key(ar, "guard:absent", 64))["exists"] is False
