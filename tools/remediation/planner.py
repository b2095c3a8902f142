"""``propose_remediation``: from a symptom, a plan built on live read-only inspection.

One builder per symptom, in the runbook's order (export and back up, claim or acknowledge,
clear stale locks, replay, confirm, delete from the DLQ, clean the retry bookkeeping,
reconcile SQL with guarded UPDATEs, retry a failed BullMQ job):

- ``dlq_replay``: :mod:`plan_dlq`; ``claim_dead_consumer`` / ``clear_stale_lock``: :mod:`plan_streams`;
- ``reconcile_outbox`` / ``requeue_stuck_job``: :mod:`plan_outbox`;
- ``retry_failed_job``: :mod:`plan_queues`.

The builders share :mod:`plan_base` (request, builder, checks) and never import this module.

Proposing only reads Redis and the databases; it writes the plan file and one audit
record. Nothing else changes until a human approves and ``apply_remediation`` runs.
"""

from __future__ import annotations

import getpass
import shlex
from datetime import UTC, datetime, timedelta
from typing import Any

from server.approval.audit import audit_log
from server.approval.tokens import describe_mode
from server.approval.trust import gate_status
from server.config import Settings
from server.connections import Connections
from server.errors import InvalidArgument, NotFound
from server.redis_settings import DEFAULT_INSTANCE
from tools.remediation import plan_dlq, plan_outbox, plan_queues, plan_streams, slots, store
from tools.remediation.model import SYMPTOMS, BlastRadius, Plan
from tools.remediation.plan_base import MAX_ID_CHARS, STREAM_ID_RE, UUID_RE, PlanBuilder, Request
from tools.remediation.targets import with_targets
from tools.streams.keys import check_key_name


def _need(value: str | None, name: str, symptom: str, hint: str) -> str:
    if value is None:
        raise InvalidArgument(f"symptom {symptom} needs {name}: {hint}")
    return value


def validate_request(settings: Settings, request: Request) -> Request:
    """Arguments checked per symptom; ``InvalidArgument`` saying what is missing or malformed."""
    if request.symptom not in SYMPTOMS:
        raise InvalidArgument(f"unknown symptom {request.symptom!r}: use one of {', '.join(SYMPTOMS)}")
    for name in ("stream", "group", "queue"):
        value = getattr(request, name)
        if value is not None:
            check_key_name(value, name)
    if request.service is not None and request.service not in settings.services:
        known = ", ".join(sorted(settings.services)) or "(none configured)"
        raise InvalidArgument(f"unknown service {request.service!r}: configured services are {known}")
    ids = request.ids
    cap = settings.limits.max_plan_messages
    if ids is not None:
        ids = [i.strip() for i in ids]
        if not ids:
            raise InvalidArgument("ids is empty: omit it to take every matching item, or list some ids")
        if len(ids) > cap:
            raise InvalidArgument(f"{len(ids)} ids given; a plan holds at most {cap} ([limits] max_plan_messages)")
        if len(set(ids)) != len(ids):
            raise InvalidArgument("ids holds duplicates")
        for value in ids:
            if not value or len(value) > MAX_ID_CHARS or any(ord(c) < 32 or ord(c) == 127 for c in value):
                raise InvalidArgument(f"id {value[:40]!r} is empty, too long or holds control characters")
    symptom = request.symptom
    if symptom in ("dlq_replay", "claim_dead_consumer", "clear_stale_lock"):
        _need(request.stream, "stream", symptom, "the source stream key, e.g. stream:event:created")
        if ids is not None:
            bad = [i for i in ids if not STREAM_ID_RE.match(i)]
            if bad:
                raise InvalidArgument(f"ids must be stream entry ids (<ms>-<seq>) for {symptom}: {bad[0]!r}")
    if symptom in ("reconcile_outbox", "requeue_stuck_job"):
        _need(request.service, "service", symptom, "the microservice whose database holds the outbox tables")
        if ids is not None:
            bad = [i for i in ids if not UUID_RE.match(i)]
            if bad:
                raise InvalidArgument(f"ids must be row UUIDs for {symptom}: {bad[0]!r}")
    if symptom == "reconcile_outbox" and ids is None:
        raise InvalidArgument(
            "reconcile_outbox needs ids: the event_queue / jobs_outbox ids whose replay was confirmed, or the job ids "
            "whose audit row or outbox row was left behind (trace_job names them); reconciling marks rows COMPLETED "
            "or deletes them, so it is never done in bulk"
        )
    if symptom == "retry_failed_job":
        _need(request.queue, "queue", symptom, "the BullMQ queue name (the jobs_outbox target)")
    return Request(symptom, request.stream, request.group, request.service, request.queue, ids)


