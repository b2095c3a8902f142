"""Apply an approved plan: verify, pre-flight every precondition, then run step by step.

Order of business for ``apply_plan(plan_id, token)``:

1. load the plan and prove its integrity (hash and rendered commands);
2. verify the approval token for this exact plan (mode, MAC or signature, plan id, plan
   hash, expiry); in signature mode check that the trust file is out of the server user's
   reach (:func:`server.approval.trust.check_gate`); refuse an expired plan or one that was applied before;
3. unless ``dry_run``: consume the token's nonce (single use) and claim the plan
   (a plan runs once);
4. pre-flight: evaluate every step's static preconditions; the first drift stops the run
   before anything is touched;
   A replay step also fails it when the audit log or the target stream shows it was
   replayed already (:func:`~tools.remediation.replays.earlier_replay`);
5. run each step: re-check its preconditions (now including "the replay was confirmed"),
   back up and read back, execute, record the result in the audit log. The first drift,
   failure or unreachable service stops the run; the report says what was done, the
   backups stay on disk.

``dry_run`` does 1, 2 and 4 (the token is checked but not consumed) and changes nothing.
Refusals raise :class:`~server.errors.RemediationRefused` (or ``NotFound``); a drift or a
failure mid-run is a normal report with ``status="stopped"``. Every report carries the audit
chain's new head (``audit_head``); a refusal's message names it too.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from datetime import datetime

from server.approval.audit import AuditLog, audit_log, audit_path
from server.approval.refusal_window import RefusalBound, flush_due, record_unknown_plan_refusal
from server.approval.tokens import TokenRefused, consume_nonce, nonce_used, verify_token
from server.approval.trust import GateStatus, check_gate
from server.config import Settings
from server.connections import Connections
from server.errors import MeshError, NotFound, RemediationRefused
from tools.remediation import store
from tools.remediation.backups import BackupError, BackupFile, backup_path
from tools.remediation.model import ApplyReport, Plan, Step, StepResult, XAddOp
from tools.remediation.preconditions import CheckContext, first_drift
from tools.remediation.replays import earlier_replay
from tools.remediation.runners import Drift, RunContext, run_step
from tools.remediation.targets import check_targets

log = logging.getLogger("mesh.remediation")

AfterStep = Callable[[int], Awaitable[None]]


def _refuse(audit: AuditLog, bound: RefusalBound, plan_id: str, plan: Plan | None, exc: MeshError) -> None:
    """Audit the refusal and add the new audit head to its message (every result carries the head).

    A refusal of a plan id that names no plan is audited within the bound of
    :mod:`server.approval.refusal_window` (``bound``: a few in full per window, the rest counted in one record).
    """
    reason = exc.reason if isinstance(exc, TokenRefused) else type(exc).__name__
    if plan is None and isinstance(exc, NotFound):
        entry = record_unknown_plan_refusal(audit, bound, "apply_refused", plan_id=plan_id, plan_sha256=None,
                                            result=reason, detail=str(exc))
    else:
        entry = audit.record("apply_refused", plan_id=plan_id, plan_sha256=plan.plan_sha256 if plan else None,
                             result=reason, detail=str(exc))
    head = f"audit head {entry['head']}"
    if entry.get("coalesced"):
        head += "; this refusal is counted in the next refusals_coalesced record, with the other refusals of " \
                "unknown plans of this window"
    if exc.args and isinstance(exc.args[0], str):
        exc.args = (f"{exc.args[0]} ({head})", *exc.args[1:])


def _admit(
    settings: Settings, plan_id: str, token: str, dry_run: bool, audit: AuditLog
) -> tuple[Plan, str, GateStatus]:
    """Steps 1-3: the plan, the approver and the gate's status, or a refusal (audited)."""
    plan: Plan | None = None
    try:
        plan = store.load_plan(settings, plan_id)
        store.check_integrity(plan, settings.conventions)
        check_targets(plan, settings)  # every step runs where the approved plan says
        claims = verify_token(settings, token, plan_id=plan.plan_id, plan_sha256=plan.plan_sha256)
        gate = check_gate(settings)  # signature mode: the trust file must be out of the agent's reach
        if store.is_expired(plan):
            raise RemediationRefused(f"plan {plan_id} expired at {plan.expires_at}: propose the remediation again")
        if nonce_used(settings, claims.nonce):
            raise TokenRefused("reused", "this approval token was already used: tokens are single-use; "
                               f"have plan {plan_id} (or a fresh one) approved again")
        previous = store.application_record(settings, plan_id)
        if previous is not None:
            raise RemediationRefused(f"plan {plan_id} was already applied ({previous.get('status')}): "
                                     "a plan runs once; propose the remediation again")
        if not dry_run:
            consume_nonce(settings, claims)  # atomic: a second use of the token is refused here
            store.claim_application(settings, plan_id, claims.approver)  # atomic: a plan runs once
    except MeshError as exc:
        _refuse(audit, RefusalBound.of(settings), plan_id, plan, exc)
        raise
    return plan, claims.approver, gate


