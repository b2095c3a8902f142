"""Tool calls on the demo's seeded scenario, for the agent-view tests and docs/what-your-agent-sees.md.

:func:`detail_calls` gives one call of each tool with a ``detail`` argument, on the seeded fault
that makes its result largest; :func:`every_tool_calls` one call of every read tool. The
arguments come from the :class:`~server.demo.seed.Scenario` (its ids and names), never typed in.
"""

from __future__ import annotations

from typing import Any

from server.demo.report import STATIC_TARGET
from server.demo.seed import Scenario

Call = tuple[str, dict[str, Any]]

DETAIL_TOOLS = ("trace_job", "trace_event", "trace_request", "inspect_stream", "propose_remediation",
                "analyze_impact", "flow_map")
"""The tools taking ``detail: "summary" | "full"``."""


def detail_calls(scn: Scenario) -> list[Call]:
    """One call of each :data:`DETAIL_TOOLS` tool on the demo data."""
    failed_job = scn.fault("job_handler_failed").refs["job_id"]
    poison = scn.fault("dlq_poison_pill").refs
    return [
        ("trace_job", {"service": scn.service, "job_id": failed_job}),
        ("trace_event", {"service": scn.service, "event_id": poison["event_id"]}),
        ("trace_request", {"start": f"{scn.service}:jobs_outbox:{failed_job}"}),
        ("inspect_stream", {"stream": scn.stream}),
        ("propose_remediation", {"symptom": "dlq_replay", "stream": scn.stream, "group": scn.group}),
        ("analyze_impact", {"target": STATIC_TARGET}),
        ("flow_map", {"target": STATIC_TARGET, "live": True}),
    ]


def every_tool_calls(scn: Scenario) -> list[Call]:
    """A call of every read tool (and propose_remediation) on the demo data."""
    refs = {f.code: f.refs for f in scn.faults}
    dead = refs["dead_consumer"]["consumer"]
    return [
        ("server_info", {}),
        *detail_calls(scn),
        ("trace_job", {"service": scn.service, "job_id": refs["job_stuck_processing"]["job_id"]}),
        ("trace_event", {"service": scn.service, "event_id": refs["trimmed_pending"]["event_id"]}),
        ("propose_remediation", {"symptom": "claim_dead_consumer", "stream": scn.stream, "group": scn.group}),
        ("list_catalogue", {}),
        ("verify_flow", {"target": STATIC_TARGET}),
        ("check_skills", {}),
        ("query_outbox", {"table": "jobs_outbox", "service": scn.service}),
        ("query_outbox", {"table": "event_queue", "service": scn.service}),
        ("query_outbox", {"table": "job_audit", "service": scn.service}),
        ("outbox_health", {"service": scn.service}),
        ("list_pending", {"stream": scn.stream, "group": scn.group}),
        ("list_pending", {"stream": scn.stream, "group": scn.group, "consumer": dead}),
        ("dlq_list", {"stream": scn.stream}),
        ("list_streams", {}),
        ("inspect_queue", {"queue": scn.queue}),
        ("inspect_queue", {"queue": scn.queue, "job_id": refs["job_handler_failed"]["job_id"]}),
        ("list_queues", {}),
        ("lint_flows", {}),
        ("plan_flow", {"kind": "job", "name": "DEMO_NEW_JOB", "domain": "event"}),
        ("visualize_mesh", {}),
        ("visualize_mesh", {"format": "json"}),
    ]
