"""``requeue_stuck_job`` given ids, beyond a jobs_outbox row stuck PROCESSING (:mod:`plan_outbox`):

- a ``jobs_outbox`` or ``event_queue`` row ``FAILED`` (the runner gave up pushing it: verdicts
  ``pending_in_outbox`` / ``event_pending``) goes back to ``PENDING`` so the runner pushes it again,
  guarded by its status and the ``updated_at`` seen when planning;
- a pushed job (jobs_outbox ``COMPLETED``) whose BullMQ job is **stalled** (in ``active``, its lock
  gone: the worker died) moves back to ``wait`` (``paused`` when the queue is paused) as BullMQ's
  stalled checker does, under WATCH, its hash backed up first (verdict ``stalled``);
- a pushed job whose BullMQ job is gone and whose ``job_audit`` row is PROCESSING for longer than
  ``[limits] processing_ageing_s`` counted from ``started_at`` (else ``created_at``; the worker never
  writes job_audit's ``updated_at``), with no completion guard (the worker died and the job was lost:
  verdict ``stuck_processing``), goes back to ``PENDING`` so the runner pushes it again (job id = row
  id; the worker's upsert and guard protect against a double run). At apply time that step re-checks
  everything this verdict relied on, not only the outbox row: BullMQ still knows nothing of the job (no
  hash, no lock key, in no state list or set), the guard is still unset and the job_audit row is
  unchanged (:func:`lost_job_checks`); a job that came back or was picked up in between stops the apply.

Anything else is reported and left alone.
"""

from __future__ import annotations

import json
import re
from typing import Any

from server.connections import Connections
from tools.outbox.bull_state import bull_job_state
from tools.remediation import redis_reads as rr
from tools.remediation.audit_rows import AGE_COLUMN, audit_rows_query, row_digest
from tools.remediation.model import BullRequeueStalledOp, Check, SqlRow, SqlUpdateOp
from tools.remediation.plan_base import PlanBuilder, check
from tools.streams.keys import bull_key, fill

DEFAULT_EVENTS_MAXLEN = 10_000
_VERSION_RE = re.compile(r"(\d+)\.\d+")


def _stamp(row: dict) -> str | None:
    from tools.remediation.backups import jsonable_value

    return jsonable_value(row["updated_at"]) if row.get("updated_at") is not None else None


def add_back_to_pending(b: PlanBuilder, service: str, table: str, rows: list[dict], from_status: str, why: str,
                        *, evidence: dict[str, list[Check]] | None = None, evidence_text: str = "") -> None:
    """One step: ``rows`` of ``table`` from ``from_status`` to PENDING, guarded by status and updated_at.

    ``evidence`` adds, per row id, the checks of what else the verdict relied on (re-checked at apply
    time like the row's own guard); ``evidence_text`` says it in the step's precondition.
    """
    st = b.settings.conventions.statuses
    op = SqlUpdateOp(service=service, table=table, set_status=st.pending, expect_status=from_status,
                     rows=[SqlRow(id=r["id"], updated_at=_stamp(r)) for r in rows])
    checks: list[Check] = []
    for r in rows:
        checks.append(check("row_matches", service=service, table=table, id=r["id"], status=from_status,
                            updated_at=_stamp(r)))
        checks.extend((evidence or {}).get(r["id"], []))
    b.add(action="requeue_sql",
          description=f"{table}: {len(rows)} row(s) {from_status} -> {st.pending} ({why}), one transaction",
          operation=op, target=f"{service}.{table}",
          precondition=f"each row still {from_status} with the same updated_at{evidence_text}", checks=checks,
          backup="every column of each row, read inside the transaction before the UPDATE", reversible=True)
    b.rows += len(rows)
    b.tables.add(f"{service}.{table}")


LOST_EVIDENCE = ("; and, as when planned, BullMQ still knows nothing of each job (no job hash, no lock key, in no "
                 "state list or set), its completion guard is unset and its job_audit row is unchanged (same status, "
                 "worker, attempt and start time)")
"""The precondition text of a lost job's requeue: what :func:`lost_job_checks` re-checks."""


NEVER_PUSHED_EVIDENCE = ("; and, as when planned, BullMQ still knows nothing of each job (no job hash, no lock key, "
                         "in no state list or set), its completion guard is unset and it has no job_audit row")
"""The precondition text of a never-pushed row's requeue: what :func:`never_pushed_checks` re-checks."""


def _unknown_to_redis(b: PlanBuilder, queue: str, job_id: str, **verdict: str) -> list[Check]:
    """BullMQ knows nothing of the job and its completion guard is unset (``verdict`` names the plan's verdict)."""
    conv = b.settings.conventions
    return [
        check("bull_job_absent", prefix=conv.bullmq_prefix, queue=queue, job_id=job_id,
              lock_suffix=conv.bullmq_lock_suffix, lists=list(conv.bullmq_state_lists),
              sorted_sets=list(conv.bullmq_state_sorted_sets), **verdict),
        check("key_absent", key=fill(conv.job_completed_key, job_id=job_id),
              what="the worker's completion guard: the job ran"),
    ]


def lost_job_checks(b: PlanBuilder, service: str, queue: str, job_id: str, audit: dict) -> list[Check]:
    """What the "lost with its dead worker" verdict relied on, beyond the outbox row, as apply-time checks."""
    conv = b.settings.conventions
    return [*_unknown_to_redis(b, queue, job_id),
            check("audit_row_matches", service=service, table=conv.tables.job_audit, job_id=job_id,
                  status=audit[conv.columns.status], digest=row_digest(audit))]


