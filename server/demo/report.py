"""The diagnosis of ``mesh-mcp demo``: tool calls through a real MCP client, and the report.

:func:`diagnose` opens an in-process MCP client session on ``build_server(settings)``
and calls the tools in the runbook's order (``analyze_impact``, ``outbox_health``,
``trace_job``, ``inspect_queue``, ``inspect_stream``, ``dlq_list``, ``trace_event``, then
``propose_remediation``). Each seeded fault of the :class:`~server.demo.seed.Scenario`
is then checked against what the tools returned: a fault counts as *found* only when a
tool's structured result carries the expected diagnosis code (a ``verdict``, a
``finding`` or an ``anomaly``) about that fault's own identifiers, or, for the listing
tools that have no codes (``dlq_list``, ``inspect_queue``), a record whose fields equal
the fault's identifiers and state (the dead letter of that message, that job ``failed``).
A tool missing from this build, or failing, is reported as such; nothing is filled in by
the demo itself.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field

from server.app import build_server
from server.config import Settings
from server.demo.seed import Fault, Scenario
from server.errors import MeshError

STATIC_TARGET = "GEOCODE_EVENT"


class ToolCall(BaseModel):
    tool: str
    arguments: dict[str, Any]
    available: bool = Field(description="the tool is registered in this build")
    ok: bool = Field(description="the call returned a result that is not an error")
    text: str = Field(default="", description="the human-readable text of the result, or the error")
    duration_ms: float = 0.0
    structured: Any = Field(default=None, description="structured content of the result")


class PlanSummary(BaseModel):
    symptom: str
    arguments: dict[str, Any]
    plan_id: str | None = None
    steps: list[str] = Field(default_factory=list)
    blast_radius: Any = None
    error: str | None = None


class RemedyStep(BaseModel):
    stage: int = Field(description="stage of the remediation runbook (1 keep, 2 free, 3 fix, 4 replay, 5 check)")
    text: str


class Finding(BaseModel):
    code: str = Field(description="the seeded fault")
    title: str
    seeded: str = Field(description="what the demo broke, in one sentence")
    found: bool = Field(description="a tool reported this fault (the expected code about its identifiers)")
    found_by: list[str] = Field(default_factory=list, description="'tool: code: sentence' for each tool that did")
    not_checked: list[str] = Field(default_factory=list, description="probes that could not run, and why")
    fix: str = Field(description="what has to happen, in the runbook's terms")
    steps: list[RemedyStep] = Field(default_factory=list)
    plan: PlanSummary | None = None


class DemoReport(BaseModel):
    ok: bool = Field(description="every seeded fault was found by a tool, and no tool was missing or failed")
    services: dict[str, str]
    workspace: str
    seconds: dict[str, float] = Field(default_factory=dict)
    static_map: dict[str, list[str]] = Field(default_factory=dict)
    health: str = ""
    findings: list[Finding]
    missing_tools: list[str] = Field(default_factory=list)
    failed_tools: list[str] = Field(default_factory=list, description="tools that returned an error")
    notes: list[str] = Field(default_factory=list)
    calls: list[ToolCall] = Field(default_factory=list)


@dataclass(frozen=True)
class Probe:
    """A tool call that should report ``codes`` (any of) about ``mention`` (if given), or a ``record``.

    ``record``: for tools without diagnosis codes, the field values (all of them) one item of
    the result must have, e.g. ``(("message_id", "1-0"),)`` for a dead letter of message 1-0.
    """

    tool: str
    arguments: dict[str, Any]
    codes: frozenset[str] = frozenset()
    mention: str | None = None
    record: tuple[tuple[str, str], ...] = ()


def _walk(value: Any) -> Iterator[dict[str, Any]]:
    if isinstance(value, dict):
        yield value
        for item in value.values():
            yield from _walk(item)
    elif isinstance(value, list):
        for item in value:
            yield from _walk(item)


def match_probe(structured: Any, probe: Probe) -> str | None:
    """The evidence sentence of the first result item that satisfies ``probe``, else None.

    An item satisfies it when it carries one of ``probe.codes`` (its ``code`` field) and, if
    ``probe.mention`` is set, names it somewhere; or, for a probe with a ``record``, when each
    of the record's fields has exactly the expected value.
    """
    for item in _walk(structured):
        if probe.record:
            if all(str(item.get(key)) == value for key, value in probe.record):
                shown = ", ".join(f"{key}={value}" for key, value in probe.record)
                detail = item.get("failed_reason") or item.get("error") or ""
                return f"{shown}: {str(detail).splitlines()[0] if detail else ''}".strip().rstrip(":")
            continue
        code = item.get("code")
        about = probe.mention is None or probe.mention in json.dumps(item, default=str)
        if isinstance(code, str) and code in probe.codes and about:
            sentence = item.get("sentence") or item.get("message") or ""
            return f"{code}: {sentence}".strip().rstrip(":")
    return None


def probes_of(fault: Fault, scn: Scenario) -> list[Probe]:
    """The tool results that must show ``fault``."""
    svc, stream = scn.service, scn.stream
    r = fault.refs
    table: dict[str, list[Probe]] = {
        "job_stuck_pending": [
            Probe("trace_job", {"service": svc, "job_id": r.get("job_id")}, frozenset({"pending_in_outbox"})),
            Probe("outbox_health", {"service": svc}, frozenset({"pending_in_outbox"})),
        ],
        "job_stuck_processing": [
            Probe("trace_job", {"service": svc, "job_id": r.get("job_id")}, frozenset({"stuck_processing"})),
            Probe("outbox_health", {"service": svc}, frozenset({"stuck_processing"})),
        ],
        "job_handler_failed": [
            Probe("trace_job", {"service": svc, "job_id": r.get("job_id")}, frozenset({"handler_failed"})),
            Probe("inspect_queue", {"queue": scn.queue, "job_id": r.get("job_id")},
                  record=(("job_id", str(r.get("job_id"))), ("state", "failed"))),
        ],
        "dlq_poison_pill": [
            Probe("dlq_list", {"stream": stream}, record=(("message_id", str(r.get("message_id"))),)),
            Probe("inspect_stream", {"stream": stream}, frozenset({"dlq_not_empty"}), scn.dlq_stream),
            Probe("trace_event", {"service": svc, "event_id": r.get("event_id")}, frozenset({"in_dlq"})),
        ],
        "dead_consumer": [
            Probe("inspect_stream", {"stream": stream}, frozenset({"dead_consumer"}), r.get("consumer")),
        ],
        "trimmed_pending": [
            Probe("inspect_stream", {"stream": stream}, frozenset({"trimmed_pending"}), r.get("message_id")),
            Probe("trace_event", {"service": svc, "event_id": r.get("event_id")}, frozenset({"trimmed"})),
        ],
        "stale_idempotency_lock": [
            Probe("inspect_stream", {"stream": stream}, frozenset({"stale_idempotency_lock"}), r.get("message_id")),
        ],
    }
    return table[fault.code]


STAGES = {
    1: "Keep what a repair would delete",
    2: "Free the pending list (stale locks first)",
    3: "Fix the causes (nothing is replayed before)",
    4: "Replay and requeue",
    5: "Check and reconcile",
}
"""The remediation runbook's stages, in order."""


