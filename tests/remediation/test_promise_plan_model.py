"""Promise: what a plan and an apply report say to the human is exactly what they hold.

:meth:`Plan.summary_text` (what ``propose_remediation`` shows before approval) and
:meth:`ApplyReport.summary_text` (what ``apply_remediation`` reports), built from typed models,
line by line; the approval wording names who acts and how.
"""

from __future__ import annotations

from tools.remediation.model import ApplyReport, BlastRadius, DelOp, ExportOp, Plan, Step, StepResult


def _plan(steps: list[Step]) -> Plan:
    return Plan(
        plan_id="p-20261130-021033-0a1b2c3d", symptom="clear_stale_lock", created_at="2026-11-30T02:10:33+00:00",
        expires_at="2026-11-30T03:10:33+00:00", inputs={"stream": "s"}, summary="delete 1 lock", steps=steps,
        blast_radius=BlastRadius(messages=2, rows=3, keys=4), candidates_found=1, truncated=False,
        warnings=["w1"], notes=["n1", "n2"], approval_mode="local", approval_note="Approval: local mode.",
        approve_command="mesh-mcp approve p-20261130-021033-0a1b2c3d",
    ).sealed()


def _step(number: int, action: str, reversible: bool) -> Step:
    op = ExportOp() if action == "export" else DelOp(keys=["k"])
    return Step(number=number, action=action, description=f"do {action}", command="", target="",
                precondition="p", backup="b", reversible=reversible, operation=op)


def test_a_plan_s_text_line_by_line() -> None:
    plan = _plan([_step(1, "export", True), _step(2, "delete_stale_locks", False)])
    assert plan.summary_text().splitlines() == [
        "plan p-20261130-021033-0a1b2c3d (clear_stale_lock): delete 1 lock",
        f"sha256 {plan.plan_sha256}; expires 2026-11-30T03:10:33+00:00",
        "blast radius: 2 message(s), 3 row(s), 4 key(s)",
        "  1. [export] do export (reversible)",
        "  2. [delete_stale_locks] do delete_stale_locks (NOT reversible)",
        "warning: w1",
        "note: n1",
        "note: n2",
        "Nothing was changed. To apply, a human runs `mesh-mcp approve p-20261130-021033-0a1b2c3d` at a terminal, "
        "checks the plan and gives you the token for apply_remediation.",
        "Approval: local mode.",
    ]
    assert plan.redis_instance == "default" and len(plan.plan_sha256) == 64


def test_a_plan_without_steps_offers_nothing_to_approve() -> None:
    text = _plan([]).summary_text().splitlines()
    assert text[-1] == "Approval: local mode." and not any("To apply" in line for line in text)


def _report(**kw) -> ApplyReport:
    base = dict(plan_id="p-1", plan_sha256="ab", dry_run=False, approver="amy", status="completed",
                steps=[StepResult(number=1, action="export", status="done", detail="saved 2"),
                       StepResult(number=2, action="xdel_dlq", status="drift", detail="entry gone")],
                backup_file="/b/p-1.jsonl", audit_file="/a/audit.log", summary="plan p-1 stopped", audit_head="3:cd")
    return ApplyReport(**{**base, **kw})


def test_an_apply_report_s_text_line_by_line() -> None:
    assert _report().summary_text().splitlines() == [
        "plan p-1 stopped",
        "  1. [export] done: saved 2",
        "  2. [xdel_dlq] drift: entry gone",
        "backups: /b/p-1.jsonl",
        "audit log: /a/audit.log; head 3:cd",
    ]
    warned = _report(backup_file=None, approval_warning="the gate is not protected").summary_text().splitlines()
    assert warned[-2:] == ["audit log: /a/audit.log; head 3:cd", "WARNING: the gate is not protected"]
    assert not any(line.startswith("backups:") for line in warned)
    assert _report().audit_head == "3:cd" and _report(audit_head="").summary_text().endswith("; head ")
