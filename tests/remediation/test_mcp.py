"""propose_remediation / apply_remediation through real MCP clients (in-process and stdio)."""

from __future__ import annotations

from pathlib import Path

import pytest

from server.approval.audit import audit_log
from server.config import load_settings
from tests.helpers import in_process_client, stdio_client
from tests.remediation.conftest import GROUP, STREAM, Poison, approve, event_status, settings_for
from tests.remediation.target_sim import ConsumerThread

pytestmark = pytest.mark.anyio


def _tools(listing) -> dict:
    return {t.name: t for t in listing.tools}


async def test_apply_is_not_listed_in_read_only_mode(tmp_path: Path, redis_url: str) -> None:
    settings = settings_for(tmp_path, None, redis_url, enable_remediation=False)
    async with in_process_client(settings) as client:
        tools = _tools(await client.list_tools())
        result = await client.call_tool("apply_remediation", {"plan_id": "p-20261130-021033-0a1b2c3d",
                                                              "approval_token": "x"})
    assert "apply_remediation" not in tools
    propose = tools["propose_remediation"].annotations
    assert propose.read_only_hint is True and propose.destructive_hint is False
    assert result.is_error


async def test_annotations_in_remediation_mode(tmp_path: Path, redis_url: str) -> None:
    async with in_process_client(settings_for(tmp_path, None, redis_url)) as client:
        tools = _tools(await client.list_tools())
    apply = tools["apply_remediation"]
    assert apply.annotations.destructive_hint is True and apply.annotations.read_only_hint is False
    assert apply.input_schema["required"] == ["plan_id", "approval_token"]


async def test_full_story_in_process(settings, poison: Poison, outbox_db: str, redis_client) -> None:
    secret_file = Path(settings.approval.secret_file)
    async with in_process_client(settings) as client:
        proposed = await client.call_tool(
            "propose_remediation", {"detail": "full", "symptom": "dlq_replay", "stream": STREAM, "service": "event"}
        )
        assert not proposed.is_error, proposed.content[0].text
        plan = proposed.structured_content
        assert plan["steps"][0]["action"] == "export" and len(plan["plan_sha256"]) == 64
        assert "mesh-mcp approve" in proposed.content[0].text
        refused = await client.call_tool("apply_remediation", {"plan_id": plan["plan_id"], "approval_token": ""})
        assert refused.is_error and "mesh-mcp approve" in refused.content[0].text

        token = approve(settings, plan["plan_id"])
        poison.fixed = True
        with ConsumerThread(poison.processor):
            applied = await client.call_tool("apply_remediation", {"plan_id": plan["plan_id"],
                                                                   "approval_token": token})
        info = await client.call_tool("server_info", {})
    assert not applied.is_error, applied.content[0].text
    report = applied.structured_content
    assert report["status"] == "completed" and report["approver"].startswith("local:")
    assert redis_client.xlen(f"{STREAM}-dlq") == 0
    assert not redis_client.exists(f"retry:post-processor:{GROUP}:{poison.message_id}:attempt")
    assert event_status(outbox_db, poison.event["id"]) == "COMPLETED"
    secret = secret_file.read_text().strip()
    for result in (proposed, refused, applied, info):
        dumped = str(result.structured_content) + " ".join(c.text for c in result.content)
        assert token not in dumped and secret not in dumped
    assert "not a determined agent" in info.structured_content["approval"]
    assert "local mode" in info.content[0].text
    events = [r["event"] for r in audit_log(settings).read()]
    assert events[:2] == ["proposed", "apply_refused"] and "approved" in events and events[-1] == "apply_finished"


async def test_over_stdio(tmp_path: Path, mesh_config, outbox_db: str, redis_url: str, redis_client) -> None:
    config = mesh_config({
        "state_dir": str(tmp_path / "state"),
        "redis": {"url": redis_url},
        "services": {"event": {"postgres": outbox_db}},
        "approval": {"secret_file": str(tmp_path / "secret" / "approval.key")},
        "limits": {"replay_confirm_timeout_ms": 30_000},  # a ceiling: the confirm step returns once processed
    })
    settings = load_settings(config_file=config, environ={})
    poison = Poison(redis_client, outbox_db, settings)
    async with stdio_client(config, "--enable-remediation") as client:
        proposed = await client.call_tool("propose_remediation",
            {"detail": "full", "symptom": "dlq_replay", "stream": STREAM})
        assert not proposed.is_error, proposed.content[0].text
        plan_id = proposed.structured_content["plan_id"]
        token = approve(settings, plan_id)  # the human, in another terminal, same --config
        dry = await client.call_tool("apply_remediation", {"plan_id": plan_id, "approval_token": token,
                                                           "dry_run": True})
        assert dry.structured_content["status"] == "dry_run_ok"
        poison.fixed = True
        with ConsumerThread(poison.processor):
            applied = await client.call_tool("apply_remediation", {"plan_id": plan_id, "approval_token": token})
        again = await client.call_tool("apply_remediation", {"plan_id": plan_id, "approval_token": token})
    assert applied.structured_content["status"] == "completed", applied.content[0].text
    assert again.is_error and "already used" in again.content[0].text
    assert redis_client.xlen(f"{STREAM}-dlq") == 0


async def test_the_default_answer_is_the_summary_of_the_plan_the_human_approves(settings, poison: Poison) -> None:
    """What Claude Code and other structuredContent clients show the model (detail="summary", the default)
    is the saved plan's own id, digest, expiry, inputs, blast radius, approval command and every step's
    number, action, description, target and reversibility, in order; the exact commands are left out and
    counted, never changed."""
    from tools.remediation.store import load_plan

    async with in_process_client(settings) as client:
        proposed = await client.call_tool("propose_remediation", {"symptom": "dlq_replay", "stream": STREAM,
                                                                  "service": "event"})
    assert not proposed.is_error, proposed.content[0].text
    shown = proposed.structured_content
    plan = load_plan(settings, shown["plan_id"])
    assert {k: shown[k] for k in ("plan_id", "plan_sha256", "expires_at", "summary", "inputs", "approve_command",
                                  "approval_mode", "redis_instance", "candidates_found", "truncated", "warnings",
                                  "notes", "symptom")} == {
        "plan_id": plan.plan_id, "plan_sha256": plan.plan_sha256, "expires_at": plan.expires_at,
        "summary": plan.summary, "inputs": plan.inputs, "approve_command": plan.approve_command,
        "approval_mode": plan.approval_mode, "redis_instance": plan.redis_instance,
        "candidates_found": plan.candidates_found, "truncated": plan.truncated, "warnings": plan.warnings,
        "notes": plan.notes, "symptom": plan.symptom}
    assert shown["blast_radius"] == plan.blast_radius.model_dump(mode="json")
    assert shown["steps"] == [{"number": s.number, "action": s.action, "description": s.description,
                               "target": s.target, "runs_on": s.runs_on, "reversible": s.reversible}
                              for s in plan.steps]
    assert len(plan.steps) >= 4 and [s["number"] for s in shown["steps"]] == list(range(1, len(plan.steps) + 1))
    assert shown["omitted"] == {"counts": {"step_commands": len(plan.steps)},  # commands: in the plan file
                                "how": 'call again with detail="full" for every item'}
    assert not any("command" in s for s in shown["steps"])
    assert plan.approve_command in proposed.content[0].text  # text-only clients see how to approve too
