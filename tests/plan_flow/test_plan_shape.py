"""What a plan names: the domain's own files (by resolution), conventions, queues, the stop, clashes."""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from server.errors import InvalidArgument, NotFound
from tests.plan_flow.conftest import PLAN_WORKSPACE
from tools.mesh_index.service import IndexService
from tools.plan_flow.model import FlowPlan
from tools.plan_flow.service import plan_flow

Index = Callable[[Path], IndexService]


def steps(plan: FlowPlan, action: str) -> list:
    return [s for p in plan.phases for s in p.steps if s.action == action]


def test_phase_order_and_publish_stop(workspace: Path, make_index: Index) -> None:
    plan = plan_flow(make_index(workspace), "job", "REFUND_ORDER", "shop")
    names = [p.name for p in plan.phases]
    assert names == ["contracts", "publish", "producers", "workers", "verify"]
    publish = plan.phases[1]
    assert publish.stop and all(not p.stop for p in plan.phases if p is not publish)
    cmd = publish.steps[0]
    assert cmd.action == "publish_contracts" and cmd.mode == "run"
    # read from the workspace's tooling: packageManager yarn@4, changesets config, the root scripts
    assert cmd.snippet.splitlines()[:4] == [
        "cd npm-packages",
        "yarn build && yarn test",
        "yarn changeset add",
        "yarn changeset version",
    ]
    assert "@acme/messaging" in cmd.snippet and "3.4.0" in cmd.why and "yarn@4.5.0" in cmd.why
    bumps = {s.file: s.snippet for s in steps(plan, "bump_dependency")}
    assert bumps == {
        "ms-shop/package.json": "cd ms-shop && yarn up @acme/messaging@<snapshot version>",
        "workers-runners/worker-shop/package.json": (
            "cd workers-runners/worker-shop && yarn up @acme/messaging@<snapshot version>"
        ),
    }
    assert plan.phases[-1].steps[0].snippet == "mesh-mcp verify REFUND_ORDER"


def test_two_folder_conventions(workspace: Path, make_index: Index) -> None:
    index = make_index(workspace)
    shop = plan_flow(index, "job", "REFUND_ORDER", "shop")
    member = plan_flow(index, "job", "RENEW_MEMBERSHIP", "member")
    assert (
        steps(shop, "create_handler")[0].file
        == "workers-runners/worker-shop/src/workers/handlers/refund-order.handler.ts"
    )
    assert (
        steps(member, "create_handler")[0].file
        == "workers-runners/worker-member/src/handlers/renew-membership.handler.ts"
    )
    assert "from './interfaces/job-handler.interface.js'" in steps(member, "create_handler")[0].snippet
    assert {s.file for s in steps(member, "route_in_worker")} == {
        "workers-runners/worker-member/src/workers/member.worker.ts"
    }
    assert {s.file for s in steps(member, "provide_in_module")} == {"workers-runners/worker-member/src/app.module.ts"}
    # each domain's own value convention: prefix and separator of its enum
    assert shop.value == "shop.refund_order"
    assert member.value == "member:renew-membership"
    assert steps(member, "add_member")[0].snippet.strip() == "RENEW_MEMBERSHIP: 'member:renew-membership',"
    assert steps(member, "add_member")[0].file.endswith("jobs/member/member.jobs.ts")
    assert (
        steps(member, "add_payload_interface")[0]
        .snippet.strip()
        .startswith("export interface IRenewMembershipJobPayload")
    )
    # a list on one line gets the new element on that line
    single = [s for s in steps(member, "route_in_worker") if s.mode == "replace"]
    assert single and "[digest, close, renewMembership]" in single[0].snippet
    handler = steps(shop, "create_handler")[0].snippet
    assert "return { originalPayload: job.data.payload };" in handler
    assert "const payload = job.data.payload;" in handler and "orderId" not in handler


