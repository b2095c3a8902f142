"""A DELETE step (reconcile_outbox removing a succeeded job's outbox row) is bound to its database like an
UPDATE: the approve screen shows that database, and a plan edited to run it elsewhere is refused."""

from __future__ import annotations

import pytest

from server.config import load_settings
from server.errors import RemediationRefused
from tools.remediation.model import Check, Plan, SqlDeleteOp, Step
from tools.remediation.targets import check_targets, step_target, with_targets


def _settings():
    return load_settings(environ={}, overrides={
        "services": {"event": {"postgres": "postgresql://u:secret@db-event:5432/event"},
                     "user": {"postgres": "postgresql://u@db-user:5432/user"}},
        "redis": {"url": "redis://cache:6379/0"}})


def _delete_step(service: str = "event", checked: str = "event") -> Step:
    return Step(number=1, action="delete_outbox_row", description="d", command="DELETE ...",
                target=f"{service}.jobs_outbox", precondition="p", backup="every column",
                reversible=False, checks=[Check(kind="row_matches", args={"service": checked})],
                operation=SqlDeleteOp(service=service, table="jobs_outbox", expect_status="COMPLETED", ids=["x"]))


def test_a_delete_step_runs_on_its_services_database() -> None:
    where = step_target(_delete_step(), "default", _settings())
    assert where.startswith("PostgreSQL service 'event'") and "db-event" in where and "secret" not in where


def test_a_delete_step_whose_checks_name_another_service_is_refused() -> None:
    settings = _settings()
    [step] = with_targets([_delete_step(service="user", checked="event")], "default", settings)
    plan = Plan.model_construct(plan_id="p1", steps=[step], redis_instance="default")
    with pytest.raises(RemediationRefused, match="not the service and table it changes"):
        check_targets(plan, settings)
