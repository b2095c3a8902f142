"""Fixtures of the plan_flow tests: private copies of the plan workspace and their real index."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import helpers
from tests.helpers import FIXTURES
from tools.plan_flow.edits import Edit, apply_edits
from tools.plan_flow.model import FlowPlan

PLAN_WORKSPACE = FIXTURES / "plan_workspace"


def copy_workspace(target: Path) -> Path:
    return helpers.copy_workspace(PLAN_WORKSPACE, target)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    return copy_workspace(tmp_path / "ws")



def apply_plan(ws: Path, plan: FlowPlan) -> list[str]:
    """Apply every insert/replace/create step mechanically at its anchor; returns the files touched."""
    by_file: dict[str, list[Edit]] = {}
    created: dict[str, str] = {}
    for phase in plan.phases:
        for step in phase.steps:
            if step.mode == "create":
                assert step.file is not None and not (ws / step.file).exists(), step.file
                created[step.file] = step.snippet
            elif step.mode in ("insert", "replace"):
                assert step.file is not None and step.line is not None
                lines = (ws / step.file).read_text().splitlines()
                assert lines[step.line - 1].strip() == step.anchor, (step.file, step.line, step.anchor)
                by_file.setdefault(step.file, []).append(
                    Edit(step.mode, step.line, step.end_line or step.line, step.anchor or "", step.snippet)
                )
    for file, edits in by_file.items():
        path = ws / file
        path.write_text(apply_edits(path.read_text(), edits))
    for file, text in created.items():
        (ws / file).parent.mkdir(parents=True, exist_ok=True)
        (ws / file).write_text(text if text.endswith("\n") else text + "\n")
    return sorted([*by_file, *created])
