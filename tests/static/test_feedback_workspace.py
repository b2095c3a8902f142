"""The static map on ``tests/fixtures/feedback_workspace`` (issue 11): events and websocket messages.

The fixture is a chain in the shapes of the real code: a fallback job written by a command
controller's ``withFallback`` -> its queue -> worker and handler -> the audit trigger's outcome event
-> the common success post-processor writing ``getEventForJob(jobType)`` to the feedback stream ->
a ws-service post-processor sending ``getWsEventForEvent(event.type)`` through a notification
service. Around it: websocket sends of each shape (``notifyUser``, ``broadcastExcept``,
``gateway.server.to(room).emit``), two post-processors whose filter is "any type a mapping table
knows" (one on the job-outcome stream, one whose stream the index cannot know), an aggregator
writing the event types of its JSON config with a repository ``create()``, and a worker carrying a
copy of ms-order's migrations that only its test set-up runs. The renamed twin
(:mod:`tests.static.twin`) must give the same answers.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from server.config import Conventions
from tests.helpers import in_process_client
from tests.static.twin import FIXTURE, IDENTIFIERS, make_twin, rename_text, rename_value
from tools.mesh_index.service import IndexService

WS = "ws-service/src/post-processors"
PPR = "post-processors-runner/src/post-processors"
AGG = "ms-billing/src/aggregation/aggregation.service.ts"


def at(rel: str, snippet: str) -> str:
    lines = (FIXTURE / rel).read_text(encoding="utf-8").splitlines()
    found = [i for i, line in enumerate(lines, 1) if snippet in line]
    assert found, f"{snippet!r} not in {rel}"
    return f"{rel}:{found[0]}"


def where(sites) -> set[tuple[str, str, str | None]]:
    return {(s.kind, f"{s.file}:{s.line}", s.value) for s in sites}


def _service(ws: Path, state: Path) -> IndexService:
    svc = IndexService(ws, Conventions(), state)
    svc.refresh()
    return svc


@pytest.fixture(scope="module")
def fw(tmp_path_factory) -> Iterator[IndexService]:
    root = tmp_path_factory.mktemp("feedback")
    ws = root / "ws"
    shutil.copytree(FIXTURE, ws, ignore=shutil.ignore_patterns(".mesh"))
    svc = _service(ws, root / "state")
    yield svc
    svc.close()


@pytest.fixture(scope="module")
def twin(tmp_path_factory) -> Iterator[IndexService]:
    root = tmp_path_factory.mktemp("twin")
    svc = _service(make_twin(root), root / "state")
    yield svc
    svc.close()


# -- 1. websocket messages have producers ---------------------------------------------------------------


def test_each_shape_of_websocket_send_is_a_producer_in_the_sending_class(fw: IndexService) -> None:
    cases = {
        "ws.order.placed": ("ws_send", at(f"{WS}/order-placed.ws-post-processor.ts", ".emit(OrderWsType"),
                            "OrderPlacedWsPostProcessor.process", "emit", "exact"),
        "ws.order.shipped": ("ws_send", at(f"{WS}/order-shipped.ws-post-processor.ts", "broadcastExcept("),
                             "OrderShippedWsPostProcessor.process", "broadcastExcept", "exact"),
        "ws.billing.payments_aggregated": (
            "ws_send", at(f"{WS}/payments.ws-post-processor.ts", "notifyUser("),
            "PaymentsWsPostProcessor.process", "notifyUser", "exact"),
    }
    for value, (kind, loc, symbol, call, conf) in cases.items():
        r = fw.analyze_impact(value)
        assert [(m.kind, m.value) for m in r.matches] == [("ws_event", value)]
        assert [(p.kind, f"{p.file}:{p.line}", p.symbol, p.detail["call"], p.confidence) for p in r.producers] == [
            (kind, loc, symbol, call, conf)], value
    # the notification service's own emit(type, payload) forwards its parameter: plumbing, not a producer
    idx = fw.linked()
    assert not [s for sites in idx.producers.values() for s in sites if "notification.service" in s.file]
    assert not [s for sites in idx.unresolved.values() for s in sites if "notification.service" in s.file]


def test_a_type_read_through_a_mapping_is_sent_for_what_the_consumer_receives(fw: IndexService) -> None:
    feedback = at(f"{WS}/ws-feedback.post-processor.ts", "notifyUser(")
    retry = at(f"{WS}/booking-retry.ws-post-processor.ts", "notifyUser(")
    notifier = at("ws-service/src/notifications/feedback.notifier.ts", "notifyUser(")
    r = fw.analyze_impact("ws.order.fallback_place_order")
    sites = {f"{p.file}:{p.line}": p for p in r.producers}
    # BookingRetryWsPostProcessor reads the table with a key from configuration: only for the one event its
    # filter accepts (order.fallback_place_order_feedback), not every value of the table
    assert set(sites) == {feedback, retry}
    site = sites[feedback]
    assert (site.kind, site.symbol, site.confidence, site.detail["via"]) == (
        "ws_send", "WsFeedbackPostProcessor.processEvents", "heuristic", "EVENT_TO_WS_EVENT_MAPPING")
    # the billing fallback job's outcome goes to a stream no post-processor reads (no ms-billing outcome stream is
    # read), so its feedback event is never written and the websocket message never sent: FeedbackNotifier.forward
    # (getWsEventForEvent(event.type) for ChargeRetryWsPostProcessor) receives nothing the table maps; it is only
    # a candidate (issue 33: "every value of the table" is not a claim)
    charge = fw.analyze_impact("ws.billing.fallback_charge_card")
    assert charge.producers == []
    assert {f"{c.file}:{c.line}" for c in charge.candidates} == {notifier}
    assert "any of its values, a candidate" in charge.candidates[0].detail["reason"]
    feedback_event = fw.analyze_impact("billing.fallback_charge_card_feedback")
    assert feedback_event.producers == [] and "never reach JobOutboxSuccessPostProcessor" in next(
        c.detail["reason"] for c in feedback_event.candidates if c.kind == "create_event")
    # order.placed maps to ws.order.placed too, but never reaches the feedback stream this consumer reads
    placed = fw.analyze_impact("ws.order.placed")
    assert {f"{p.file}:{p.line}" for p in placed.producers} & {feedback, retry, notifier} == set()


# -- 2. a mapping table is not a producer ---------------------------------------------------------------


def test_mapping_entries_are_not_producers(fw: IndexService) -> None:
    idx = fw.linked()
    kinds = {s.kind for sites in idx.producers.values() for s in sites}
    assert "mapping" not in kinds
    assert {"ws_send", "create_event", "repository_create", "sql_trigger", "fallback", "create_job"} <= kinds
    assert {m.name for m in idx.mappings} == {"JOB_TO_EVENT_MAPPING", "EVENT_TO_WS_EVENT_MAPPING"}


# -- 3. event types of a JSON config, written by a repository create() --------------------------------------


def test_config_event_types_written_by_a_repository_create(fw: IndexService) -> None:
    site = at(AGG, "this.eventQueueRepository.create({")
    for value, key in (("billing.payments_aggregated", "successEvent"),
                       ("billing.payments_aggregation_failed", "failureEvent")):
        r = fw.analyze_impact(value)
        assert where(r.producers) == {("repository_create", site, value)}
        p = r.producers[0]
        assert (p.symbol, p.confidence, p.detail["emitter"], p.detail["stream"]) == (
            "AggregationService.complete", "heuristic", "ms-billing", "stream:billing:payments")
        assert p.detail["config"] == f"ms-billing/config/default.json: aggregator.aggregations.0.{key}"
    r = fw.analyze_impact("billing.payments_aggregated")
    assert {c.detail["post_processor_class"] for c in r.consumers} == {"PaymentsWsPostProcessor"}
    # UserRepository.create({ type, id }) builds no event row: neither a producer nor unresolved
    idx = fw.linked()
    assert not [s for sites in idx.producers.values() for s in sites if s.file.endswith("user.repository.ts")]
    assert not [s for sites in idx.unresolved.values() for s in sites if s.file.endswith("user.repository.ts")]


# -- 4. a consumer reads the stream the event travels on ---------------------------------------------------


def test_consumers_need_the_stream_and_the_filter(fw: IndexService) -> None:
    r = fw.analyze_impact("order.placed")
    by_class = {c.detail["post_processor_class"]: c for c in r.consumers}
    # FeedbackAuditPostProcessor (job-outcome stream) and WsFeedbackPostProcessor (feedback stream) accept the
    # type ("any type the table knows") but order.placed only travels on stream:order:placed
    assert set(by_class) == {"OrderPlacedWsPostProcessor"}
    assert by_class["OrderPlacedWsPostProcessor"].confidence == "exact"
    # its filter accepts the type but the stream it reads is unknown: a candidate, not a consumer (issue 33)
    (legacy,) = [c for c in r.candidates if c.detail.get("post_processor_class") == "LegacyFeedbackPostProcessor"]
    assert legacy.confidence == "heuristic"
    assert "stream it reads is unknown" in legacy.detail["reason"]
    assert {(x.kind, x.name) for x in r.routes} == {("stream", "stream:order:placed")}
    outcome = fw.analyze_impact("order:job:outbox:success")
    assert {c.detail["post_processor_class"] for c in outcome.consumers} == {"JobOutboxSuccessPostProcessor"}


# -- 6. test-only copies of migrations ------------------------------------------------------------------------


def test_a_migration_copy_only_test_setup_runs_is_a_test_only_producer(fw: IndexService) -> None:
    r = fw.analyze_impact("order.placed")
    assert [(p.kind, p.repo, p.test_only) for p in r.producers] == [("sql_trigger", "ms-order", False)]
    assert any("1 producer site(s) exist only in tests" in n for n in r.notes)
    r = fw.analyze_impact("order.placed", include_tests=True)
    copy = next(p for p in r.producers if p.test_only)
    assert copy.file == "workers-runners/worker-order/src/database/migrations/1750000000000-AddOrderPlacedTrigger.ts"
    assert "a copy of ms-order/src/migrations/domain/1750000000000-AddOrderPlacedTrigger.ts" in copy.detail["reason"]
    assert "workers-runners/worker-order/test/global-setup.ts" in copy.detail["reason"]
    entry = next(e for e in fw.catalogue(kind="event").entries if e.value == "order.placed")
    assert (entry.producers, entry.test_producers) == (1, 1)


# -- the whole chain -------------------------------------------------------------------------------------------


def test_fallback_job_to_the_websocket_message_at_depth_4(fw: IndexService) -> None:
    r = fw.analyze_impact("orders.fallback_place_order", depth=4)
    assert where(r.producers) == {
        ("fallback", at("ms-order/src/modules/order/controllers/commands/order.command.controller.ts",
                        "this.withFallback("), "orders.fallback_place_order")}
    assert {(x.kind, x.name, x.consumers) for x in r.routes} == {("queue", "fallback-order-queue", 1)}
    assert {(c.kind, c.symbol) for c in r.consumers} == {
        ("handler", "FallbackPlaceOrderHandler"), ("worker", "FallbackOrderWorker")}
    chain = [(f.depth, f.from_value, f.kind, f.value, f.via, f.site.symbol) for f in r.followups]
    assert chain == [
        (1, "orders.fallback_place_order", "event", "order:job:outbox:success",
         "audit trigger notify_job_audit_status_change on status COMPLETED", "notify_job_audit_status_change"),
        (2, "order:job:outbox:success", "event", "order.fallback_place_order_feedback",
         "post-processor JobOutboxSuccessPostProcessor", "JobOutboxSuccessPostProcessor.process"),
        (3, "order.fallback_place_order_feedback", "ws_event", "ws.order.fallback_place_order",
         "post-processor BookingRetryWsPostProcessor", "BookingRetryWsPostProcessor.process"),
        (3, "order.fallback_place_order_feedback", "ws_event", "ws.order.fallback_place_order",
         "post-processor WsFeedbackPostProcessor", "WsFeedbackPostProcessor.processEvents"),
    ]
    assert {f.site.kind for f in r.followups if f.depth == 3} == {"ws_send"}
    assert r.followups[0].site.repo == "ms-order"  # the production trigger, not the worker's test copy


@pytest.mark.anyio
async def test_the_chain_through_a_real_mcp_session(make_settings) -> None:
    async with in_process_client(make_settings(workspace=str(FIXTURE))) as client:
        result = await client.call_tool("analyze_impact",
            {"detail": "full", "target": "FALLBACK_PLACE_ORDER", "depth": 4})
    assert not result.is_error
    data = result.structured_content
    ws = {(f["kind"], f["value"], f["site"]["kind"], f["site"]["symbol"]) for f in data["followups"] if f["depth"] == 3}
    assert ("ws_event", "ws.order.fallback_place_order", "ws_send", "WsFeedbackPostProcessor.processEvents") in ws
    assert "WsFeedbackPostProcessor" in result.content[0].text


# -- 5. kinds by use: the renamed twin gives the same answers ------------------------------------------------


def _sites(sites, rename=lambda v: v) -> list[tuple]:
    return sorted((s.kind, s.file, s.line, s.symbol, s.confidence, s.test_only, rename(s.value or ""),
                   s.detail.get("post_processor_class", "")) for s in sites)


def test_renamed_twin_has_the_same_producers_consumers_and_chains(fw: IndexService, twin: IndexService) -> None:
    values = [(e.kind, e.value) for e in fw.catalogue().entries if e.producers or e.consumers or e.test_producers]
    assert len(values) >= 20
    for kind, value in values:
        a = fw.analyze_impact(value, depth=4, include_tests=True)
        b = twin.analyze_impact(rename_value(value), depth=4, include_tests=True)
        assert [(m.kind, rename_value(m.value)) for m in a.matches if m.kind == kind] == [
            (m.kind, m.value) for m in b.matches if m.kind == kind], value
        assert _sites(a.producers, rename_value) == _sites(b.producers), value
        assert _sites(a.consumers, rename_value) == _sites(b.consumers), value
        assert sorted((f.depth, f.kind, rename_value(f.value), rename_text(f.via)) for f in a.followups) == sorted(
            (f.depth, f.kind, f.value, f.via) for f in b.followups), value
    def counts(svc: IndexService, rename=lambda v: v) -> list[tuple]:
        return sorted((e.kind, rename(e.value), e.producers, e.consumers, e.test_producers, e.orphan)
                      for e in svc.catalogue().entries if e.kind in ("job", "event", "ws_event"))
    assert counts(fw, rename_value) == counts(twin)
    # nothing of the twin is named like a convention hint, yet its merged objects resolve member by member
    idx = twin.linked()
    assert "JobMessagingType" not in idx.by_qual and "JobMessagingType" in IDENTIFIERS
    assert idx.by_qual["AllTasks.RETRY_BOOKING"] == ("job", "p.t1")
    assert idx.by_qual["AllPings.RETRY_BOOKING"] == ("ws_event", "push-3")
    assert not idx.unresolved.get("job")  # the fallback call resolves through the renamed merged object
    # an enum only the job registry interface keys is a job by that use
    assert idx.by_qual["ArchiveTaskKind.DUMP_PLANS"] == ("job", "p.t3")
    entry = next(e for e in twin.catalogue(kind="job").entries if e.value == "p.t3")
    assert entry.reasons == ["no producer", "no handler"]


def test_own_migrations_a_test_also_runs_are_not_a_copy(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    shutil.copytree(FIXTURE, ws, ignore=shutil.ignore_patterns(".mesh"))
    (ws / "ms-order/src/data-source.ts").unlink()  # nothing names ms-order's migrations: the original stays
    solo = ws / "ms-solo"
    (solo / "src/migrations").mkdir(parents=True)
    (solo / "test").mkdir()
    (solo / "package.json").write_text('{ "name": "ms-solo", "private": true }\n')
    (solo / "src/migrations/1760000000000-AddSoloTrigger.ts").write_text(
        "export class AddSoloTrigger1760000000000 {\n"
        "  public async up(queryRunner: any): Promise<void> {\n"
        "    await queryRunner.query(`CREATE TRIGGER solo_t AFTER INSERT ON solos FOR EACH ROW "
        "EXECUTE FUNCTION create_event_queue_record('order.placed','ms-solo');`);\n"
        "  }\n}\n")
    (solo / "test/global-setup.ts").write_text("export const migrations = ['../src/migrations/*.ts'];\n")
    svc = _service(ws, tmp_path / "state")
    try:
        r = svc.analyze_impact("order.placed", include_tests=True)
        assert sorted((p.repo, p.test_only) for p in r.producers) == [
            ("ms-order", False), ("ms-solo", False), ("workers-runners", True)]
    finally:
        svc.close()
