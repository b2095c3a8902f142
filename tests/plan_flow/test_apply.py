"""Applying a plan's snippets at their anchors makes verify_flow pass the checks the plan lists."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.plan_flow.conftest import apply_plan
from tools.mesh_index.service import IndexService
from tools.plan_flow.service import plan_flow
from tools.verify.model import EVENT_CHECKS, JOB_CHECKS
from tools.verify.service import verify_flow

CASES = [
    ("job", "REFUND_ORDER", "shop", {}),
    ("job", "RENEW_MEMBERSHIP", "member", {}),
    ("job", "ARCHIVE_REPORT", "report", {}),
    ("job", "ZIP_REPORT", "report", {"queue": "EXPORTS"}),
    ("job", "PURGE_REPORT", "report", {"queue": "PURGES"}),
    ("job", "WRITE_TRAIL", "audit", {}),
    ("event", "ORDER_SHIPPED", "shop", {}),
    ("event", "STOCK_CRITICAL", "stock", {}),
]


@pytest.mark.parametrize(("kind", "name", "domain", "extra"), CASES)
def test_applied_plan_passes_verify(
    kind: str, name: str, domain: str, extra: dict, workspace: Path, make_index: Callable[[Path], IndexService]
) -> None:
    plan = plan_flow(make_index(workspace), kind, name, domain, **extra)
    expected = [c for c in (JOB_CHECKS if kind == "job" else EVENT_CHECKS) if c not in plan.not_covered]
    assert plan.checks == expected
    # only a SQL trigger's computed stream is left to verify after the fact
    assert set(plan.not_covered) <= {"stream_has_consumer", "consumer_accepts_type"}
    touched = apply_plan(workspace, plan)
    assert touched
    report = verify_flow(make_index(workspace), name)
    status = {c.id: c.status for c in report.checks}
    assert report.target.value == plan.value
    assert {c: status[c] for c in plan.checks} == dict.fromkeys(plan.checks, "pass"), report.summary_text()