def never_pushed_checks(b: PlanBuilder, service: str, queue: str, job_id: str) -> list[Check]:
    """What the "never pushed" verdict of a row stuck PROCESSING relied on, beyond the outbox row, as apply-time
    checks: no BullMQ job (hash, lock, state list or set), no completion guard, no job_audit row."""
    conv = b.settings.conventions
    return [*_unknown_to_redis(b, queue, job_id, verdict="never pushed"),
            check("audit_row_absent", service=service, table=conv.tables.job_audit, job_id=job_id)]


async def _audits(connections: Connections, b: PlanBuilder, service: str, ids: list[str]) -> dict[str, dict]:
    """Each job's whole job_audit row (by job id), with its age as :data:`AGE_COLUMN`."""
    conv = b.settings.conventions
    query = audit_rows_query(conv, with_age=True)
    result = await connections.read(service, query, (ids,), max_rows=len(ids))
    return {str(r[conv.columns.job_id]): r for r in result.rows}


async def _stalled_step(b: PlanBuilder, redis: Any, queue: str, job_ids: list[str]) -> None:
    conv = b.settings.conventions
    meta = {rr.text(k): rr.text(v) for k, v in (await redis.hgetall(bull_key(conv, queue, "meta"))).items()}
    paused = "paused" in meta
    version = _VERSION_RE.search(meta.get("version", ""))
    marker = bool((version and int(version.group(1)) >= 5) or await redis.exists(bull_key(conv, queue, "marker")))
    try:
        events_maxlen = int(meta.get("opts.maxLenEvents") or DEFAULT_EVENTS_MAXLEN)
    except ValueError:
        events_maxlen = DEFAULT_EVENTS_MAXLEN
    by_push: dict[str, list[str]] = {"LPUSH": [], "RPUSH": []}
    for job_id in job_ids:
        raw = await redis.hget(bull_key(conv, queue, job_id), "opts")
        try:
            opts = json.loads(raw or b"{}")
        except ValueError:
            opts = {}
        by_push["RPUSH" if isinstance(opts, dict) and opts.get("lifo") else "LPUSH"].append(job_id)
    target = "paused" if paused else "wait"
    for push, ids in by_push.items():
        if not ids:
            continue
        checks = [check("bull_job_stalled", prefix=conv.bullmq_prefix, queue=queue, job_id=j,
                        lock_suffix=conv.bullmq_lock_suffix) for j in ids]
        b.add(action="bullmq_requeue_stalled",
              description=f"move {len(ids)} stalled job(s) of {queue} (active, lock gone) back to {target}, as "
                          "BullMQ's stalled checker does",
              operation=BullRequeueStalledOp(queue=queue, prefix=conv.bullmq_prefix,
                                             lock_suffix=conv.bullmq_lock_suffix, job_ids=ids,
                                             target_list=target, push=push, marker=marker,
                                             events_maxlen=events_maxlen),
              target=f"{conv.bullmq_prefix}:{queue}",
              precondition="each job still in the active list with no lock; the queue's paused state unchanged",
              checks=[*checks, check("queue_paused", prefix=conv.bullmq_prefix, queue=queue, paused=paused)],
              backup="each job hash", reversible=False)
        b.keys += len(ids)
    if paused:
        b.warnings.append(f"queue {queue} is paused: the jobs go to its paused list and run once it is resumed")
    b.notes.append(f"a requeued stalled job runs again only when a worker of {queue} runs; BullMQ's own stalled "
                   "checker (in any running worker) would have moved it back too")


async def add_pushed_requeues(b: PlanBuilder, connections: Connections, service: str, rows: list[dict]) -> int:
    """Steps for pushed jobs (jobs_outbox COMPLETED) that are stalled or lost by a dead worker; returns how many."""
    settings, conv = b.settings, b.settings.conventions
    st, table = conv.statuses, conv.tables.jobs_outbox
    if not rows:
        return 0
    audits = await _audits(connections, b, service, [r["id"] for r in rows])
    redis = connections.redis()
    stalled: dict[str, list[str]] = {}
    lost: list[dict] = []
    evidence: dict[str, list[Check]] = {}
    async with connections.redis_errors():
        for r in rows:
            job = await bull_job_state(redis, conv, r["target"], r["id"],
                                       list_scan_max=settings.limits.bull_list_scan_max)
            audit = audits.get(r["id"])
            audit_status = audit[conv.columns.status] if audit is not None else None
            guard = await redis.exists(fill(conv.job_completed_key, job_id=r["id"]))
            if job is not None and job.stalled:
                stalled.setdefault(str(r["target"]), []).append(r["id"])
            elif job is None and not guard and audit is not None and audit_status == st.processing:
                if (audit[AGE_COLUMN] or 0) > settings.limits.processing_ageing_s:
                    lost.append(r)
                    evidence[r["id"]] = lost_job_checks(b, service, str(r["target"]), r["id"], audit)
                else:
                    b.warnings.append(f"job {r['id']} started {audit[AGE_COLUMN]:.0f} s ago (< "
                                      f"{settings.limits.processing_ageing_s} s): it may still run; skipped")
            else:
                state = f"BullMQ {job.state}" if job is not None else "no BullMQ job"
                b.warnings.append(f"{table} row {r['id']} is {st.completed} (pushed): {state}, job_audit "
                                  f"{audit_status or 'missing'}, guard {'set' if guard else 'unset'}: "
                                  "not stalled nor lost by a dead worker; skipped (trace_job says what it is)")
        for queue, ids in stalled.items():
            await _stalled_step(b, redis, queue, ids)
    if lost:
        add_back_to_pending(b, service, table, lost, st.completed,
                            "its worker died and BullMQ lost the job: the outbox runner pushes it again",
                            evidence=evidence, evidence_text=LOST_EVIDENCE)
    return sum(len(i) for i in stalled.values()) + len(lost)