def test_domain_with_two_queues(workspace: Path, make_index: Index) -> None:
    index = make_index(workspace)
    default = plan_flow(index, "job", "ARCHIVE_REPORT", "report")
    exports = plan_flow(index, "job", "ZIP_REPORT", "report", queue="EXPORTS")
    new = plan_flow(index, "job", "PURGE_REPORT", "report", queue="PURGES")
    assert default.queue == "report-queue" and exports.queue == "report-export-queue"
    assert {s.file for s in steps(default, "route_in_worker")} == {
        "workers-runners/worker-report/src/workers/report.worker.ts"
    }
    assert {s.file for s in steps(exports, "route_in_worker")} == {
        "workers-runners/worker-report/src/workers/report-export.worker.ts"
    }
    assert "target: ReportQueue.EXPORTS," in steps(exports, "emit")[0].snippet
    # a new queue: add_queue in the contracts, a new worker for it (one worker per queue), provided
    assert steps(new, "add_queue")[0].snippet.strip() == "PURGES = 'report-purges-queue',"
    worker = steps(new, "route_in_worker")
    assert len(worker) == 1 and worker[0].mode == "create"
    assert "@Processor(ReportQueue.PURGES)" in worker[0].snippet
    assert "ExportReport" not in worker[0].snippet and "PurgeReportHandler" in worker[0].snippet
    made = re.search(r"export class (\w+)", worker[0].snippet).group(1)
    assert made != "ReportWorker" and any(made in s.snippet for s in steps(new, "provide_in_module"))
    assert "target: ReportQueue.PURGES," in steps(new, "emit")[0].snippet


def test_domain_without_siblings_falls_back_named(workspace: Path, make_index: Index) -> None:
    plan = plan_flow(make_index(workspace), "job", "WRITE_TRAIL", "audit")
    assert plan.fallback_domain is not None
    member = steps(plan, "add_member")[0]
    assert member.why.startswith(
        f"no sibling in domain 'audit' (no convention there): follows closest domain '{plan.fallback_domain}'"
    )
    assert any("declares no job type" in n for n in plan.notes)
    assert plan.value.startswith("audit")


def test_event_plan(workspace: Path, make_index: Index) -> None:
    plan = plan_flow(make_index(workspace), "event", "ORDER_SHIPPED", "shop")
    assert plan.value == "shop.order.shipped"
    assert [p.name for p in plan.phases] == ["contracts", "publish", "producers", "consumers", "verify"]
    consume = steps(plan, "consume")[0]
    assert consume.file == "post-processors-runner/src/post-processors/notification.post-processor.ts"
    assert consume.snippet.strip() == "ShopEventType.ORDER_SHIPPED,"
    assert (
        "createEvent" in steps(plan, "emit")[0].snippet
        and "ShopEventType.ORDER_SHIPPED" in steps(plan, "emit")[0].snippet
    )


def test_clashes_refused_with_the_existing_site(workspace: Path, make_index: Index) -> None:
    index = make_index(workspace)
    with pytest.raises(
        InvalidArgument,
        match=r"MemberJobType.SEND_DIGEST already exists \(npm-packages/packages/"
        r"messaging/src/jobs/member/member.jobs.ts:2",
    ):
        plan_flow(index, "job", "SEND_DIGEST", "member")
    with pytest.raises(InvalidArgument, match=r"ShopJobType.SHIP_ORDER already exists .*payloads.ts:2"):
        plan_flow(index, "job", "SHIP_ORDER", "report")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("task", "X_Y", "shop"), "kind must be 'job' or 'event'"),
        (("job", "syncCalendar", "shop"), "UPPER_SNAKE_CASE"),
        (("job", "X_Y", "shop/../x"), "domain must be"),
        (("event", "X_Y", "shop", "SHOP"), "queue applies to jobs only"),
        (("job", "X_Y", "shop", "no-such-queue"), "not a declared queue"),
    ],
)
def test_bad_arguments(args: tuple, message: str, workspace: Path, make_index: Index) -> None:
    with pytest.raises(InvalidArgument, match=re.escape(message)):
        plan_flow(make_index(workspace), *args)


def test_unknown_emitter(workspace: Path, make_index: Index) -> None:
    with pytest.raises(NotFound, match="no production createJob of domain 'shop' in 'ms-nowhere'"):
        plan_flow(make_index(workspace), "job", "X_Y", "shop", emitter="ms-nowhere")


def test_plan_writes_nothing(workspace: Path, make_index: Index) -> None:
    before = {p: p.stat().st_mtime_ns for p in workspace.rglob("*") if p.is_file() and ".mesh" not in p.parts}
    plan_flow(make_index(workspace), "job", "PURGE_REPORT", "report", queue="PURGES")
    after = {p: p.stat().st_mtime_ns for p in workspace.rglob("*") if p.is_file() and ".mesh" not in p.parts}
    assert before == after


