"""Promise: a BullMQ retry plan shows, per job, exactly the commands ``Job.retry()`` runs, and every step
a builder appends carries the command, parameters, checks and backup its operation runs with.

``plan_base.PlanBuilder.add`` (shared by every builder): steps numbered from 1 in order, the command and
SQL parameters rendered from the operation with the server's own column names, each field kept as the
builder gave it. ``plan_queues.build_retry_failed_job`` on a real Redis: the jobs taken (the lowest
failed scores first, up to the cap; the ids asked for, when given), LIFO jobs pushed with RPUSH, the
paused list of a paused queue, the marker of BullMQ >= 5 (or of a queue that has one), the events
stream's length, the note on a job that used its attempts (at the limit, not one under), each job's
hash digest and the queue's paused state as preconditions, and a refusal that says why nothing is
planned.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import redis

from server.config import load_settings
from server.connections import Connections
from server.errors import NotFound
from tests.remediation.conftest import settings_for
from tools.remediation import redis_reads as rr
from tools.remediation.model import BullRetryOp, Check, DelOp, SqlRow, SqlUpdateOp
from tools.remediation.plan_base import PlanBuilder, check
from tools.remediation.planner import Request, propose

Q = "bull:mail"


def _settings(tmp_path: Path, redis_url: str, **overrides):
    return settings_for(tmp_path, None, redis_url, **overrides)


def _job(r: redis.Redis, job: str, score: float = 2, opts: object = None, made: str = "1", raw_opts=None,
         made_field: str = "attemptsMade") -> None:
    r.hset(f"{Q}:{job}", mapping={"name": "t", "data": "{}", made_field: made, "failedReason": "boom",
                                 "opts": raw_opts if raw_opts is not None else json.dumps(opts or {})})
    r.zadd(f"{Q}:failed", {job: score})


async def _retry(settings, ids=None, queue="mail"):
    connections = Connections(settings)
    try:
        return await propose(settings, connections, Request("retry_failed_job", None, None, None, queue, ids))
    finally:
        await connections.aclose()


def test_a_step_carries_the_command_and_parameters_of_its_operation(tmp_path: Path) -> None:
    """What a human reads is rendered from what runs: the UPDATE with this server's column names and its
    bound values, numbered in the order added, every field as the builder gave it."""
    settings = load_settings(environ={}, overrides={
        "state_dir": str(tmp_path), "conventions": {"columns": {"id": "Id", "status": "st", "updated_at": "upd"}}})
    b = PlanBuilder(settings)
    update = SqlUpdateOp(service="event", table="event_queue", set_status="COMPLETED", expect_status="FAILED",
                         rows=[SqlRow(id="a", updated_at="2026-12-01T10:00:00+00:00"), SqlRow(id="b")])
    guard = check("row_matches", service="event", table="event_queue", id="a", status="FAILED")
    assert guard == Check(kind="row_matches", args={"service": "event", "table": "event_queue", "id": "a",
                                                     "status": "FAILED"})
    first = b.add(action="reconcile_sql", description="two rows", operation=update, target="event.event_queue",
                  precondition="each row still FAILED", checks=[guard], backup="every column", reversible=True)
    delete = DelOp(keys=["k1", "k 2"])
    second = b.add(action="delete_retry_keys", description="two keys", operation=delete, target="k*",
                   precondition="unchanged", checks=[], backup=None, reversible=False)
    assert (first, second) == (1, 2) and [s.number for s in b.steps] == [1, 2]
    sql_step, del_step = b.steps
    assert sql_step.command == ('UPDATE "event_queue" SET "st" = $1, "upd" = now() WHERE "Id" = $2 AND "st" = $3 '
                                'AND "upd" = $4')
    assert sql_step.params == [["COMPLETED", "a", "FAILED", "2026-12-01T10:00:00+00:00"],
                               ["COMPLETED", "b", "FAILED", None]]
    assert (sql_step.action, sql_step.description, sql_step.target, sql_step.precondition, sql_step.checks,
            sql_step.backup, sql_step.reversible, sql_step.operation) == (
        "reconcile_sql", "two rows", "event.event_queue", "each row still FAILED", [guard], "every column", True,
        update)
    assert (del_step.command, del_step.params, del_step.backup, del_step.reversible, del_step.checks) == (
        'DEL k1 "k 2"', [], None, False, [])
    assert b.nothing_to_do == "nothing matches this symptom" and not (b.warnings or b.notes or b.streams)


@pytest.mark.anyio
async def test_each_job_s_retry_is_its_own_transaction_in_the_order_job_retry_runs(tmp_path, redis_url,
                                                                                   redis_client) -> None:
    redis_client.hset(f"{Q}:meta", mapping={"version": "bullmq:5.1.0", "opts.maxLenEvents": "250"})
    _job(redis_client, "j1", 1)
    _job(redis_client, "j2", 2, {"lifo": True, "attempts": 4})
    _job(redis_client, "j3", 3, {"lifo": False})
    plan = await _retry(_settings(tmp_path, redis_url))
    fifo, lifo = plan.steps
    assert fifo.command.splitlines() == [line for job in ("j1", "j3") for line in (
        "MULTI", f"ZREM {Q}:failed {job}", f"HDEL {Q}:{job} finishedOn processedOn failedReason",
        f"LPUSH {Q}:wait {job}", f"ZADD {Q}:marker 0 0",
        f"XADD {Q}:events MAXLEN ~ 250 * event waiting jobId {job} prev failed", "EXEC")]
    assert lifo.command.splitlines()[3] == f"RPUSH {Q}:wait j2"
    assert fifo.operation == BullRetryOp(queue="mail", prefix="bull", job_ids=["j1", "j3"], target_list="wait",
                                         push="LPUSH", marker=True, events_maxlen=250)
    not_paused = check("queue_paused", prefix="bull", queue="mail", paused=False)
    digest = {j: rr.hash_digest(redis_client.hgetall(f"{Q}:{j}")) for j in ("j1", "j2", "j3")}
    assert fifo.checks == [check("bull_job_failed", prefix="bull", queue="mail", job_id=j, digest=digest[j])
                           for j in ("j1", "j3")] + [not_paused]
    assert lifo.checks == [check("bull_job_failed", prefix="bull", queue="mail", job_id="j2", digest=digest["j2"]),
                           not_paused]
    assert fifo.description == "move 2 failed job(s) of mail back to wait (as Job.retry() does)"
    assert (fifo.target, fifo.backup, fifo.reversible) == ("bull:mail", "each job hash and its failed score", False)
    assert plan.warnings == [] and plan.blast_radius.keys == 3 and plan.blast_radius.messages == 3
    assert plan.summary == "retry 3 failed job(s) of BullMQ queue mail" and plan.candidates_found == 3
    assert plan.notes == ["runbook step 3: approve once the handler's failure cause is fixed, else the job fails "
                          "again"]


@pytest.mark.anyio
async def test_a_paused_queue_s_jobs_go_to_its_paused_list_without_the_marker(tmp_path, redis_url,
                                                                              redis_client) -> None:
    redis_client.hset(f"{Q}:meta", mapping={"paused": "1", "version": "bullmq:5.0.0"})
    _job(redis_client, "j1")
    (step,) = (await _retry(_settings(tmp_path, redis_url))).steps
    assert step.operation.target_list == "paused" and step.checks[-1] == check(
        "queue_paused", prefix="bull", queue="mail", paused=True)
    assert f"LPUSH {Q}:paused j1" in step.command.splitlines() and "ZADD" not in step.command


@pytest.mark.parametrize(("version", "marker_key", "marker"), [
    ("bullmq:4.99.0", False, False), ("bullmq:5.0.0", False, True), ("bullmq:10.2.0", False, True),
    ("", False, False), ("bullmq:4.1.0", True, True), ("not a version", True, True),
])
@pytest.mark.anyio
async def test_the_marker_from_the_version_or_an_existing_marker_key(tmp_path, redis_url, redis_client, version,
                                                                     marker_key, marker) -> None:
    if version:
        redis_client.hset(f"{Q}:meta", "version", version)
    if marker_key:
        redis_client.zadd(f"{Q}:marker", {"0": 0})
    _job(redis_client, "j1")
    (step,) = (await _retry(_settings(tmp_path, redis_url))).steps
    assert step.operation.marker is marker and ("ZADD" in step.command) is marker


@pytest.mark.parametrize(("value", "maxlen"), [(None, 10_000), ("", 10_000), ("x1", 10_000), ("3", 3)])
@pytest.mark.anyio
async def test_the_events_stream_length_is_the_queue_s_or_bullmq_s_default(tmp_path, redis_url, redis_client,
                                                                           value, maxlen) -> None:
    redis_client.hset(f"{Q}:meta", mapping={"version": "bullmq:5.0.0",
                                            **({} if value is None else {"opts.maxLenEvents": value})})
    _job(redis_client, "j1")
    (step,) = (await _retry(_settings(tmp_path, redis_url))).steps
    assert step.operation.events_maxlen == maxlen and f"MAXLEN ~ {maxlen} *" in step.command


@pytest.mark.anyio
async def test_a_job_that_used_its_attempts_is_named_one_under_is_not(tmp_path, redis_url, redis_client) -> None:
    _job(redis_client, "used", 1, {"attempts": 3}, made="3")
    _job(redis_client, "over", 2, {"attempts": 3}, made="4")
    _job(redis_client, "under", 3, {"attempts": 3}, made="2")
    _job(redis_client, "odd", 4, {"attempts": 1}, made="n/a")
    _job(redis_client, "free", 5, made="9")  # no attempts limit
    _job(redis_client, "listy", 6, raw_opts="[1, 2]")  # opts that are not an object: default push, no limit
    _job(redis_client, "broken", 7, raw_opts="{not json")
    _job(redis_client, "v5", 8, {"attempts": 2}, made="2", made_field="atm")  # BullMQ 5 writes atm
    _job(redis_client, "v5-under", 9, {"attempts": 2}, made="1", made_field="atm")
    plan = await _retry(_settings(tmp_path, redis_url))
    attempts = [n for n in plan.notes if "attempts" in n]
    assert attempts == [
        f"job {j} used its {n} attempts: after this retry, one more failure sends it back to failed (BullMQ keeps "
        "attemptsMade)" for j, n in (("used", 3), ("over", 3), ("v5", 2))]
    (step,) = plan.steps
    assert step.operation.push == "LPUSH" and step.operation.job_ids == ["used", "over", "under", "odd", "free",
                                                                         "listy", "broken", "v5", "v5-under"]


@pytest.mark.anyio
async def test_the_cap_takes_the_oldest_failures_first(tmp_path, redis_url, redis_client) -> None:
    for job, score in (("z", 1), ("a", 5), ("m", 3), ("b", 4)):
        _job(redis_client, job, score)
    plan = await _retry(_settings(tmp_path, redis_url, limits={"max_plan_messages": 3}))
    assert plan.steps[0].operation.job_ids == ["z", "m", "b"]
    assert (plan.truncated, plan.candidates_found, plan.blast_radius.keys) == (True, 4, 3)


@pytest.mark.anyio
async def test_ids_asked_for_are_the_only_ones_and_missing_ones_are_named(tmp_path, redis_url, redis_client) -> None:
    for job, score in (("a", 1), ("b", 2), ("c", 3)):
        _job(redis_client, job, score)
    redis_client.zadd(f"{Q}:failed", {"ghost": 9})  # listed as failed, hash gone
    plan = await _retry(_settings(tmp_path, redis_url, limits={"max_plan_messages": 3}), ids=["c", "nope", "a"])
    assert plan.steps[0].operation.job_ids == ["c", "a"] and not plan.truncated and plan.candidates_found == 2
    assert plan.warnings == ["job nope is not in bull:mail:failed: skipped (inspect_queue shows its state)"]
    with pytest.raises(NotFound) as info:
        await _retry(_settings(tmp_path, redis_url), ids=["nope", "ghost"])
    assert str(info.value) == (
        "no failed job in BullMQ queue mail (bull:mail:failed is empty or missing) (job nope is not in "
        "bull:mail:failed: skipped (inspect_queue shows its state); job ghost is listed as failed but its hash is "
        "gone (removeOnFail?): skipped)")
    assert redis_client.zcard(f"{Q}:failed") == 4 and redis_client.llen(f"{Q}:wait") == 0  # planning changed nothing


@pytest.mark.anyio
async def test_a_hash_tagged_prefix_names_every_key_of_the_plan(tmp_path, redis_url, redis_client) -> None:
    redis_client.hset("{bull}:mail:meta", mapping={"version": "bullmq:5.0.0", "paused": "1"})
    redis_client.hset("{bull}:mail:j1", mapping={"name": "t", "data": "{}", "opts": "{}", "attemptsMade": "0"})
    redis_client.zadd("{bull}:mail:failed", {"j1": 1})
    _job(redis_client, "plain")  # the same queue under the default prefix: not this plan's
    plan = await _retry(_settings(tmp_path, redis_url, conventions={"bullmq_prefix": "{bull}"}))
    (step,) = plan.steps
    assert step.operation.job_ids == ["j1"] and step.target == "{bull}:mail"
    assert step.checks == [
        check("bull_job_failed", prefix="{bull}", queue="mail", job_id="j1",
              digest=rr.hash_digest(redis_client.hgetall("{bull}:mail:j1"))),
        check("queue_paused", prefix="{bull}", queue="mail", paused=True)]
    assert step.command.splitlines()[1:4] == ["ZREM {bull}:mail:failed j1",
                                              "HDEL {bull}:mail:j1 finishedOn processedOn failedReason",
                                              "LPUSH {bull}:mail:paused j1"]


@pytest.mark.anyio
async def test_a_job_whose_hash_is_gone_is_skipped_and_the_jobs_after_it_kept(tmp_path, redis_url,
                                                                               redis_client) -> None:
    """Only LIFO jobs: one RPUSH step holds them all, even after a listed job whose hash is gone."""
    redis_client.zadd(f"{Q}:failed", {"gone": 1})
    _job(redis_client, "x", 2, {"lifo": True})
    _job(redis_client, "y", 3, {"lifo": True})
    plan = await _retry(_settings(tmp_path, redis_url))
    (step,) = plan.steps
    assert (step.operation.push, step.operation.job_ids) == ("RPUSH", ["x", "y"])
    assert plan.warnings == ["job gone is listed as failed but its hash is gone (removeOnFail?): skipped"]
    assert plan.candidates_found == 3 and plan.blast_radius.keys == 2


@pytest.mark.anyio
async def test_a_job_hash_without_opts_or_attempts_made_takes_bullmq_s_defaults(tmp_path, redis_url,
                                                                                redis_client) -> None:
    """No ``opts``: FIFO, no limit. No ``attemptsMade``: none made, so a limit of 0 is used up, of 1 is not."""
    for job, score, opts in (("bare", 1, None), ("zero", 2, {"attempts": 0}), ("one", 3, {"attempts": 1})):
        redis_client.hset(f"{Q}:{job}", mapping={"name": "t", "data": "{}", **({"opts": json.dumps(opts)}
                                                                              if opts is not None else {})})
        redis_client.zadd(f"{Q}:failed", {job: score})
    plan = await _retry(_settings(tmp_path, redis_url))
    (step,) = plan.steps
    assert (step.operation.push, step.operation.job_ids) == ("LPUSH", ["bare", "zero", "one"])
    assert [n for n in plan.notes if "attempts" in n] == [
        "job zero used its 0 attempts: after this retry, one more failure sends it back to failed (BullMQ keeps "
        "attemptsMade)"]