def remedy_of(fault: Fault, scn: Scenario) -> tuple[list[tuple[int, str]], dict[str, Any] | None]:
    """(runbook steps as (stage, text), the propose_remediation arguments of the last step or None)."""
    r = fault.refs
    stream, group = scn.stream, scn.group
    remedies: dict[str, tuple[list[tuple[int, str]], dict[str, Any] | None]] = {
        "job_stuck_pending": (
            [(3, f"restart the outbox runner of {scn.emitter} and check it reaches its database; it then claims "
                 f"job {r.get('job_id')} as usual (no data to repair, so no plan)")], None),
        "job_stuck_processing": (
            [(4, f"put job {r.get('job_id')} back to PENDING so the runner pushes it again")],
            {"symptom": "requeue_stuck_job", "service": scn.service, "ids": [r.get("job_id")]}),
        "job_handler_failed": (
            [(3, f"fix the geocoding input of job {r.get('job_id')} (the handler's error)"),
             (4, f"retry BullMQ job {r.get('job_id')} on {scn.queue}")],
            {"symptom": "retry_failed_job", "queue": scn.queue, "ids": [r.get("job_id")]}),
        "dlq_poison_pill": (
            [(1, f"export dead letter {r.get('dlq_entry_id')} of {scn.dlq_stream} (dlq_list; it is in the --json "
                 "report)"),
             (3, f"give event {r.get('event_id')} its missing organizerId"),
             (4, f"replay event {r.get('event_id')} with all its original fields, then delete the dead letter and "
                 "its retry keys")],
            {"symptom": "dlq_replay", "stream": stream, "group": group, "ids": [r.get("dlq_entry_id")]}),
        "dead_consumer": (
            [(2, f"claim the entries of {r.get('consumer')} for a live consumer")],
            {"symptom": "claim_dead_consumer", "stream": stream, "group": group}),
        "trimmed_pending": (
            [(2, f"check event {r.get('event_id')} with trace_event, then acknowledge entry {r.get('message_id')}: "
                 "its message is gone and can never be processed (no plan: a human decides)")], None),
        "stale_idempotency_lock": (
            [(2, f"delete {r.get('lock_key')} before anything re-reads entry {r.get('message_id')}, or the re-read "
                 "is acknowledged with no effect")],
            {"symptom": "clear_stale_lock", "stream": stream, "group": group, "ids": [r.get("message_id")]}),
    }
    return remedies[fault.code]