def approve_command(settings: Settings, plan_id: str) -> str:
    """The command line a human runs to approve (same config and state directory as the server)."""
    parts = ["mesh-mcp", "approve", plan_id]
    if settings.config_file is not None:
        parts += ["--config", str(settings.config_file)]
    elif settings.workspace is not None:
        parts += ["--workspace", str(settings.workspace)]
    approver = default_approver_flag(settings)
    if approver:
        parts += ["--approver", approver]
    command = " ".join(shlex.quote(p) for p in parts)
    if settings.config_file is None and settings.state_dir is not None:
        command = f"MESH_STATE_DIR={shlex.quote(str(settings.state_dir))} {command}"
    return command


def default_approver_flag(settings: Settings) -> str | None:
    """Signature mode: the ``--approver`` to print when the default (this OS user's name) is not listed.

    With one listed approver that is it; with several, the first by name (the note lists them all).
    """
    listed = sorted(settings.approval.approvers)
    if settings.approval.mode != "signature" or not listed or getpass.getuser() in listed:
        return None
    return listed[0]


def approval_note(settings: Settings) -> str:
    """What the approval rests on: the mode, the approvers and the trust check (also shown by `approve`)."""
    note = "Approval: " + describe_mode(settings)
    if settings.approval.mode != "signature":
        return note
    status = gate_status(settings)
    if status.approvers:
        note += " Approvers: " + ", ".join(f"{who} ({fp})" for who, fp in status.approvers) + "."
    if status.problems:
        consequence = ("the server applies anyway (--allow-unprotected-approvers)" if status.allow_unprotected
                       else "apply_remediation will refuse until it is fixed")
        note += (f" Warning: the trust check fails, so an agent running as the server's OS user could add its own "
                 f"approver key ({'; '.join(status.problems)}): {consequence}.")
    return note


async def _build(builder: PlanBuilder, connections: Connections, request: Request) -> None:
    builders: dict[str, Any] = {
        "dlq_replay": plan_dlq.build_dlq_replay,
        "claim_dead_consumer": plan_streams.build_claim_dead_consumer,
        "clear_stale_lock": plan_streams.build_clear_stale_lock,
        "reconcile_outbox": plan_outbox.build_reconcile_outbox,
        "requeue_stuck_job": plan_outbox.build_requeue_stuck_job,
        "retry_failed_job": plan_queues.build_retry_failed_job,
    }
    await builders[request.symptom](builder, connections, request)


def plan_instance(connections: Connections, request: Request) -> str:
    """The Redis instance a plan reads and changes: its stream's, else its queue's, else the default."""
    if request.stream:
        return connections.redis_instance_for_stream(request.stream)
    if request.queue:
        return connections.redis_instance_for_queue(request.queue)
    return DEFAULT_INSTANCE


async def propose(settings: Settings, connections: Connections, request: Request) -> Plan:
    """Build, seal, save and audit a plan for ``request``; ``NotFound`` when there is nothing to do."""
    request = validate_request(settings, request)
    builder = PlanBuilder(settings)
    instance = plan_instance(connections, request)
    connections = connections.bound_to(instance)
    async with connections.redis_errors():
        await _build(builder, connections, request)
    if settings.redis.instance(instance).mode == "cluster":
        slots.review(builder.steps, builder.notes)
    if not builder.steps:
        extra = "; ".join(builder.warnings + builder.notes)
        raise NotFound(builder.nothing_to_do + (f" ({extra})" if extra else ""))
    now = datetime.now(UTC).replace(microsecond=0)
    plan_id = store.new_plan_id(now)
    plan = Plan(
        plan_id=plan_id,
        symptom=request.symptom,  # type: ignore[arg-type]
        created_at=now.isoformat(),
        expires_at=(now + timedelta(seconds=settings.approval.plan_ttl_s)).isoformat(),
        inputs={
            "stream": request.stream, "group": request.group, "service": request.service,
            "queue": request.queue, "ids": request.ids,
        },
        summary=builder.summary,
        steps=with_targets(builder.steps, instance, settings),
        blast_radius=BlastRadius(
            messages=builder.messages, rows=builder.rows, keys=builder.keys, streams=sorted(builder.streams),
            tables=sorted(builder.tables), consumer_groups_reached=sorted(builder.groups_reached),
        ),
        candidates_found=builder.candidates_found,
        truncated=builder.truncated,
        warnings=builder.warnings,
        notes=builder.notes,
        approval_mode=settings.approval.mode,
        approval_note=approval_note(settings),
        approve_command=approve_command(settings, plan_id),
        redis_instance=instance,
    ).sealed()
    store.save_plan(settings, plan)
    audit_log(settings).record(
        "proposed", plan_id=plan.plan_id, plan_sha256=plan.plan_sha256, result="proposed",
        detail=plan.summary, symptom=plan.symptom, steps=len(plan.steps),
    )
    return plan