RENAMES = [  # a renamed copy: other folders, file names, repository names; same code
    ("workers-runners/worker-member/src/handlers", "workers-runners/worker-member/src/jobs-in"),
    ("workers-runners/worker-shop", "runners/shop-jobs"),
    (
        "npm-packages/packages/messaging/src/jobs/member/member.jobs.ts",
        "npm-packages/packages/messaging/src/jobs/member/types.ts",
    ),
    ("ms-member", "svc-members"),
]


def _renamed_copy(target: Path) -> Path:
    shutil.copytree(PLAN_WORKSPACE, target)
    for old, new in RENAMES:
        (target / new).parent.mkdir(parents=True, exist_ok=True)
        shutil.move(target / old, target / new)
    for path in target.rglob("*.ts"):
        text = path.read_text()
        if "worker-member" in path.parts:
            text = text.replace("../handlers/", "../jobs-in/").replace("./handlers/", "./jobs-in/")
            text = text.replace("from './jobs-in/", "from './jobs-in/")
        text = text.replace("member/member.jobs.js", "member/types.js")
        path.write_text(text)
    return target


def _undo(text: str | None) -> str | None:
    if text is None:
        return None
    return (
        text.replace("jobs-in/", "handlers/")
        .replace("member/types.ts", "member/member.jobs.ts")
        .replace("member/types.js", "member/member.jobs.js")
        .replace("svc-members", "ms-member")
        .replace("runners/shop-jobs", "workers-runners/worker-shop")
    )


def _shape(plan: FlowPlan) -> list[tuple]:
    return [
        (phase.name, s.action, s.mode, s.line, _undo(s.file), _undo(s.anchor), _undo(s.snippet))
        for phase in plan.phases
        for s in phase.steps
    ]


@pytest.mark.parametrize(
    ("name", "domain", "extra"),
    [("RENEW_MEMBERSHIP", "member", {}), ("REFUND_ORDER", "shop", {}), ("PURGE_REPORT", "report", {"queue": "PURGES"})],
)
def test_renamed_twin_gives_the_same_plan(
    name: str, domain: str, extra: dict, tmp_path: Path, workspace: Path, make_index: Index
) -> None:
    twin = _renamed_copy(tmp_path / "twin")
    a = plan_flow(make_index(workspace), "job", name, domain, **extra)
    b = plan_flow(make_index(twin), "job", name, domain, **extra)
    assert _shape(a) == _shape(b)
    assert a.checks == b.checks and a.value == b.value
    files_b = {s.file for p in b.phases for s in p.steps if s.file}
    if domain == "member":
        assert "workers-runners/worker-member/src/jobs-in/renew-membership.handler.ts" in files_b
        assert "npm-packages/packages/messaging/src/jobs/member/types.ts" in files_b
        assert "svc-members/src/members/member.service.ts" in files_b
    if domain == "shop":
        assert "runners/shop-jobs/src/workers/shop.worker.ts" in files_b


def test_event_written_by_a_sql_trigger(workspace: Path, make_index: Index) -> None:
    plan = plan_flow(make_index(workspace), "event", "STOCK_CRITICAL", "stock")
    trigger = steps(plan, "add_migration_trigger")
    assert [s.file for s in trigger] == ["ms-shop/src/migrations/domain/1700000000001-StockCriticalTrigger.ts"]
    assert "create_event_queue_record('stock.critical', 'ms-shop')" in trigger[0].snippet
    assert "class StockCriticalTrigger1700000000001" in trigger[0].snippet
    assert "1700000000000-StockLowTrigger.ts:6" in trigger[0].why
    # the stream a trigger reaches is computed in SQL: the plan does not promise the consumer checks
    assert plan.checks == ["declared", "has_producer", "producer_in_transaction"]
    assert set(plan.not_covered) == {"stream_has_consumer", "consumer_accepts_type"}
    consume = steps(plan, "consume")[0]
    assert (
        consume.snippet.strip() == "return type === StockEventType.STOCK_LOW || type === StockEventType.STOCK_CRITICAL;"
    )
