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


def test_the_summary_shape_cuts_lists_and_texts_and_counts_each_cut() -> None:
    """``detail="summary"`` (:func:`tools.remediation.summary.summarise_plan`): at least 12 steps are shown
    (more when ``[limits] summary_items`` is higher), each description cut at 300 characters with an
    ellipsis, warnings and notes at ``summary_items``; every cut is counted under its own name, and the
    step commands (never shown in a summary) are counted too."""
    from tools.remediation.summary import summarise_plan

    long = "x" * 350
    steps = [Step(number=n, action="delete_stale_locks", description=long if n == 1 else f"step {n}", command="DEL k",
                  target=f"t{n}", precondition="p", backup="b", reversible=True, operation=DelOp(keys=["k"]))
             for n in range(1, 15)]
    plan = _plan(steps).model_copy(update={"warnings": [f"w{i}" for i in range(7)],
                                           "notes": [f"n{i}" for i in range(6)]})
    shown = summarise_plan(plan, 5)
    assert [s.number for s in shown.steps] == list(range(1, 13))
    assert shown.steps[0].description == "x" * 299 + "…" and shown.steps[1].description == "step 2"
    assert shown.warnings == ["w0", "w1", "w2", "w3", "w4"] and shown.notes == ["n0", "n1", "n2", "n3", "n4"]
    assert shown.omitted is not None and shown.omitted.counts == {
        "notes": 1, "step_commands": 12, "step_description_chars": 51, "steps": 2, "warnings": 2}
    assert [s.number for s in summarise_plan(plan, 13).steps] == list(range(1, 14))  # summary_items above 12
    blank = steps[2].model_copy(update={"description": ""})
    small = summarise_plan(_plan([*steps[:2], blank]), 5)
    assert [s.description for s in small.steps] == [long[:299] + "…", "step 2", ""] and small.related_skills == []
    assert small.omitted.counts == {"step_commands": 3, "step_description_chars": 51}
    empty = _plan([]).model_copy(update={"steps": []})
    assert summarise_plan(empty, 5).omitted is None  # nothing cut, nothing said
