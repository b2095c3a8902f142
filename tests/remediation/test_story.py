"""The full story, through the library: poison pill -> DLQ -> propose -> approve -> apply -> clean."""

from __future__ import annotations

import pytest

from server.approval.audit import audit_log
from server.connections import Connections
from tests.remediation.conftest import GROUP, STREAM, Poison, approve, event_status
from tests.remediation.target_sim import ConsumerThread
from tools.remediation.backups import read_backup
from tools.remediation.executor import apply_plan
from tools.remediation.planner import Request, propose


@pytest.mark.anyio
async def test_dlq_replay_story(settings, poison: Poison, outbox_db, redis_client) -> None:
    conv = settings.conventions
    retry_base = f"retry:post-processor:{GROUP}:{poison.message_id}"
    assert redis_client.get(retry_base + ":attempt") == b"5"
    connections = Connections(settings)
    try:
        plan = await propose(settings, connections, Request("dlq_replay", STREAM, None, "event", None, None))
        actions = [s.action for s in plan.steps]
        assert actions == ["export", "replay", "confirm_replay", "xdel_dlq", "delete_retry_keys", "reconcile_sql"]
        replay = plan.steps[1].operation
        assert replay.messages[0].source == "stream"
        assert dict(replay.messages[0].fields)["correlationId"] == poison.event["correlationId"]
        assert plan.blast_radius.messages == 1 and plan.blast_radius.rows == 1
        assert "UPDATE \"event_queue\"" in plan.steps[-1].command
        assert plan.steps[-1].params == [[conv.statuses.completed, poison.event["id"], conv.statuses.failed]]

        token = approve(settings, plan.plan_id)
        poison.fixed = True  # runbook step 3: the cause is fixed before the replay
        with ConsumerThread(poison.processor):
            report = await apply_plan(settings, connections, plan.plan_id, token)
        assert report.status == "completed", report.summary_text()
    finally:
        await connections.aclose()

    assert redis_client.xlen(f"{STREAM}-dlq") == 0
    assert not redis_client.exists(retry_base + ":attempt", retry_base + ":lastError")
    assert event_status(outbox_db, poison.event["id"]) == "COMPLETED"
    replayed_id = report.steps[1].output["replayed"][0]["new_id"]
    assert (replayed_id, poison.event["id"]) in poison.processor.processed
    records = read_backup(settings.resolved_state_dir / "backups" / f"{plan.plan_id}.jsonl")
    kinds = {r["kind"] for r in records}
    assert {"stream_entry", "key", "sql_row"} <= kinds
    dlq_backup = next(r for r in records if r["kind"] == "stream_entry" and r["data"]["key"].endswith("-dlq"))
    assert dict(dlq_backup["data"]["fields"])["messageId"] == poison.message_id
    events = [r["event"] for r in audit_log(settings).read()]
    assert events[0] == "proposed" and "approved" in events and "replayed" in events
    assert events.count("step") == len(plan.steps) and events[-1] == "apply_finished"
    assert audit_log(settings).verify_chain()[0]
