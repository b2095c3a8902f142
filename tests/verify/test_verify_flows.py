"""verify_flow on the fixture workspace through the real static index.

Each broken fixture flow fails exactly its check; the good flows pass every check; a
dynamic producer target gives ``unknown``. Editing a copy of the workspace flips checks,
which shows they read the code and not a recorded answer.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from server.config import Conventions
from server.errors import InvalidArgument, NotFound
from tests.helpers import REPO_ROOT
from tools.mesh_index.service import IndexService
from tools.verify.model import EVENT_CHECKS, JOB_CHECKS
from tools.verify.service import failing_checks_by_type, verify_all, verify_flow

BROKEN_JOBS = {
    "REFUND_ORDER": "queue_matches_target",
    "PRINT_LABEL": "provided_in_module",
    "RESTOCK_ITEM": "reads_envelope",
    "ARCHIVE_ORDER": "returns_original_payload",
    "NOTIFY_CARRIER": "producer_uses_outbox",
    "AUDIT_STOCK": "in_registry",
    "RAISE_ALARM": "typed_errors",
    "SEED_CATALOGUE": "has_producer",
    "BillingJobType.ISSUE_INVOICE": "merged",
}


def statuses(report) -> dict[str, str]:
    return {c.id: c.status for c in report.checks}


def test_good_job_passes_every_check(index: IndexService) -> None:
    report = verify_flow(index, "SHIP_ORDER")
    assert report.target.kind == "job" and report.target.value == "shop.ship_order"
    assert report.target.name == "ShopJobType.SHIP_ORDER" and "JobMessagingType.SHIP_ORDER" in report.target.aliases
    assert [c.id for c in report.checks] == list(JOB_CHECKS)
    assert set(statuses(report).values()) == {"pass"}
    assert report.summary.model_dump() == {"passed": 13, "failed": 0, "unknown": 0, "total": 13, "verdict": "ok"}
    for check in report.checks:
        assert check.evidence, f"{check.id} passed without evidence"
        assert check.hint is None


@pytest.mark.parametrize(("target", "check_id"), sorted(BROKEN_JOBS.items()))
def test_each_broken_job_fails_exactly_its_check(index: IndexService, target: str, check_id: str) -> None:
    report = verify_flow(index, target)
    assert report.failing == [check_id]
    failed = report.check(check_id)
    assert failed is not None and failed.hint and failed.evidence
    assert all(ev.line >= 1 and (index.workspace / ev.file).is_file() for ev in failed.evidence)
    others = {k: v for k, v in statuses(report).items() if k != check_id}
    allowed_unknown = {"producer_uses_outbox"} if check_id == "has_producer" else set()
    assert {k for k, v in others.items() if v != "pass"} <= allowed_unknown


def test_dynamic_target_is_unknown_never_a_pass(index: IndexService) -> None:
    report = verify_flow(index, "JobMessagingType.PRICE_UPDATE")
    st = statuses(report)
    assert st["queue_matches_target"] == "unknown" and st["queue_declared"] == "unknown"
    assert report.failing == [] and report.summary.verdict == "incomplete"
    check = report.check("queue_matches_target")
    assert "this.queueFor(...)" in check.detail
    assert check.evidence[0].file == "ms-shop/src/modules/pricing/pricing.service.ts"


def test_evidence_points_at_the_faulty_lines(index: IndexService) -> None:
    envelope = verify_flow(index, "RESTOCK_ITEM").check("reads_envelope")
    assert [(e.file.rsplit("/", 1)[-1], e.line) for e in envelope.evidence] == [("restock-item.handler.ts", 17)]
    assert "job.data.sku" in envelope.evidence[0].note

    returns = verify_flow(index, "ARCHIVE_ORDER").check("returns_original_payload")
    assert [e.line for e in returns.evidence] == [17, 20]

    queue = verify_flow(index, "REFUND_ORDER").check("queue_matches_target")
    notes = {(e.file.rsplit("/", 1)[-1], e.line): e.note for e in queue.evidence}
    assert notes[("refund.service.ts", 14)] == "target 'returns-queue'"
    assert notes[("shop.worker.ts", 19)] == "worker on 'shop-queue'"
    assert "'shop-queue'" in queue.hint

    errors = verify_flow(index, "RAISE_ALARM").check("typed_errors")
    assert [(e.file.rsplit("/", 1)[-1], e.line) for e in errors.evidence] == [("alarm.worker.ts", 23)]

    direct = verify_flow(index, "NOTIFY_CARRIER")
    assert direct.check("producer_uses_outbox").evidence[0].line == 12
    # the queue of the direct push is read from @InjectQueue(ShopQueue.SHOP): it matches the worker
    assert direct.check("queue_matches_target").status == "pass"

    module = verify_flow(index, "PRINT_LABEL").check("provided_in_module")
    assert "workers-runners/worker-shop/src/app.module.ts" in module.hint
    registry = verify_flow(index, "AUDIT_STOCK").check("in_registry")
    assert "[JobMessagingType.AUDIT_STOCK]" in registry.hint


def test_events(index: IndexService) -> None:
    placed = verify_flow(index, "shop.order.placed")
    assert [c.id for c in placed.checks] == list(EVENT_CHECKS)
    assert set(statuses(placed).values()) == {"pass"}

    cancelled = verify_flow(index, "ShopEventType.ORDER_CANCELLED")
    assert cancelled.failing == ["consumer_accepts_type"]
    check = cancelled.check("consumer_accepts_type")
    assert "OrderNotificationPostProcessor" in check.detail and "shop.order.placed" in check.detail
    assert statuses(cancelled)["producer_in_transaction"] == "pass"

    trigger = verify_flow(index, "STOCK_LOW")
    assert set(statuses(trigger).values()) == {"pass"}
    assert trigger.check("has_producer").evidence[0].note.startswith("sql_trigger producer")


def test_verify_all_and_catalogue_helpers(index: IndexService) -> None:
    report = verify_all(index)
    by_name = {f.target.name.split(".")[-1]: f for f in report.flows}
    assert len(report.flows) == 14
    for target, check_id in BROKEN_JOBS.items():
        assert by_name[target.split(".")[-1]].failing == [check_id]
    assert by_name["SHIP_ORDER"].summary.verdict == "ok"
    assert by_name["ORDER_CANCELLED"].failing == ["consumer_accepts_type"]
    assert report.failed_flows == len(BROKEN_JOBS) + 1 and report.unknown_flows == 1

    table = failing_checks_by_type(index)
    assert table[("job", "shop.refund_order")] == ["queue_matches_target"]
    assert table[("job", "shop.ship_order")] == []
    assert table[("job", "shop.print_label")] == ["provided_in_module"]
    assert table[("event", "shop.order.placed")] == []


def test_target_errors(index: IndexService) -> None:
    with pytest.raises(NotFound, match="SHIP_ORDER"):
        verify_flow(index, "SHIP_ORDR")
    with pytest.raises(InvalidArgument, match="not a job or event type"):
        verify_flow(index, "ShopQueue.RETURNS")
    with pytest.raises(InvalidArgument, match="empty"):
        verify_flow(index, "  ")
    with pytest.raises(InvalidArgument, match="longer than"):
        verify_flow(index, "x" * 400)


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new), encoding="utf-8")


def test_ambiguous_member_name(workspace: Path, index: IndexService) -> None:
    _edit(
        workspace / "npm-packages/packages/messaging/src/events/shop/events.ts",
        "STOCK_LOW = 'shop.stock.low',",
        "STOCK_LOW = 'shop.stock.low',\n  SHIP_ORDER = 'shop.order.shipped',",
    )
    index.refresh()
    with pytest.raises(InvalidArgument, match="ambiguous") as exc:
        verify_flow(index, "SHIP_ORDER")
    assert "shop.ship_order" in str(exc.value) and "shop.order.shipped" in str(exc.value)
    assert verify_flow(index, "shop.ship_order").summary.verdict == "ok"


def test_fixing_the_code_flips_the_checks(workspace: Path, index: IndexService) -> None:
    before = failing_checks_by_type(index)
    assert before[("job", "shop.print_label")] == ["provided_in_module"]
    worker = workspace / "workers-runners/worker-shop"
    module = worker / "src/app.module.ts"
    _edit(module, "  SeedCatalogueHandler,\n];", "  SeedCatalogueHandler,\n  PrintLabelHandler,\n];")
    _edit(
        worker / "src/app.module.ts",
        "import { PriceUpdateHandler }",
        "import { PrintLabelHandler } from './workers/handlers/print-label.handler.js';\nimport { PriceUpdateHandler }",
    )
    _edit(worker / "src/workers/handlers/restock-item.handler.ts", "job.data.sku", "job.data.payload.sku")
    _edit(worker / "src/workers/alarm.worker.ts", "throw new Error(", "throw new InternalServerError(")
    refund = workspace / "ms-shop/src/modules/refund/refund.service.ts"
    _edit(refund, "target: ShopQueue.RETURNS", "target: ShopQueue.SHOP")
    index.refresh()
    for target in ("PRINT_LABEL", "RESTOCK_ITEM", "RAISE_ALARM", "REFUND_ORDER"):
        assert verify_flow(index, target).summary.verdict == "ok", target
    after = failing_checks_by_type(index)
    for value in ("shop.print_label", "shop.restock_item", "shop.raise_alarm", "shop.refund_order"):
        assert after[("job", value)] == [], value
    assert after[("job", "shop.archive_order")] == ["returns_original_payload"]


def test_breaking_good_flows(workspace: Path, index: IndexService) -> None:
    handler = workspace / "workers-runners/worker-shop/src/workers/handlers/ship-order.handler.ts"
    _edit(handler, "return { originalPayload: job.data.payload };", "return { originalPayload: job.data };")
    order = workspace / "ms-shop/src/modules/order/order.service.ts"
    # the cancellation event is now created after the commit
    _edit(order, "      await queryRunner.commitTransaction();\n", "")
    commit_first = "    try {\n      await queryRunner.commitTransaction();\n      const event"
    _edit(order, "    try {\n      const event", commit_first)
    index.refresh()
    ship = verify_flow(index, "SHIP_ORDER")
    assert ship.failing == ["returns_original_payload"]
    assert "wrong value" in ship.check("returns_original_payload").evidence[0].note
    cancelled = verify_flow(index, "ORDER_CANCELLED")
    assert cancelled.failing == ["producer_in_transaction", "consumer_accepts_type"]
    assert "after the transaction commits" in cancelled.check("producer_in_transaction").detail


def test_removed_consumer_and_unrouted_handler(workspace: Path, index: IndexService) -> None:
    (workspace / "post-processors-runner/src/post-processors/stock-low.post-processor.ts").unlink()
    worker = workspace / "workers-runners/worker-shop/src/workers/shop.worker.ts"
    _edit(worker, "    @Inject(PriceUpdateHandler) priceUpdate: PriceUpdateHandler,\n", "")
    _edit(worker, "      priceUpdate,\n", "")
    index.refresh()
    stock = verify_flow(index, "STOCK_LOW")
    assert stock.failing == ["stream_has_consumer"]
    assert statuses(stock)["consumer_accepts_type"] == "unknown"
    price = verify_flow(index, "PRICE_UPDATE")
    assert price.failing == ["handler_routed"]
    assert "PriceUpdateHandler" in price.check("handler_routed").detail
    assert statuses(price)["typed_errors"] == "unknown"
    assert statuses(price)["provided_in_module"] == "pass"


@pytest.mark.parametrize("name", ["tests/fixtures/workspace", "resources/sample_workspace"])
def test_other_workspaces_give_well_formed_reports(name: str, tmp_path: Path) -> None:
    """verify --all over the static index's fixture and the demo's sample workspace (other code shapes)."""
    source = REPO_ROOT / name
    if not source.is_dir():
        pytest.skip(f"{name} is not in this checkout")
    copy = tmp_path / "ws"
    shutil.copytree(source, copy, ignore=shutil.ignore_patterns(".mesh"))
    index = IndexService(copy, Conventions(), cache_dir=tmp_path / "cache")
    try:
        report = verify_all(index)
    finally:
        index.close()
    assert report.flows
    for flow in report.flows:
        expected = JOB_CHECKS if flow.target.kind == "job" else EVENT_CHECKS
        assert tuple(c.id for c in flow.checks) == expected
        for check in flow.checks:
            assert check.detail
            if check.status == "fail":
                assert check.hint, (flow.target.name, check.id)
            for ev in check.evidence:
                assert (copy / ev.file).is_file() and ev.line >= 1, (flow.target.name, check.id, ev)


def test_run_time_job_types_make_a_missing_producer_unknown(workspace: Path, index: IndexService) -> None:
    pricing = workspace / "ms-shop/src/modules/pricing/pricing.service.ts"
    dynamic = """
  async replay(kind: string, userId: string): Promise<void> {
    await this.dataSource.transaction(async (manager) => {
      const job = JobsOutboxEntity.createJob({
        type: this.typeFor(kind),
        emitter: 'ms-shop',
        emitterId: userId,
        scheduledAt: new Date(),
        target: QUEUE,
        payload: {},
      });
      await new JobsOutboxRepository(manager.getRepository(JobsOutboxModel)).create(job);
    });
  }

  private typeFor(kind: string): string {
    return process.env[kind] ?? '';
  }
}
"""
    text = pricing.read_text(encoding="utf-8").rstrip()
    assert text.endswith("}")
    pricing.write_text(text[:-1] + dynamic.replace("QUEUE", "ShopQueue.ALARMS"), encoding="utf-8")
    index.refresh()
    # a run-time type pushed to alarms-queue cannot be SEED_CATALOGUE's producer (its worker is on shop-queue)
    assert verify_flow(index, "SEED_CATALOGUE").failing == ["has_producer"]

    pricing.write_text(text[:-1] + dynamic.replace("QUEUE", "ShopQueue.SHOP"), encoding="utf-8")
    index.refresh()
    seed = verify_flow(index, "SEED_CATALOGUE")
    check = seed.check("has_producer")
    assert check.status == "unknown" and seed.failing == []
    assert "only test code produces it" in check.detail and "compute their type at run time" in check.detail
    assert any(e.file.endswith("pricing.service.ts") for e in check.evidence)


def test_an_add_call_that_may_not_be_a_queue_push(workspace: Path, index: IndexService) -> None:
    """`x.add(JobType.X)` is a direct push only on a BullMQ queue: a Set is none, an unknown receiver is unknown."""
    seen = workspace / "ms-shop/src/modules/order/seen.ts"
    source = """import { JobMessagingType } from '@acme/messaging';

