"""What a remediation plan is made of, and what applying it reports.

A :class:`Plan` is a list of :class:`Step` in the runbook's order. Each step carries a
typed :data:`Operation` (what the executor runs), the exact command or SQL rendered from
it (what the human approves; the executor re-renders and compares before running), a
human precondition plus machine :class:`Check` items re-evaluated at apply time, what is
backed up first, and whether the step can be undone.

``plan_sha256`` is the SHA-256 of the canonical JSON (sorted keys, no whitespace) of the
plan without that field: an approval token names this hash, so any edit of the plan
after approval voids the token. No floats anywhere (their text form is not canonical).
"""

from __future__ import annotations

import hashlib
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from server.approval.tokens import canonical_json
from tools.remediation.symptoms import SYMPTOMS, Symptom  # noqa: F401 (re-exported: the plans' own names)


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# -- operations ------------------------------------------------------------------------


class EntryRef(_M):
    key: str
    id: str


class PendingRef(_M):
    stream: str
    group: str
    id: str


class ExportOp(_M):
    """Save stream entries (dead letters, originals) and pending-entry facts to the backup file."""

    op: Literal["export"] = "export"
    entries: list[EntryRef] = Field(default_factory=list)
    pending: list[PendingRef] = Field(default_factory=list)


class XClaimOp(_M):
    op: Literal["xclaim"] = "xclaim"
    stream: str
    group: str
    consumer: str = Field(description="the live consumer receiving the entries")
    min_idle_ms: int
    ids: list[str]


class XAckOp(_M):
    op: Literal["xack"] = "xack"
    stream: str
    group: str
    ids: list[str]


class DelOp(_M):
    op: Literal["del"] = "del"
    keys: list[str]


class ReplayMessage(_M):
    dlq_key: str
    dlq_id: str
    message_id: str = Field(description="id of the message in the source stream (the DLQ messageId)")
    source: Literal["stream", "dlq_payload"] = Field(
        description="stream: the original entry's exact fields; dlq_payload: rebuilt from the dead letter"
    )
    fields: list[tuple[str, str]]


class XAddOp(_M):
    op: Literal["xadd"] = "xadd"
    stream: str
    maxlen: int | None
    messages: list[ReplayMessage]


class ConfirmOp(_M):
    op: Literal["confirm"] = "confirm"
    stream: str
    group: str
    replay_step: int
    timeout_ms: int


class XDelOp(_M):
    op: Literal["xdel"] = "xdel"
    key: str
    ids: list[str]


class ZRemOp(_M):
    op: Literal["zrem"] = "zrem"
    key: str
    members: list[str]


class SqlRow(_M):
    id: str
    updated_at: str | None = Field(default=None, description="guard: the row's updated_at seen at plan time")


class SqlUpdateOp(_M):
    op: Literal["sql_update"] = "sql_update"
    service: str
    table: str
    set_status: str
    expect_status: str
    rows: list[SqlRow]


class SqlDeleteOp(_M):
    """Delete rows still in ``expect_status``, each backed up (every column) and read back first, one transaction."""

    op: Literal["sql_delete"] = "sql_delete"
    service: str
    table: str
    expect_status: str
    ids: list[str]


class BullRequeueStalledOp(_M):
    """Move stalled BullMQ jobs (active, lock gone) back to wait, as BullMQ's stalled checker does."""

    op: Literal["bullmq_requeue_stalled"] = "bullmq_requeue_stalled"
    queue: str
    prefix: str
    lock_suffix: str
    job_ids: list[str]
    target_list: Literal["wait", "paused"]
    push: Literal["LPUSH", "RPUSH"]
    marker: bool = Field(description="BullMQ >= 5 wakes workers through the <queue>:marker sorted set")
    events_maxlen: int


class BullRetryOp(_M):
    """Move failed BullMQ jobs back to wait, as BullMQ's own ``Job.retry()`` does."""

    op: Literal["bullmq_retry"] = "bullmq_retry"
    queue: str
    prefix: str
    job_ids: list[str]
    target_list: Literal["wait", "paused"]
    push: Literal["LPUSH", "RPUSH"]
    marker: bool = Field(description="BullMQ >= 5 wakes workers through the <queue>:marker sorted set")
    events_maxlen: int


Operation = Annotated[
    ExportOp | XClaimOp | XAckOp | DelOp | XAddOp | ConfirmOp | XDelOp | ZRemOp | SqlUpdateOp | SqlDeleteOp
    | BullRetryOp | BullRequeueStalledOp,
    Field(discriminator="op"),
]

CheckKind = Literal[
    "entry_unchanged",
    "pending_owner",
    "consumer_live",
    "key_unchanged",
    "zset_member",
    "row_matches",
    "bull_job_failed",
    "bull_job_stalled",
    "queue_paused",
    "bull_job_absent",
    "key_absent",
    "audit_row_matches",
    "audit_row_absent",
    "step_ok",
]


