"""Promise: ``propose`` builds the plan of the symptom asked for, from the validated inputs, seals and saves
exactly what it returns, and says why when there is nothing to do, writing nothing then.

:func:`tools.remediation.planner.propose` on a real Redis (and PostgreSQL for the outbox symptoms):
each symptom reaches its own builder (its own "nothing to do" sentence, whole: with the builder's
warnings and notes in parentheses when there are some, and nothing after it when there are none);
a refused or empty proposal leaves no plan file and no audit record; a plan records the inputs as
validated (ids stripped), what it reaches, its approval mode, note and command, its instance, the
moment it was made (UTC, whole seconds) and its expiry from ``[approval] plan_ttl_s``; the file saved
and the audit record name the same plan and hash.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import redis

from server.approval.audit import audit_log
from server.connections import Connections
from server.errors import InvalidArgument, NotFound
from tests.remediation.conftest import GROUP, Poison, settings_for
from tools.remediation import store
from tools.remediation.model import BlastRadius
from tools.remediation.planner import Request, approval_note, approve_command, propose

pytestmark = pytest.mark.anyio

STREAM = "stream:event:created"


async def _propose(settings, symptom, stream=None, group=None, service=None, queue=None, ids=None):
    connections = Connections(settings)
    try:
        return await propose(settings, connections, Request(symptom, stream, group, service, queue, ids))
    finally:
        await connections.aclose()


def _nothing_written(settings) -> None:
    plans = store.plans_dir(settings)
    assert not plans.exists() or not list(plans.iterdir())
    assert not [r for r in audit_log(settings).read() if r.get("event") == "proposed"]


def _failed_job(r: redis.Redis, job: str, score: float = 1) -> None:
    r.hset(f"bull:mail:{job}", mapping={"name": "t", "data": "{}", "opts": json.dumps({}), "attemptsMade": "1"})
    r.zadd("bull:mail:failed", {job: score})


async def _nothing(settings, symptom, **kw) -> str:
    with pytest.raises(NotFound) as info:
        await _propose(settings, symptom, **kw)
    _nothing_written(settings)
    return str(info.value)


async def test_each_stream_symptom_reaches_its_own_builder(tmp_path: Path, redis_url: str,
                                                           redis_client: redis.Redis) -> None:
    """A stream with one group and one consumer that holds nothing: each symptom says its own sentence."""
    settings = settings_for(tmp_path, None, redis_url)
    redis_client.xgroup_create(STREAM, "pp", id="0", mkstream=True)
    assert await _nothing(settings, "dlq_replay", stream=STREAM) == f"no dead letter to replay in {STREAM}-dlq"
    threshold = settings.limits.dead_consumer_idle_ms
    assert await _nothing(settings, "claim_dead_consumer", stream=STREAM) == (
        f"no consumer of group pp idle more than {threshold} ms holds pending entries")
    assert await _nothing(settings, "clear_stale_lock", stream=STREAM) == (
        "no stale idempotency lock on a pending entry of group pp")


async def test_each_outbox_symptom_reaches_its_own_builder(tmp_path: Path, outbox_db: str, redis_url: str) -> None:
    settings = settings_for(tmp_path, outbox_db, redis_url)
    missing = str(uuid.uuid4())
    assert await _nothing(settings, "requeue_stuck_job", service="event") == (
        f"no jobs_outbox row of service event stuck PROCESSING for more than "
        f"{settings.limits.processing_ageing_s} s")
    assert await _nothing(settings, "reconcile_outbox", service="event", ids=[missing]) == (
        "none of the 1 id(s) is, in service event, a FAILED row that can be reconciled, a job whose audit row was left "
        "open under its completion guard, or a succeeded job whose outbox row was left after its success event was "
        f"pushed (no row {missing} in event_queue, jobs_outbox or (as a job id) job_audit of service event (purged, "
        "or another service?); runbook step 5: afterwards check that job_audit closes the cycle (trace_job / "
        "trace_event))")  # the warnings, then the notes


async def test_nothing_to_do_is_said_whole_with_the_builder_s_warnings(tmp_path: Path, redis_url: str,
                                                                      redis_client: redis.Redis) -> None:
    settings = settings_for(tmp_path, None, redis_url)
    assert await _nothing(settings, "retry_failed_job", queue="mail") == (
        "no failed job in BullMQ queue mail (bull:mail:failed is empty or missing)")
    redis_client.zadd("bull:mail:failed", {"gone": 1})
    assert await _nothing(settings, "retry_failed_job", queue="mail", ids=["x", "gone"]) == (
        "no failed job in BullMQ queue mail (bull:mail:failed is empty or missing) (job x is not in "
        "bull:mail:failed: skipped (inspect_queue shows its state); job gone is listed as failed but its hash is "
        "gone (removeOnFail?): skipped)")


async def test_a_refused_request_reads_nothing_and_writes_nothing(tmp_path: Path, redis_url: str,
                                                                  redis_client: redis.Redis) -> None:
    """Validation comes first: a request refused for its ids is refused even where a plan could be built."""
    settings = settings_for(tmp_path, None, redis_url, limits={"max_plan_messages": 1})
    _failed_job(redis_client, "a")
    _failed_job(redis_client, "b", 2)
    for kw, message in (
        (dict(ids=["a", "b"]), "2 ids given; a plan holds at most 1 ([limits] max_plan_messages)"),
        (dict(ids=["a\x00"]), "id 'a\\x00' is empty, too long or holds control characters"),
        (dict(queue=None), "symptom retry_failed_job needs queue: the BullMQ queue name (the jobs_outbox target)"),
    ):
        with pytest.raises(InvalidArgument) as info:
            await _propose(settings, "retry_failed_job", **{"queue": "mail", **kw})
        assert str(info.value) == message
    _nothing_written(settings)
    assert redis_client.zcard("bull:mail:failed") == 2


async def test_a_plan_records_its_validated_inputs_and_is_saved_as_returned(tmp_path: Path, redis_url: str,
                                                                            redis_client: redis.Redis) -> None:
    settings = settings_for(tmp_path, None, redis_url, approval={"plan_ttl_s": 600})
    _failed_job(redis_client, "a")
    _failed_job(redis_client, "b", 2)
    _failed_job(redis_client, "c", 3)
    before = datetime.now(UTC).replace(microsecond=0)
    plan = await _propose(settings, "retry_failed_job", queue="mail", ids=[" a ", "c\n"])
    after = datetime.now(UTC)
    assert plan.symptom == "retry_failed_job"
    assert plan.inputs == {"stream": None, "group": None, "service": None, "queue": "mail", "ids": ["a", "c"]}
    assert plan.steps[0].operation.job_ids == ["a", "c"]
    assert plan.blast_radius == BlastRadius(messages=2, rows=0, keys=2, streams=[], tables=[],
                                            consumer_groups_reached=[])
    assert (plan.candidates_found, plan.truncated, plan.warnings) == (2, False, [])
    assert plan.summary == "retry 2 failed job(s) of BullMQ queue mail"
    created, expires = datetime.fromisoformat(plan.created_at), datetime.fromisoformat(plan.expires_at)
    assert before <= created <= after and created.microsecond == 0 and created.utcoffset() == timedelta(0)
    assert expires - created == timedelta(seconds=600)
    assert plan.plan_id.startswith("p-" + created.strftime("%Y%m%d-%H%M%S"))
    assert (plan.approval_mode, plan.approval_note) == (settings.approval.mode, approval_note(settings))
    assert plan.approve_command == approve_command(settings, plan.plan_id)
    assert plan.redis_instance == "default" and plan.plan_sha256 == plan.content_hash()
    assert store.load_plan(settings, plan.plan_id) == plan
    (record,) = [r for r in audit_log(settings).read() if r.get("event") == "proposed"]
    assert {k: record[k] for k in ("plan_id", "plan_sha256", "result", "detail", "symptom", "steps")} == {
        "plan_id": plan.plan_id, "plan_sha256": plan.plan_sha256, "result": "proposed", "detail": plan.summary,
        "symptom": "retry_failed_job", "steps": 1}
    assert redis_client.zcard("bull:mail:failed") == 3 and redis_client.llen("bull:mail:wait") == 0


async def test_a_queue_on_its_own_instance_is_planned_there(tmp_path: Path, redis_url: str,
                                                            redis_client: redis.Redis) -> None:
    """The default instance is unreachable; the queue's instance holds the job: the plan reads and names it."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    settings = settings_for(tmp_path, None, {"url": f"redis://127.0.0.1:{closed}/0",
                                             "instances": {"jobs": {"url": redis_url, "queues": ["mail"]}}})
    _failed_job(redis_client, "a")
    plan = await _propose(settings, "retry_failed_job", queue="mail")
    assert plan.redis_instance == "jobs" and plan.steps[0].operation.job_ids == ["a"]


