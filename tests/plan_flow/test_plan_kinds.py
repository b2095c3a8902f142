"""plan_flow chooses siblings by kind (issue 33): in a domain whose last enum member is a fallback job, a new
ordinary job goes beside the ordinary jobs (their member, queue, worker, handler folder) and a new fallback job
beside the fallbacks. Fallback jobs are known by use (written by the fallback helper), not by name."""

from __future__ import annotations

import shutil

import pytest

from tests.helpers import FIXTURES
from tools.mesh_index.service import IndexService
from tools.plan_flow.service import plan_flow

JOBS = "npm-packages/packages/messaging/src/jobs/order/order.jobs.ts"
WORKERS = "workers-runners/worker-order/src/workers"


@pytest.fixture(scope="module")
def index(tmp_path_factory) -> IndexService:
    from server.config import Conventions

    root = tmp_path_factory.mktemp("kinds")
    ws = root / "ws"
    shutil.copytree(FIXTURES / "feedback_workspace", ws, ignore=shutil.ignore_patterns(".mesh"))
    jobs = ws / JOBS  # the fallback job declared last, its handler in a handlers/fallback/ folder
    text = jobs.read_text()
    fb, ship = "  FALLBACK_PLACE_ORDER = 'orders.fallback_place_order',\n", "  SHIP_ORDER = 'orders.ship_order',\n"
    jobs.write_text(text.replace(fb + ship, ship + fb))
    (ws / WORKERS / "handlers/fallback").mkdir()
    shutil.move(ws / WORKERS / "handlers/fallback-place-order.handler.ts",
                ws / WORKERS / "handlers/fallback/fallback-place-order.handler.ts")
    worker = ws / WORKERS / "fallback-order.worker.ts"
    old, new = "./handlers/fallback-place-order", "./handlers/fallback/fallback-place-order"
    worker.write_text(worker.read_text().replace(old, new))
    svc = IndexService(ws, Conventions(), cache_dir=root / "state")
    svc.refresh()
    yield svc
    svc.close()


def _steps(plan, action: str) -> list:
    return [s for p in plan.phases for s in p.steps if s.action == action]


def test_an_ordinary_job_goes_beside_the_ordinary_jobs(index: IndexService) -> None:
    plan = plan_flow(index, "job", "REFUND_ORDER", "order")
    (member,) = _steps(plan, "add_member")
    assert member.file == JOBS and member.anchor == "SHIP_ORDER = 'orders.ship_order',"
    (handler,) = _steps(plan, "create_handler")
    assert handler.file == f"{WORKERS}/handlers/refund-order.handler.ts"
    assert {s.file for s in _steps(plan, "route_in_worker")} == {f"{WORKERS}/order.worker.ts"}
    assert "OrderQueue.ORDERS" in _steps(plan, "emit")[0].snippet


def test_a_fallback_job_goes_beside_the_fallbacks(index: IndexService) -> None:
    plan = plan_flow(index, "job", "FALLBACK_REFUND_ORDER", "order")
    (member,) = _steps(plan, "add_member")
    assert member.anchor == "FALLBACK_PLACE_ORDER = 'orders.fallback_place_order',"
    (handler,) = _steps(plan, "create_handler")
    assert handler.file == f"{WORKERS}/handlers/fallback/fallback-refund-order.handler.ts"
    assert {s.file for s in _steps(plan, "route_in_worker")} == {f"{WORKERS}/fallback-order.worker.ts"}
