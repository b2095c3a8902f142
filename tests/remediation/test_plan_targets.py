"""Issue 32, attack 5: the approve screen shows where each step runs, and the plan's hash binds it.

The attack: the plan file's SQL step pointed at another service (its target text left as it was,
the sha256 recomputed) was shown as the original and applied to the other database. Now every
step carries ``runs_on`` (the PostgreSQL service's database and host, or the Redis instance),
bound by the plan's sha256 and resolved again from the settings by ``mesh-mcp approve`` and by
the server before it applies: a retargeted step is refused, or, with ``runs_on`` rewritten as
well, shown as the other database.
"""

from __future__ import annotations

import io
from datetime import datetime

import pytest

from server.approval.tokens import mint_token
from server.errors import RemediationRefused
from tests.remediation.conftest import Poison, approve, settings_for
from tests.remediation.test_cli import _plan
from tests.remediation.test_negative import _apply
from tools.remediation import store
from tools.remediation.model import Plan, SqlUpdateOp
from tools.remediation.targets import postgres_endpoint

OTHER = "postgresql://postgres@127.0.0.1:5432/postgres"

pytestmark = pytest.mark.anyio


def _sql_step(plan: Plan) -> int:
    return next(i for i, s in enumerate(plan.steps) if isinstance(s.operation, SqlUpdateOp))


def _retarget(plan: Plan, service: str, runs_on: str | None = None) -> Plan:
    """The plan with its SQL step (operation, target text, checks) on ``service``, resealed."""
    index = _sql_step(plan)
    step = plan.steps[index]
    op = step.operation.model_copy(update={"service": service})
    checks = [c.model_copy(update={"args": {**c.args, "service": service}}) if "service" in c.args else c
              for c in step.checks]
    update = {"operation": op, "checks": checks, "target": f"{service}.{op.table}"}
    if runs_on is not None:
        update["runs_on"] = runs_on
    steps = list(plan.steps)
    steps[index] = step.model_copy(update=update)
    return plan.model_copy(update={"steps": steps}).sealed()


def _token(settings, plan: Plan) -> str:
    token, _ = mint_token(settings, plan_id=plan.plan_id, plan_sha256=plan.plan_sha256,
                          plan_expires_at=datetime.fromisoformat(plan.expires_at), approver="local:someone")
    return token


async def test_the_screen_shows_where_each_step_runs(tmp_path, outbox_db, redis_url, redis_client):
    settings = settings_for(tmp_path, outbox_db, redis_url, services={"event": {"postgres": outbox_db},
                                                                       "other": {"postgres": OTHER}})
    Poison(redis_client, outbox_db, settings)
    plan = await _plan(settings)
    db = outbox_db.rsplit("/", 1)[1]
    sql = plan.steps[_sql_step(plan)]
    assert sql.runs_on == f"PostgreSQL service 'event': database {db} at 127.0.0.1:5432"
    host_port_db = redis_url.split("://", 1)[1]
    redis_steps = [s for s in plan.steps if not isinstance(s.operation, SqlUpdateOp)]
    assert redis_steps and all(s.runs_on == f"Redis instance 'default' at redis://{host_port_db}" for s in redis_steps)
    out = io.StringIO()
    with pytest.raises(RemediationRefused):  # the code typed is wrong: only the screen is looked at
        from server.approval.cli import approve_plan

        approve_plan(settings, plan.plan_id, is_tty=True, ask=lambda p: "", ask_secret=lambda p: "", out=out)
    shown = out.getvalue()
    assert f"  runs on: PostgreSQL service 'event': database {db} at 127.0.0.1:5432" in shown
    assert shown.count(f"  runs on: Redis instance 'default' at redis://{host_port_db}") == len(redis_steps)


async def test_a_retargeted_plan_file_is_refused_or_shown_as_the_other_database(
        tmp_path, outbox_db, redis_url, redis_client):
    settings = settings_for(tmp_path, outbox_db, redis_url, services={"event": {"postgres": outbox_db},
                                                                       "other": {"postgres": OTHER}})
    Poison(redis_client, outbox_db, settings)
    plan = await _plan(settings)
    forged = _retarget(plan, "other")  # hash recomputed, the step's runs_on left as approved
    store.plan_path(settings, plan.plan_id).write_text(forged.model_dump_json())
    with pytest.raises(RemediationRefused, match=r"it says it runs on PostgreSQL service 'event'.* it would run on "
                                                 r"PostgreSQL service 'other': database postgres"):
        approve(settings, plan.plan_id)
    with pytest.raises(RemediationRefused, match="it says it runs on PostgreSQL service 'event'"):
        await _apply(settings, plan.plan_id, _token(settings, forged))  # a token for the forged hash: still refused

    shown_as = _retarget(plan, "other", runs_on=postgres_endpoint(settings, "other"))  # runs_on rewritten too
    store.plan_path(settings, plan.plan_id).write_text(shown_as.model_dump_json())
    out = io.StringIO()
    from server.approval.cli import approve_plan

    with pytest.raises(RemediationRefused, match="the code did not match"):
        approve_plan(settings, plan.plan_id, is_tty=True, ask=lambda p: "", ask_secret=lambda p: "", out=out)
    assert "  runs on: PostgreSQL service 'other': database postgres at 127.0.0.1:5432" in out.getvalue()
    assert "service 'event'" not in out.getvalue()

    lying_target = shown_as.model_copy(update={"steps": [
        s.model_copy(update={"target": "event.event_queue"}) if isinstance(s.operation, SqlUpdateOp) else s
        for s in shown_as.steps]}).sealed()  # the target text says the original service
    store.plan_path(settings, plan.plan_id).write_text(lying_target.model_dump_json())
    with pytest.raises(RemediationRefused, match=r"its target 'event.event_queue' or its checks"):
        approve(settings, plan.plan_id)


async def test_a_service_moved_after_approval_is_refused_at_apply(tmp_path, outbox_db, redis_url, redis_client):
    """The settings changed between approve and apply ([services.event] now names another database)."""
    settings = settings_for(tmp_path, outbox_db, redis_url)
    Poison(redis_client, outbox_db, settings)
    plan = await _plan(settings)
    token = approve(settings, plan.plan_id)
    moved = settings_for(tmp_path, OTHER, redis_url)
    with pytest.raises(RemediationRefused, match=r"with these settings it would run on PostgreSQL service 'event': "
                                                 r"database postgres"):
        await _apply(moved, plan.plan_id, token)
    elsewhere = settings_for(tmp_path, outbox_db, "redis://127.0.0.1:1/0")
    with pytest.raises(RemediationRefused, match=r"it would run on Redis instance 'default' at redis://127.0.0.1:1/0"):
        await _apply(elsewhere, plan.plan_id, token)