async def test_a_replay_plan_names_every_stream_table_and_group_it_reaches(settings, poison: Poison,
                                                                           redis_client: redis.Redis) -> None:
    redis_client.xgroup_create(STREAM, "audit-trail", id="$")  # a second group: a replay reaches it too
    plan = await _propose(settings, "dlq_replay", stream=STREAM, group=GROUP, service="event")
    assert [s.action for s in plan.steps] == ["export", "replay", "confirm_replay", "xdel_dlq", "delete_retry_keys",
                                              "reconcile_sql"]
    assert plan.blast_radius == BlastRadius(
        messages=1, rows=1, keys=2, streams=[STREAM, f"{STREAM}-dlq"], tables=["event.event_queue"],
        consumer_groups_reached=["audit-trail", GROUP])
    assert store.load_plan(settings, plan.plan_id).blast_radius == plan.blast_radius
    assert not [n for n in plan.notes if "Redis Cluster" in n]  # one server: no slot review


async def test_a_plan_on_a_cluster_has_its_slots_reviewed(tmp_path: Path, cluster_backend) -> None:
    """The stream, its DLQ and the retry keys hash to different slots: the plan says no transaction spans them
    (a plan on one server gets no such note: see the tests above)."""
    settings = settings_for(tmp_path, None, cluster_backend.url, redis={"mode": "cluster"})
    Poison(cluster_backend.client, None, settings)
    plan = await _propose(settings, "dlq_replay", stream=STREAM)
    slot_notes = [n for n in plan.notes if n.startswith("Redis Cluster: ")]
    assert any(n.startswith("Redis Cluster: the steps touch keys in ") and "No transaction spans steps" in n
               for n in slot_notes), plan.notes
    assert store.load_plan(settings, plan.plan_id).notes == plan.notes