def _not_run(plan: Plan, start: int, why: str) -> list[StepResult]:
    return [StepResult(number=s.number, action=s.action, status="not_run", detail=why) for s in plan.steps[start:]]


async def _replay_guard(plan: Plan, step: Step, ctx: CheckContext, audit: AuditLog,
                        scanned: dict[str, str]) -> str | None:
    """For a replay step: was it replayed already (audit log or target stream)? See ``earlier_replay``."""
    if not isinstance(step.operation, XAddOp):
        return None
    proposed_ms = int(datetime.fromisoformat(plan.created_at).timestamp() * 1000)
    return await earlier_replay(ctx.connections.redis(), ctx.settings, audit, plan.plan_id, step.operation,
                                proposed_ms, scanned)


async def _preflight(plan: Plan, ctx: CheckContext, connections: Connections, audit: AuditLog,
                     scanned: dict[str, str]) -> tuple[int, str] | None:
    """``(index, problem)`` of the first step whose static preconditions fail, else None."""
    for index, step in enumerate(plan.steps):
        async with connections.redis_errors():
            problem = (await first_drift(step.checks, ctx, dynamic=False)
                       or await _replay_guard(plan, step, ctx, audit, scanned))
        if problem is not None:
            return index, problem
    return None


async def apply_plan(
    settings: Settings,
    connections: Connections,
    plan_id: str,
    token: str,
    *,
    dry_run: bool = False,
    after_step: AfterStep | None = None,
) -> ApplyReport:
    """Apply (or dry-run) plan ``plan_id`` under ``token``; see the module docstring."""
    plan_id = store.validate_plan_id(plan_id)
    audit = audit_log(settings)
    flush_due(audit, RefusalBound.of(settings))  # an ended window of refusals is written before this apply's records
    plan, approver, gate = _admit(settings, plan_id, token, dry_run, audit)
    warning = (("the server was started with --allow-unprotected-approvers and the trust check fails: "
                + "; ".join(gate.problems)) if gate.problems else None)
    connections = connections.bound_to(plan.redis_instance)  # every Redis step runs on the plan's instance
    backups = BackupFile(backup_path(settings, plan_id), plan_id, plan.plan_sha256)
    results: dict[int, StepResult] = {}
    check_ctx = CheckContext(settings, connections, results)
    scanned: dict[str, str] = {}  # the replay guard's stream scan resumes where the pre-flight's ended
    run_ctx = RunContext(settings, connections, backups, results, audit, approver)
    audit.record("dry_run" if dry_run else "apply_started", plan_id=plan_id, plan_sha256=plan.plan_sha256,
                 approver=approver, detail=f"{len(plan.steps)} step(s)")

    def report(status: str, steps: list[StepResult], summary: str) -> ApplyReport:
        entry = audit.record("apply_finished", plan_id=plan_id, plan_sha256=plan.plan_sha256, approver=approver,
                             result=status, detail=summary, dry_run=dry_run)
        final = ApplyReport(
            plan_id=plan_id, plan_sha256=plan.plan_sha256, dry_run=dry_run, approver=approver, status=status,
            steps=steps, backup_file=str(backups.path) if backups.path.exists() else None,
            audit_file=str(audit_path(settings)), summary=summary, audit_head=entry["head"],
            approval_warning=warning,
        )
        if not dry_run:
            store.finish_application(settings, plan_id, status, summary)
        return final

    try:
        drift = await _preflight(plan, check_ctx, connections, audit, scanned)
    except Exception as exc:  # a service down, a table gone, a crash: the plan is closed, never left "applying"
        if not isinstance(exc, MeshError):
            log.exception("remediation pre-flight of %s crashed", plan_id)
        detail = str(exc) if isinstance(exc, MeshError) else f"internal error ({type(exc).__name__}: {str(exc)[:300]})"
        return report("dry_run_drift" if dry_run else "stopped", _not_run(plan, 0, "not run"),
                      f"STOPPED before any change: the preconditions could not be checked: {detail}")
    if drift is not None:
        index, problem = drift
        step = plan.steps[index]
        steps = _not_run(plan, 0, "not run: a precondition no longer holds")
        steps[index] = StepResult(number=step.number, action=step.action, status="drift", detail=problem)
        audit.record("step", plan_id=plan_id, plan_sha256=plan.plan_sha256, approver=approver,
                     step=step.number, action=step.action, result="drift", detail=problem)
        return report("dry_run_drift" if dry_run else "stopped", steps,
                      f"STOPPED before any change: step {step.number} ({step.action}): {problem}. "
                      "Nothing was changed; propose the remediation again.")
    if dry_run:
        steps = [StepResult(number=s.number, action=s.action, status="would_run",
                            detail="preconditions hold" + ("" if s.reversible else "; NOT reversible"))
                 for s in plan.steps]
        return report("dry_run_ok", steps, f"dry run of {plan_id}: every precondition holds; nothing was changed")

    done: list[StepResult] = []
    for index, step in enumerate(plan.steps):
        status, detail, outcome = "done", "", None
        try:
            async with connections.redis_errors():
                problem = (await first_drift(step.checks, check_ctx, dynamic=True)
                           or await _replay_guard(plan, step, check_ctx, audit, scanned))
            if problem is not None:
                status, detail = "drift", f"precondition no longer holds: {problem}"
            else:
                outcome = await run_step(run_ctx, step)
                detail = outcome.detail
        except (Drift, BackupError) as exc:
            status, detail = ("drift" if isinstance(exc, Drift) else "failed"), str(exc)
        except MeshError as exc:  # ServiceUnavailable and friends
            status, detail = "failed", str(exc)
        except Exception as exc:  # a crash must still leave an honest report behind
            log.exception("remediation step %s crashed", step.number)
            status, detail = "failed", f"internal error ({type(exc).__name__}: {str(exc)[:300]})"
        output = outcome.output if outcome else {}
        if step.operation.op == "xadd" and outcome is None and run_ctx.replay_log:
            output = {"replayed": list(run_ctx.replay_log)}
            detail += f" (replayed before the failure: {', '.join(r['new_id'] for r in run_ctx.replay_log)})"
        result = StepResult(
            number=step.number, action=step.action, status=status, detail=detail,
            targets=outcome.targets if outcome else [], output=output,
            backup_records=outcome.backup_records if outcome else 0,
        )
        results[step.number] = result
        done.append(result)
        audit.record("step", plan_id=plan_id, plan_sha256=plan.plan_sha256, approver=approver, step=step.number,
                     action=step.action, result=status, detail=detail)
        if status != "done":
            rest = _not_run(plan, index + 1, f"not run: stopped at step {step.number}")
            ok = ", ".join(str(r.number) for r in done if r.status == "done") or "none"
            return report("stopped", done + rest,
                          f"STOPPED at step {step.number} ({step.action}): {detail}. Steps done: {ok}; "
                          "the backups are on disk.")
        if after_step is not None:
            await after_step(step.number)
    return report("completed", done, f"applied {plan_id}: {len(done)} step(s) done")
