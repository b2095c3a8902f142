"""inspect_stream on real consumer groups, Redis 7 and 6.2: facts and every anomaly code."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from server.config import Settings
from server.connections import Connections
from server.errors import InvalidArgument, NotFound
from tests.helpers import in_process_client
from tests.streams import scenario as sc_mod
from tests.streams.conftest import Backend
from tests.streams.scenario import LAG, MAIN, OK, ORPHAN, STREAM, USER_STREAM
from tools.streams.inspect import inspect_stream

pytestmark = pytest.mark.anyio


def codes(report: dict[str, Any]) -> set[tuple[str, str | None, str | None]]:
    return {(a["code"], a["group"], a["consumer"]) for a in report["anomalies"]}


def anomaly(report: dict[str, Any], code: str, group: str | None = None) -> dict[str, Any]:
    found = [a for a in report["anomalies"] if a["code"] == code and a["group"] == group]
    assert len(found) == 1, (code, group, report["anomalies"])
    return found[0]


async def test_every_anomaly_of_the_broken_stream(backend: Backend, settings_for: Callable[..., Settings]) -> None:
    settings = settings_for(backend)
    async with in_process_client(settings) as client:
        sc = sc_mod.build(backend.client, settings.conventions)
        with sc_mod.Heartbeat(backend.client):  # pp-live stays live (idle < 1.5 s) however slow the call
            result = await client.call_tool("inspect_stream", {"detail": "full", "stream": STREAM})
    assert not result.is_error, result.content
    report = result.structured_content
    assert codes(report) == {
        ("dead_consumer", MAIN, "pp-dead"),
        ("stuck_pending", MAIN, "pp-live"),
        ("trimmed_pending", MAIN, None),
        ("lag_growing", MAIN, None),
        ("lag_growing", LAG, None),
        ("stale_idempotency_lock", MAIN, None),
        ("dlq_not_empty", None, None),
    }
    assert report["redis_version"] == backend.version
    assert report["length"] == 27
    assert report["first_id"] == sc.ids[3]
    assert report["last_id"] == sc.ids[-1]

    groups = {g["name"]: g for g in report["groups"]}
    assert set(groups) == {MAIN, LAG, OK}
    main, lag, ok = groups[MAIN], groups[LAG], groups[OK]
    assert main["pending"] == 7 and main["pending_summary"]["count"] == 7
    assert main["pending_summary"]["per_consumer"] == {"pp-dead": 5, "pp-live": 2}
    assert main["pending_summary"]["min_id"] == sc.ids[0]
    assert main["pending_summary"]["oldest"]["id"] == sc.ids[0]
    assert main["pending_summary"]["oldest"]["message_trimmed"] is True
    assert main["pending_summary"]["oldest"]["idle_ms"] >= 1500
    assert main["last_delivered_id"] == sc.ids[15]
    assert (main["lag"], lag["lag"], ok["lag"]) == (14, 27, 0)
    assert main["oldest_undelivered_id"] == sc.ids[16]
    assert lag["oldest_undelivered_id"] == sc.ids[3]
    assert ok["oldest_undelivered_id"] is None and ok["pending"] == 0
    consumers = {c["name"]: c for c in main["consumer_list"]}
    assert consumers["pp-dead"]["dead"] is True and consumers["pp-dead"]["pending"] == 5
    assert consumers["pp-live"]["dead"] is False and consumers["pp-live"]["idle_ms"] < 1500
    if backend.version.startswith("6."):
        assert main["entries_read"] is None and main["lag_source"] == "counted"
    else:
        assert main["lag_source"] == "reported" and main["entries_read"] is not None

    dead = anomaly(report, "dead_consumer", MAIN)
    assert dead["evidence"]["pending"] == 5 and dead["evidence"]["idle_ms"] >= 1500
    # nothing was added after pp-dead's read: before 7.2 (no inactive) its idle cannot tell dead from polling
    assert dead["evidence"]["idle_ambiguous"] is (consumers["pp-dead"]["inactive_ms"] is None)
    assert "claim_dead_consumer" in dead["next_step"]
    trimmed = anomaly(report, "trimmed_pending", MAIN)
    assert trimmed["evidence"]["count"] == 3
    assert trimmed["evidence"]["sample_ids"] == sc.ids[:3]
    assert trimmed["evidence"]["first_entry_id"] == sc.ids[3]
    stuck = anomaly(report, "stuck_pending", MAIN)
    assert stuck["evidence"]["count_in_sample"] == 2 and stuck["evidence"]["oldest_id"] == sc.ids[5]
    locks = anomaly(report, "stale_idempotency_lock", MAIN)["evidence"]["locks"]
    assert {(lock["message_id"], lock["reason"]) for lock in locks} == {
        (sc.locked_pending, "pending"),
        (sc.locked_retrying, "retry_queue"),
    }
    assert all(0 < lock["lock_ttl_ms"] <= 86_400_000 for lock in locks)
    lagging = anomaly(report, "lag_growing", LAG)
    assert lagging["evidence"]["lag"] == 27 and lagging["evidence"]["age_ms"] >= 500
    dlq = anomaly(report, "dlq_not_empty")
    assert dlq["evidence"] == {
        "dlq": STREAM + "-dlq", "length": 3, "newest_id": sc.dlq_ids[-1],
        "newest_age_ms": dlq["evidence"]["newest_age_ms"],
    }
    assert report["dlq"]["length"] == 3
    text = result.content[0].text
    assert "dead_consumer" in text and "pp-dead" in text


async def test_stream_without_group_and_a_dead_letter_stream(
    backend: Backend, settings_for: Callable[..., Settings]
) -> None:
    settings = settings_for(backend)
    sc_mod.build_streams(backend.client, settings.conventions, age=False)
    conns = Connections(settings)
    try:
        orphan = await inspect_stream(conns, settings, ORPHAN)
        dlq = await inspect_stream(conns, settings, STREAM + "-dlq")
        user = await inspect_stream(conns, settings, USER_STREAM)
    finally:
        await conns.aclose()
    assert [(a.code, a.evidence) for a in orphan.anomalies] == [("no_group", {"length": 3})]
    assert orphan.groups == [] and orphan.dlq is not None and orphan.dlq.exists is False
    # a dead-letter stream has no group by design and no dead-letter stream of its own
    assert dlq.anomalies == [] and dlq.dlq is None and dlq.length == 3
    assert [a.code for a in user.anomalies] == ["dlq_not_empty"]


async def test_lag_beyond_the_count_cap_is_estimated(backend: Backend, settings_for: Callable[..., Settings]) -> None:
    client = backend.client
    for n in range(200):
        client.xadd("stream:big", {"n": str(n)})
    client.xgroup_create("stream:big", "slow", id="0")
    client.xreadgroup("slow", "c", {"stream:big": ">"}, count=20)
    settings = settings_for(backend, limits={"stream_sample": 10})
    conns = Connections(settings)
    try:
        report = await inspect_stream(conns, settings, "stream:big")
    finally:
        await conns.aclose()
    (group,) = report.groups
    if backend.version.startswith("6."):
        assert group.lag_source == "estimated"
        assert 11 <= group.lag <= 200  # a lower bound of 11 and the stream length bound it
    else:
        assert (group.lag_source, group.lag) == ("reported", 180)


async def test_healthy_stream_has_no_anomaly(backend: Backend, settings_for: Callable[..., Settings]) -> None:
    client = backend.client
    for n in range(5):
        client.xadd("stream:fine", {"n": str(n)})
    client.xgroup_create("stream:fine", "g", id="0")
    reply = client.xreadgroup("g", "c", {"stream:fine": ">"}, count=10)
    client.xack("stream:fine", "g", *[i for i, _ in reply[0][1]])
    time.sleep(0.6)  # past lag_max_age_ms: a stream fully delivered must not be reported lagging
    settings = settings_for(backend)
    conns = Connections(settings)
    try:
        report = await inspect_stream(conns, settings, "stream:fine")
    finally:
        await conns.aclose()
    assert report.anomalies == []
    assert report.groups[0].lag == 0 and report.groups[0].pending == 0
    assert "no anomaly" in report.summary_text()


async def test_missing_stream_and_wrong_type(
    machine_or_cluster: Backend, settings_for: Callable[..., Settings]
) -> None:
    machine = machine_or_cluster  # the machine's Redis, then the cluster
    machine.client.set("a:string", "x")
    settings = settings_for(machine)
    conns = Connections(settings)
    try:
        with pytest.raises(NotFound, match="list_streams"):
            await inspect_stream(conns, settings, "stream:nope")
        with pytest.raises(InvalidArgument, match="is a Redis string, not a stream"):
            await inspect_stream(conns, settings, "a:string")
        with pytest.raises(InvalidArgument, match="control characters"):
            await inspect_stream(conns, settings, "stream:\nx")
    finally:
        await conns.aclose()


async def test_dead_consumer_idle_is_ambiguous_only_on_a_quiet_stream_before_redis_7_2(
    backend: Backend, settings_for: Callable[..., Settings]
) -> None:
    """No margin raced by load: the entries' ids are a minute before / after the consumer's last read
    (explicit XADD ids on the Redis clock), and the only sleep ages idle past a threshold (a slower machine
    only ages it more). On a cluster the consumers' read time is an upper bound (TIME after XINFO CONSUMERS),
    so the quiet stream stays quiet however long the round trips take."""
    client = backend.client
    for stream in ("stream:quiet", "stream:busy"):
        seconds, micros = _redis_time(client, backend, stream)
        client.xadd(stream, {"n": "0"}, id=f"{seconds * 1000 + micros // 1000 - 60_000}-0")  # a minute ago
        client.xgroup_create(stream, "g", id="0")
        client.xreadgroup("g", "gone", {stream: ">"})
    time.sleep(1.1)
    seconds, micros = _redis_time(client, backend, "stream:busy")
    # arrived after gone's last read (its id a minute ahead): a live consumer would have read it
    client.xadd("stream:busy", {"n": "1"}, id=f"{seconds * 1000 + micros // 1000 + 60_000}-0")
    settings = settings_for(backend, limits={"dead_consumer_idle_ms": 1000})
    conns = Connections(settings)
    try:
        quiet = await inspect_stream(conns, settings, "stream:quiet")
        busy = await inspect_stream(conns, settings, "stream:busy")
    finally:
        await conns.aclose()
    (q,) = [a for a in quiet.anomalies if a.code == "dead_consumer"]
    (b,) = [a for a in busy.anomalies if a.code == "dead_consumer"]
    reports_inactive = quiet.groups[0].consumer_list[0].inactive_ms is not None  # Redis 7.2+
    assert q.evidence["idle_ambiguous"] is not reports_inactive
    assert ("confirm the consumer's process is gone" in q.message) is not reports_inactive
    assert b.evidence["idle_ambiguous"] is False and "confirm" not in b.message


def _redis_time(client: Any, backend: Backend, key: str) -> tuple[int, int]:
    """TIME of the server holding ``key``."""
    if backend.mode == "cluster":
        return client.time(target_nodes=client.get_node_from_key(key))
    return client.time()


async def test_pending_whose_message_is_gone_is_trimmed_only_with_proof(
    backend: Backend, settings_for: Callable[..., Settings]
) -> None:
    # the scenario trims to 27; with a configured MAXLEN of 10000 a 6.2 stream of 27 entries proves nothing
    settings = settings_for(backend, conventions={"stream_maxlen": 10_000})
    sc = sc_mod.build_streams(backend.client, settings.conventions, age=False)
    conns = Connections(settings)
    try:
        report = (await inspect_stream(conns, settings, STREAM)).model_dump()
    finally:
        await conns.aclose()
    redis7 = not backend.version.startswith("6.")
    code = "trimmed_pending" if redis7 else "missing_pending"
    found = anomaly(report, code, MAIN)
    assert found["evidence"]["sample_ids"] == sc.ids[:3]
    rule = found["evidence"]["trim_rule"]
    assert ("entries-added" in rule) if redis7 else ("under the configured MAXLEN 10000" in rule), rule
    assert not any(a["code"] == ("missing_pending" if redis7 else "trimmed_pending") for a in report["anomalies"])