export class SeenJobs {
  private readonly seen = new Set<string>();
  constructor(private readonly bus: Bus) {}

  remember(): void {
    RECEIVER.add(JobMessagingType.SHIP_ORDER);
  }
}
"""
    seen.write_text(source.replace("RECEIVER", "this.seen"), encoding="utf-8")
    index.refresh()
    assert verify_flow(index, "SHIP_ORDER").summary.verdict == "ok"

    seen.write_text(source.replace("RECEIVER", "this.bus"), encoding="utf-8")
    index.refresh()
    report = verify_flow(index, "SHIP_ORDER")
    check = report.check("producer_uses_outbox")
    assert check.status == "unknown" and report.failing == []
    assert "this.bus.add(...)" in check.detail and check.evidence[0].file.endswith("seen.ts")
    # the unconfirmed call has no known target: the queue checks judge the real producer only
    assert statuses(report)["queue_matches_target"] == "pass"


def test_a_handler_that_can_end_without_returning(workspace: Path, index: IndexService) -> None:
    handler = workspace / "workers-runners/worker-shop/src/workers/handlers/ship-order.handler.ts"
    text = handler.read_text(encoding="utf-8")
    good = "    return { originalPayload: job.data.payload };\n"
    handler.write_text(text.replace(good, f"    if (orderId) {{\n  {good}    }}\n"), encoding="utf-8")
    index.refresh()
    check = verify_flow(index, "SHIP_ORDER").check("returns_original_payload")
    assert check.status == "fail" and "returns nothing" in check.detail

    handler.write_text(text.replace(good, "    throw new InternalServerError('not yet', 'TODO');\n"), encoding="utf-8")
    index.refresh()
    check = verify_flow(index, "SHIP_ORDER").check("returns_original_payload")
    assert check.status == "unknown" and "never returns" in check.detail