class Check(_M):
    """One machine-checkable precondition (see ``preconditions.py`` for each kind's args)."""

    kind: CheckKind
    args: dict[str, Any]


class Step(_M):
    number: int
    action: str = Field(description="what the step does, e.g. export, replay, xdel_dlq, reconcile_sql")
    description: str
    command: str = Field(description="exact redis-cli command(s), one per line, or the SQL statement")
    params: list[list[str | None]] = Field(
        default_factory=list, description="SQL only: the bound parameters ($1, $2, ...) of each execution"
    )
    target: str
    runs_on: str = Field(
        default="",
        description="where the step runs: the PostgreSQL service and database, or the Redis instance (host, port, "
        "database; bound by plan_sha256 and resolved again at approve and apply time)",
    )
    precondition: str = Field(description="what must still hold at apply time (re-checked before the step)")
    checks: list[Check] = Field(default_factory=list)
    backup: str | None = Field(description="what is saved to the backup file before the step runs")
    reversible: bool
    operation: Operation


class BlastRadius(_M):
    messages: int = Field(description="stream messages replayed, claimed, acknowledged or deleted")
    rows: int = Field(description="SQL rows updated")
    keys: int = Field(description="Redis keys deleted or changed (locks, retry keys, BullMQ jobs)")
    streams: list[str] = Field(default_factory=list)
    tables: list[str] = Field(default_factory=list)
    consumer_groups_reached: list[str] = Field(
        default_factory=list, description="groups a replay is delivered to (every group of the stream)"
    )


class Plan(_M):
    plan_id: str
    symptom: Symptom
    created_at: str
    expires_at: str
    inputs: dict[str, Any]
    summary: str
    steps: list[Step]
    blast_radius: BlastRadius
    candidates_found: int = Field(description="items matching the symptom before the per-plan cap")
    truncated: bool = Field(description="more items matched than [limits] max_plan_messages; re-propose after")
    warnings: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    approval_mode: Literal["local", "signature"]
    approval_note: str
    approve_command: str
    redis_instance: str = Field(default="default", description="the Redis instance every Redis step runs on")
    plan_sha256: str = ""

    def content_hash(self) -> str:
        """SHA-256 of the canonical JSON of every field except ``plan_sha256``."""
        body = self.model_dump(mode="json", exclude={"plan_sha256"})
        return hashlib.sha256(canonical_json(body)).hexdigest()

    def sealed(self) -> Plan:
        """This plan with ``plan_sha256`` set."""
        return self.model_copy(update={"plan_sha256": self.content_hash()})

    def summary_text(self) -> str:
        br = self.blast_radius
        lines = [
            f"plan {self.plan_id} ({self.symptom}): {self.summary}",
            f"sha256 {self.plan_sha256}; expires {self.expires_at}",
            f"blast radius: {br.messages} message(s), {br.rows} row(s), {br.keys} key(s)",
        ]
        for step in self.steps:
            flag = "reversible" if step.reversible else "NOT reversible"
            where = f", on {step.runs_on}" if step.runs_on else ""
            lines.append(f"  {step.number}. [{step.action}] {step.description} ({flag}{where})")
        lines.extend(f"warning: {w}" for w in self.warnings)
        lines.extend(f"note: {n}" for n in self.notes)
        if self.steps:
            lines.append(
                f"Nothing was changed. To apply, a human runs `{self.approve_command}` at a terminal, "
                "checks the plan and gives you the token for apply_remediation."
            )
        lines.append(self.approval_note)
        return "\n".join(lines)


# -- apply results -----------------------------------------------------------------------

StepStatus = Literal["done", "would_run", "drift", "failed", "not_run"]


class StepResult(_M):
    number: int
    action: str
    status: StepStatus
    detail: str
    targets: list[str] = Field(default_factory=list, description="what the step touched (or would touch)")
    output: dict[str, Any] = Field(default_factory=dict, description="e.g. ids created by a replay")
    backup_records: int = 0


class ApplyReport(_M):
    plan_id: str
    plan_sha256: str
    dry_run: bool
    approver: str
    status: Literal["completed", "stopped", "dry_run_ok", "dry_run_drift"]
    steps: list[StepResult]
    backup_file: str | None
    audit_file: str
    summary: str
    audit_head: str = Field(default="", description="the audit chain's head after this apply, COUNT:SHA256: "
                            "keep it to check the log later with `mesh-mcp audit verify --expect-head`")
    approval_warning: str | None = Field(default=None, description="set when the approval gate is not protected "
                                         "(server started with --allow-unprotected-approvers)")

    def summary_text(self) -> str:
        lines = [self.summary]
        for r in self.steps:
            lines.append(f"  {r.number}. [{r.action}] {r.status}: {r.detail}")
        if self.backup_file:
            lines.append(f"backups: {self.backup_file}")
        lines.append(f"audit log: {self.audit_file}; head {self.audit_head}")
        if self.approval_warning:
            lines.append(f"WARNING: {self.approval_warning}")
        return "\n".join(lines)
