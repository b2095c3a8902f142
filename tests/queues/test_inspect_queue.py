"""inspect_queue on BullMQ-shaped jobs in every state, on Redis 7 and 6.2."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import pytest

from server.config import Settings
from server.connections import Connections
from server.errors import InvalidArgument, NotFound
from tests.helpers import in_process_client
from tests.streams import scenario as sc_mod
from tests.streams.conftest import Backend
from tests.streams.scenario import FALLBACK_QUEUE, QUEUE
from tools.queues.bull import inspect_queue
from tools.queues.discovery import list_queues

pytestmark = pytest.mark.anyio


async def test_counts_oldest_waiting_and_newest_failures(
    backend: Backend, settings_for: Callable[..., Settings]
) -> None:
    settings = settings_for(backend)
    sc = sc_mod.Scenario()
    sc_mod.build_queues(backend.client, settings.conventions, sc)
    async with in_process_client(settings) as client:
        result = await client.call_tool("inspect_queue", {"queue": QUEUE, "failures": 5})
    assert not result.is_error, result.content
    report = result.structured_content
    assert report["counts"] == {"wait": 3, "active": 1, "paused": 1, "delayed": 1, "prioritized": 1,
                                "waiting-children": 1, "failed": 2, "completed": 1}
    assert report["paused"] is False and report["job"] is None and report["job_found"] is None
    oldest = report["oldest_waiting"]
    assert oldest["job_id"] == sc.jobs["wait"] and oldest["name"] == "events.job_wait"
    assert 59_000 <= oldest["age_ms"] <= 120_000  # added 60 s before the scenario was written
    failures = report["recent_failures"]
    assert [f["job_id"] for f in failures] == [sc.jobs["failed-9"], sc.jobs["failed-8"]]  # newest first
    assert failures[0]["failed_reason"] == "TimeoutError: geocoder did not answer"
    assert failures[0]["attempts_made"] == 3 and failures[0]["finished_on_ms"] > failures[1]["finished_on_ms"]
    text = result.content[0].text
    assert "wait 3" in text and "geocoder" in text


async def test_one_job_in_each_state(backend: Backend, settings_for: Callable[..., Settings]) -> None:
    settings = settings_for(backend)
    sc = sc_mod.Scenario()
    sc_mod.build_queues(backend.client, settings.conventions, sc)
    expected = {"wait": "waiting", "active": "active", "paused": "paused", "delayed": "delayed",
                "prioritized": "prioritized", "waiting-children": "waiting-children", "failed": "failed",
                "completed": "completed"}
    conns = Connections(settings)
    try:
        for structure, state in expected.items():
            report = await inspect_queue(conns, settings, QUEUE, job_id=sc.jobs[structure], failures=0)
            assert report.job is not None and report.job_found is True
            assert report.job.state == state, structure
            assert report.job.found_in == [f"bull:{QUEUE}:{structure}"]
            assert report.recent_failures == []
        failed = await inspect_queue(conns, settings, QUEUE, job_id=sc.jobs["failed"])
    finally:
        await conns.aclose()
    job = failed.job
    assert job is not None
    assert (job.attempts_made, job.failed_reason, job.name) == (3, "EntityNotFound: event e-8", "events.job_failed")
    assert job.stacktrace and "GeocodeHandler.handle" in job.stacktrace[0]
    assert json.loads(job.data or "") == {"eventId": "e-8", "state": "failed"}
    assert failed.job_completed_marker is False and failed.notes == []


async def test_removed_job_and_unknown_job(machine_or_cluster: Backend, settings_for: Callable[..., Settings]) -> None:
    machine = machine_or_cluster  # the machine's Redis, then the cluster
    settings = settings_for(machine)
    sc = sc_mod.Scenario()
    sc_mod.build_queues(machine.client, settings.conventions, sc)
    conns = Connections(settings)
    try:
        removed = await inspect_queue(conns, settings, QUEUE, job_id=sc.jobs["removed"])
        unknown = await inspect_queue(conns, settings, QUEUE, job_id="no-such-job")
    finally:
        await conns.aclose()
    assert removed.job is None and removed.job_found is False and removed.job_completed_marker is True
    assert "removeOnComplete" in removed.notes[0]
    assert unknown.job is None and unknown.job_completed_marker is False and "trace_job" in unknown.notes[0]


async def test_job_data_is_cut_at_the_byte_cap(machine: Backend, settings_for: Callable[..., Settings]) -> None:
    machine.client.hset("bull:big:42", mapping={"name": "x", "data": json.dumps({"blob": "y" * 5000}),
                                                "timestamp": 1, "failedReason": "Z" * 500})
    machine.client.zadd("bull:big:failed", {"42": 2})
    settings = settings_for(machine, limits={"payload_max_bytes": 64})
    conns = Connections(settings)
    try:
        report = await inspect_queue(conns, settings, "big", job_id="42")
    finally:
        await conns.aclose()
    assert report.job is not None and report.job.data_truncated and len((report.job.data or "").encode()) <= 64
    (failure,) = report.recent_failures
    assert failure.failed_reason == "Z" * 64 and failure.failed_reason_truncated


async def test_paused_queue_unknown_queue_and_bad_arguments(
    machine_or_cluster: Backend, settings_for: Callable[..., Settings]
) -> None:
    machine = machine_or_cluster  # the machine's Redis, then the cluster
    settings = settings_for(machine)
    sc_mod.build_queues(machine.client, settings.conventions, sc_mod.Scenario())
    conns = Connections(settings)
    try:
        paused = await inspect_queue(conns, settings, FALLBACK_QUEUE)
        assert paused.paused and not any(paused.counts.values()) and paused.oldest_waiting is None
        assert "(paused)" in paused.summary_text()
        with pytest.raises(NotFound, match="list_queues"):
            await inspect_queue(conns, settings, "no-such-queue")
        with pytest.raises(InvalidArgument, match="failures must be"):
            await inspect_queue(conns, settings, QUEUE, failures=101)
    finally:
        await conns.aclose()
    async with in_process_client(settings) as client:
        missing = await client.call_tool("inspect_queue", {"queue": "no-such-queue"})
        empty = await client.call_tool("inspect_queue", {"queue": ""})
    assert missing.is_error and "no BullMQ queue 'no-such-queue'" in missing.content[0].text
    assert empty.is_error


async def test_queue_under_a_custom_prefix(machine_or_cluster: Backend, settings_for: Callable[..., Settings]) -> None:
    """A deployment whose BullMQ prefix is not `bull`: every key is read under [conventions] bullmq_prefix."""
    machine = machine_or_cluster  # the machine's Redis, then the cluster
    settings = settings_for(machine, conventions={"bullmq_prefix": "{mesh}"})
    sc = sc_mod.Scenario()
    sc_mod.build_queues(machine.client, settings.conventions, sc)
    assert machine.client.exists(f"{{mesh}}:{QUEUE}:meta") and not machine.client.exists(f"bull:{QUEUE}:meta")
    conns = Connections(settings)
    try:
        report = await inspect_queue(conns, settings, QUEUE, job_id=sc.jobs["failed"])
        with pytest.raises(NotFound, match="under prefix 'bull'"):
            await inspect_queue(conns, settings_for(machine), QUEUE)
    finally:
        await conns.aclose()
    assert report.prefix == "{mesh}" and report.counts["wait"] == 3 and report.counts["failed"] == 2
    assert report.oldest_waiting is not None and report.oldest_waiting.job_id == sc.jobs["wait"]
    assert report.job is not None and report.job.state == "failed" and report.job.key.startswith("{mesh}:")


async def test_paused_queue_keeps_its_oldest_job_in_the_paused_list(
    machine_or_cluster: Backend, settings_for: Callable[..., Settings]
) -> None:
    """BullMQ versions with a paused list move the waiting jobs there on pause: the oldest is its tail."""
    machine = machine_or_cluster  # the machine's Redis, then the cluster
    now = int(time.time() * 1000)
    for n, age_ms in ((1, 90_000), (2, 30_000)):
        machine.client.hset(f"bull:pq:{n}", mapping={"name": "j", "data": "{}", "timestamp": now - age_ms})
        machine.client.lpush("bull:pq:paused", str(n))
    machine.client.hset("bull:pq:meta", mapping={"paused": 1})
    machine.client.hset("bull:pq:3", mapping={"name": "j", "data": "{}", "timestamp": now - 5_000})
    machine.client.lpush("bull:pq:wait", "3")  # added after the pause, by a BullMQ that keeps wait
    settings = settings_for(machine)
    conns = Connections(settings)
    try:
        report = await inspect_queue(conns, settings, "pq")
    finally:
        await conns.aclose()
    assert report.paused and report.counts["paused"] == 2 and report.counts["wait"] == 1
    assert report.oldest_waiting is not None and report.oldest_waiting.job_id == "1"
    assert report.oldest_waiting_in == "paused" and report.oldest_waiting.age_ms >= 90_000
    assert "oldest waiting in paused: 1" in report.summary_text()


async def test_names_with_the_prefix_are_refused_with_the_name_to_give(
    machine: Backend, settings_for: Callable[..., Settings]
) -> None:
    settings = settings_for(machine)
    conns = Connections(settings)
    try:
        with pytest.raises(InvalidArgument, match=r"give the queue name alone, e\.g\. 'event-queue'"):
            await inspect_queue(conns, settings, "bull:event-queue")
        with pytest.raises(InvalidArgument, match="match 'bull:\\*' starts with the BullMQ prefix"):
            await list_queues(conns, settings, match="bull:*")
    finally:
        await conns.aclose()


async def test_job_names_in_the_summary_are_capped(machine: Backend, settings_for: Callable[..., Settings]) -> None:
    machine.client.hset("bull:nq:1", mapping={"name": "N" * 5000, "timestamp": 1})
    machine.client.lpush("bull:nq:wait", "1")
    settings = settings_for(machine, limits={"payload_max_bytes": 64})
    conns = Connections(settings)
    try:
        report = await inspect_queue(conns, settings, "nq")
    finally:
        await conns.aclose()
    assert report.oldest_waiting is not None and report.oldest_waiting.name == "N" * 64