def _step_line(step: Any) -> str:
    if not isinstance(step, dict):
        return str(step)
    action = step.get("action") or ""
    command = step.get("command") or step.get("sql") or step.get("redis") or ""
    if isinstance(command, list | dict):
        command = json.dumps(command, default=str)
    return f"{action}: {command}".strip(": ")


def _site_line(site: Any) -> str:
    if not isinstance(site, dict):
        return str(site)
    where = "/".join(p for p in (site.get("repo"), site.get("file")) if p)
    if site.get("repo") and str(site.get("file", "")).startswith(f"{site.get('repo')}/"):
        where = str(site.get("file"))
    extra = " (test only)" if site.get("test_only") else ""
    return f"{site.get('kind', '?')} {where}:{site.get('line', '?')} {site.get('symbol') or ''}{extra}".rstrip()


def static_map_of(structured: Any) -> dict[str, list[str]]:
    if not isinstance(structured, dict):
        return {}
    out: dict[str, list[str]] = {}
    for key in ("producers", "consumers"):
        out[key] = [_site_line(site) for site in structured.get(key) or []]
    routes = []
    for route in structured.get("routes") or []:
        if isinstance(route, dict):
            routes.append(f"{route.get('kind', '')} {route.get('name', '')}".strip())
        else:
            routes.append(str(route))
    out["routes"] = routes
    return out


class _Caller:
    def __init__(self, client: Any, tools: set[str]) -> None:
        self.client, self.tools = client, tools
        self.calls: dict[str, ToolCall] = {}

    async def call(self, tool: str, arguments: dict[str, Any]) -> ToolCall:
        key = f"{tool}:{json.dumps(arguments, sort_keys=True)}"
        if key in self.calls:
            return self.calls[key]
        if tool not in self.tools:
            result = ToolCall(tool=tool, arguments=arguments, available=False, ok=False,
                              text=f"{tool} is not available in this build of mesh-mcp")
        else:
            started = time.perf_counter()
            try:
                res = await self.client.call_tool(tool, arguments)
                text = "\n".join(getattr(block, "text", "") for block in res.content).strip()
                result = ToolCall(tool=tool, arguments=arguments, available=True, ok=not res.is_error, text=text,
                                  structured=res.structured_content)
            except Exception as exc:  # a protocol failure: report it, never hide it
                result = ToolCall(tool=tool, arguments=arguments, available=True, ok=False,
                                  text=f"{type(exc).__name__}: {exc}")
            result.duration_ms = round((time.perf_counter() - started) * 1000, 1)
        self.calls[key] = result
        return result


async def diagnose(settings: Settings, scn: Scenario, services: dict[str, str]) -> DemoReport:
    """Run the diagnosis through a real MCP client session and build the report."""
    from mcp import Client

    try:
        server = build_server(settings)
    except Exception as exc:  # a capability failed to register: say so plainly, there is no diagnosis
        raise MeshError(f"the MCP server could not be built ({type(exc).__name__}: {exc}); no diagnosis ran") from exc
    async with Client(server, cache=None) as client:
        listed = await client.list_tools()
        caller = _Caller(client, {tool.name for tool in listed.tools})
        impact = await caller.call("analyze_impact", {"target": STATIC_TARGET})
        health = await caller.call("outbox_health", {"service": scn.service})
        findings = []
        for fault in scn.faults:
            found_by, not_checked = [], []
            for probe in probes_of(fault, scn):
                call = await caller.call(probe.tool, probe.arguments)
                if not call.ok:
                    not_checked.append(f"{probe.tool}: {call.text.splitlines()[0] if call.text else 'failed'}")
                    continue
                sentence = match_probe(call.structured, probe)
                if sentence:
                    found_by.append(f"{probe.tool}: {sentence.splitlines()[0]}")
            steps, proposal = remedy_of(fault, scn)
            plan = None
            if proposal is not None:
                args = {k: v for k, v in proposal.items() if v is not None}
                call = await caller.call("propose_remediation", {**args, "detail": "full"})  # the commands
                plan = PlanSummary(symptom=proposal["symptom"], arguments=args)
                if call.ok and isinstance(call.structured, dict):
                    plan.plan_id = call.structured.get("plan_id")
                    plan.steps = [_step_line(step) for step in call.structured.get("steps") or []]
                    plan.blast_radius = call.structured.get("blast_radius")
                else:
                    plan.error = call.text.splitlines()[0] if call.text else "failed"
            findings.append(Finding(
                code=fault.code, title=fault.title, seeded=fault.story, found=bool(found_by), found_by=found_by,
                not_checked=not_checked, fix="; then ".join(text for _, text in steps),
                steps=[RemedyStep(stage=stage, text=text) for stage, text in steps], plan=plan))
    calls = list(caller.calls.values())
    missing = sorted({c.tool for c in calls if not c.available})
    failed = sorted({c.tool for c in calls if c.available and not c.ok})
    notes = []
    if not scn.consumer_aged:
        notes.append("the dead consumer's last-seen time could not be moved into the past on this Redis; "
                     "it looks recently active, so inspect_stream may not call it dead")
    return DemoReport(
        ok=all(f.found for f in findings) and not missing and not failed,
        services=services, workspace=str(settings.workspace),
        static_map=static_map_of(impact.structured) if impact.ok else {"error": [impact.text]},
        health=health.text, findings=findings, missing_tools=missing, failed_tools=failed, notes=notes, calls=calls,
    )


