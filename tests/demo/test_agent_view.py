"""What an agent sees, over the demo's seeded data, through a real MCP client session.

- ``detail="summary"`` (the default) of each large tool stays within 4 KB of structured JSON,
  keeps the verdict, next step and ids, and says what it left out; ``detail="full"`` is the
  whole result (the full model, validated by the client against the advertised schema).
- The text content of every tool (apply_remediation as a dry run of an approved plan) carries
  every id, verdict code and next step its structured content has (clients that pass only the
  text lose nothing).
"""

from __future__ import annotations

import json

import pytest
from mcp import Client

from server.app import build_server
from server.demo.calls import DETAIL_TOOLS, detail_calls, every_tool_calls
from server.demo.command import DemoRun
from tests.demo.agent_view import must_show, text_of
from tests.remediation.conftest import approve

SUMMARY_MAX_BYTES = 4096


def _size(value: object) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


@pytest.mark.anyio
async def test_summary_is_small_and_keeps_what_the_next_call_needs(demo_run: DemoRun) -> None:
    calls = detail_calls(demo_run.scenario)
    assert {name for name, _ in calls} == set(DETAIL_TOOLS)
    async with Client(build_server(demo_run.settings), cache=None) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        for name, args in calls:
            schema = listed[name].input_schema["properties"]["detail"]
            assert schema["enum"] == ["summary", "full"] and schema["default"] == "summary", name
            summary = await client.call_tool(name, args)
            full = await client.call_tool(name, {**args, "detail": "full"})
            assert not summary.is_error and not full.is_error, (name, text_of(summary), text_of(full))
            small, whole = summary.structured_content, full.structured_content
            assert small["detail"] == "summary" and "detail" not in whole, name
            assert _size(small) <= SUMMARY_MAX_BYTES, (name, _size(small))
            assert _size(whole) > _size(small), name
            # what was cut is counted, with the way to get it
            assert small["omitted"] and small["omitted"]["counts"], name
            assert 'detail="full"' in small["omitted"]["how"], name
            # the verdict is the full one's (each propose_remediation call writes a new plan: its id differs)
            for key in ("verdict", "target", "stream", "symptom", "summary"):
                if key in whole:
                    assert small[key] == whole[key], (name, key)
            # every verdict code and next step of the summary is one of the full result's
            in_full = must_show(whole)
            for kind, value in must_show(small):
                if kind in ("code", "next_step"):
                    assert (kind, value) in in_full, (name, kind, value)
            # related runbooks stay, capped at two, each why cut short with an ellipsis, the rest counted
            if whole.get("related_skills"):
                kept = small["related_skills"]
                assert [r["uri"] for r in kept] == [r["uri"] for r in whole["related_skills"][:2]], name
                for short, long in zip(kept, whole["related_skills"], strict=False):
                    assert short["why"] == long["why"] or long["why"].startswith(short["why"][:-1]), name
                more = whole.get("related_skills_more", 0) + len(whole["related_skills"]) - len(kept)
                assert small["related_skills_more"] == more, name


@pytest.mark.anyio
async def test_summary_names_the_ids_of_the_next_call(demo_run: DemoRun) -> None:
    scn = demo_run.scenario
    poison = scn.fault("dlq_poison_pill").refs
    dead = scn.fault("dead_consumer").refs["consumer"]
    async with Client(build_server(demo_run.settings), cache=None) as client:
        traced = (await client.call_tool("trace_event", {"service": scn.service,
                                                        "event_id": poison["event_id"]})).structured_content
        ids = [hop["ids"] for hop in traced["hops"]]
        assert any(i.get("dlq_entry_id") == poison["dlq_entry_id"] for i in ids), ids
        assert any(i.get("stream") == scn.stream and i.get("group") == scn.group for i in ids), ids
        stream = (await client.call_tool("inspect_stream", {"stream": scn.stream})).structured_content
        dead_group = next(g for g in stream["groups"] if g["name"] == scn.group)
        assert dead in dead_group["dead_consumers"]
        trimmed = next(a for a in stream["anomalies"] if a["code"] == "trimmed_pending")
        assert scn.fault("trimmed_pending").refs["message_id"] in trimmed["ids"]


@pytest.mark.anyio
async def test_the_text_carries_every_id_verdict_and_next_step(demo_run: DemoRun) -> None:
    missing: dict[str, list[tuple[str, str]]] = {}
    async with Client(build_server(demo_run.settings), cache=None) as client:
        listed = {t.name for t in (await client.list_tools()).tools}
        calls = every_tool_calls(demo_run.scenario)
        assert listed - {name for name, _ in calls} == {"apply_remediation"}
        # apply_remediation too, as a dry run of a plan a human approved (the approval screen's code path)
        plan = await client.call_tool("propose_remediation", {"symptom": "claim_dead_consumer",
                                                              "stream": demo_run.scenario.stream,
                                                              "group": demo_run.scenario.group})
        plan_id = plan.structured_content["plan_id"]
        token = approve(demo_run.settings, plan_id)
        calls.append(("apply_remediation", {"plan_id": plan_id, "approval_token": token, "dry_run": True}))
        for name, args in calls:
            result = await client.call_tool(name, args)
            text = text_of(result)
            assert not result.is_error, (name, text)
            shapes = [result.structured_content]
            if name in DETAIL_TOOLS:  # the full shape's ids and sentences are in the text too
                full = await client.call_tool(name, {**args, "detail": "full"})
                shapes.append(full.structured_content)
                text += "\n" + text_of(full)  # (each propose_remediation call is a new plan)
            for shape in shapes:
                lost = sorted(item for item in must_show(shape) if item[1] not in text)
                if lost:
                    missing[f"{name}({json.dumps(args)})"] = lost
    assert missing == {}, json.dumps(missing, indent=1)