def _cut(line: str, width: int = 150) -> str:
    """One line of a command, cut for the terminal (the JSON report keeps it whole)."""
    return line if len(line) <= width else line[: width - 1] + "…"


def _indent(text: str, prefix: str = "    ") -> str:
    return "\n".join(prefix + line if line else line for line in text.splitlines())


def render_text(report: DemoReport) -> str:
    """The report as text for a terminal."""
    found = sum(f.found for f in report.findings)
    out = ["mesh-mcp demo: a broken asynchronous system, diagnosed through MCP", "=" * 66]
    for name, value in report.services.items():
        out.append(f"{name:<11}{value}")
    out.append(f"{'workspace':<11}{report.workspace}")
    if report.seconds:
        out.append(f"{'timing':<11}" + ", ".join(f"{k} {v:.1f} s" for k, v in report.seconds.items()))
    out += ["", f"1. What should happen: analyze_impact(target=\"{STATIC_TARGET}\")"]
    for key, lines in report.static_map.items():
        for i, line in enumerate(lines or ["(none)"]):
            out.append(f"   {key if i == 0 else '':<10} {line}")
    out += ["", "2. What the outbox tables say: outbox_health(service=...)"]
    out.append(_indent(report.health or "(no result)", "   "))
    out += ["", f"3. What is broken: {len(report.findings)} seeded faults, {found} found by mesh-mcp"]
    for number, finding in enumerate(report.findings, 1):
        out.append(f"   [{number}] {finding.title:<48} {'FOUND' if finding.found else 'NOT FOUND'}")
        out.append(f"       seeded:   {finding.seeded}")
        for line in finding.found_by:
            out.append(f"       found by: {line}")
        for line in finding.not_checked:
            out.append(f"       not run:  {line}")
        out.append(f"       fix:      {finding.fix}")
        if finding.plan is not None:
            if finding.plan.plan_id:
                out.append(f"       plan:     {finding.plan.symptom} -> plan {finding.plan.plan_id}")
                for step in finding.plan.steps:
                    first, *rest = step.splitlines() or [""]
                    out.append(f"                 - {_cut(first)}")
                    out.extend(f"                     {_cut(line)}" for line in rest)
            else:
                out.append(f"       plan:     {finding.plan.symptom}: not proposed ({finding.plan.error})")
    out += ["", "4. The plan to fix it, in the runbook's order"]
    for stage, title in STAGES.items():
        out.append(f"   {stage}. {title}")
        for finding in report.findings:
            last = max((step.stage for step in finding.steps), default=0)
            for step in (step for step in finding.steps if step.stage == stage):
                plan = finding.plan if step.stage == last else None
                ref = ""
                if plan is not None:
                    ref = f" [plan {plan.plan_id}]" if plan.plan_id else f" [{plan.symptom}: not proposed]"
                out.append(f"      - {step.text}{ref}")
        if stage == 5:
            out.append("      - call trace_job / trace_event / inspect_stream again until each verdict is ok; rows "
                       "left FAILED: propose_remediation(symptom=\"reconcile_outbox\")")
    out += [
        "",
        "Nothing was changed: each plan is a proposal. A human approves one with `mesh-mcp approve PLAN_ID`;",
        "an agent then applies it with apply_remediation on a server started with --enable-remediation",
        "(`mesh-mcp demo --serve` runs one on this data and prints its config).",
    ]
    if report.missing_tools:
        out.append(f"Tools missing from this build: {', '.join(report.missing_tools)}.")
    if report.failed_tools:
        out.append(f"Tools that returned an error: {', '.join(report.failed_tools)} (see 'not run' above).")
    for note in report.notes:
        out.append(f"Note: {note}.")
    return "\n".join(out)
