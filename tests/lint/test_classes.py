"""Each finding class on tests/fixtures/lint_workspace: the true case is found with its evidence, the
near-miss beside it is not; plus precision on the other fixture workspaces."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from server.errors import InvalidArgument
from tests.helpers import FIXTURES
from tests.lint.conftest import copy_workspace
from tools.lint.engine import lint
from tools.lint.model import Finding, LintReport
from tools.lint.rules import CODES
from tools.mesh_index.service import IndexService


def of(report: LintReport, code: str) -> list[Finding]:
    return [f for f in report.findings if f.code == code]


def sites(finding: Finding) -> set[str]:
    return {f"{e.file}:{e.line}" for e in finding.evidence}


def test_consumer_never_matches_shows_the_near_misses(report: LintReport) -> None:
    [f] = of(report, "consumer-never-matches")
    assert f.severity == "error" and not f.heuristic
    assert f.file == "npm-packages/packages/post-processors/src/common/job-failed.post-processor.ts" and f.line == 5
    assert "endsWith(':job:outbox:failed')" in f.message and "stream:order:job:outbox:failed" in f.message
    assert "'order:job:outbox:failure'" in f.message
    near = [e for e in f.evidence if e.note.startswith("near-miss: 'order:job:outbox:failure'")]
    assert near and near[0].file == "ms-order/src/migrations/common/1710000000000-AuditTrigger.ts"
    # near-misses: the success post-processor and the order.placed one both get what is written onto their streams
    assert all("JobSucceeded" not in x.message and "OrderPlaced" not in x.message for x in report.findings
               if x.code == "consumer-never-matches")


def test_orphans_appear_once_as_info(report: LintReport) -> None:
    info = [f for f in report.findings if f.severity == "info"]
    assert {f.code for f in info} == {"type-never-consumed", "stream-without-group"} and len(info) == 2
    [events] = of(report, "type-never-consumed")
    notes = [e.note for e in events.evidence]
    archived = [e for e in events.evidence if "'order.archived'" in e.note]
    assert len(archived) == 1 and archived[0].file == "npm-packages/packages/messaging/src/events/order.events.ts"
    assert "'order.archived'" in events.message and events.message.startswith("3 event type(s)")
    [streams] = of(report, "stream-without-group")
    archived_stream = next(e for e in streams.evidence if "'stream:order:archived'" in e.note)
    assert archived_stream.file == "ms-order/src/order.service.ts"
    every = [e.note for f in info for e in f.evidence]
    assert len(every) == len(set(every))  # each orphan once
    # explained by the consumer-never-matches finding (its stream, its near-miss type): not repeated
    assert not [n for n in every if "order:job:outbox:fail" in n]
    # near-miss: order.placed is consumed, so it is no orphan at all
    assert not [n for n in notes if "order.placed" in n]


def test_worker_on_a_queue_its_module_does_not_register(report: LintReport) -> None:
    [f] = of(report, "worker-queue-not-registered")
    assert f.file == "workers-runners/worker-order/src/workers/audit.worker.ts" and f.line == 8
    assert "audit-queue" in f.message and "'order-queue', 'spare-queue'" in f.message
    assert "workers-runners/worker-order/src/app.module.ts:10" in sites(f)
    assert "OrderWorker" not in f.message  # near-miss: order-queue is registered
    [unread] = of(report, "registered-queue-unread")
    assert unread.subject == "queue:spare-queue" and unread.severity == "warning"
    assert not [x for x in report.findings if x.subject == "queue:order-queue"]


def test_payload_read_at_the_envelope_level_behind_casts(report: LintReport) -> None:
    [f] = of(report, "payload-wrong-level")
    assert f.file == "workers-runners/worker-order/src/workers/handlers/refund-order.handler.ts"
    assert f.line == 13 and "amount, orderId" in f.message and "hidden behind a cast" in f.message
    assert {f"{f.file}:13", f"{f.file}:14"} <= sites(f)
    assert "job.data.payload" in f.fix
    # near-miss: ShipOrderHandler reads job.data.payload.orderId and job.data.emitter (an envelope field)


def test_diverging_and_missing_copies_of_shared_migrations(report: LintReport) -> None:
    [f] = of(report, "migration-diverges")
    assert f.subject == "migration:AuditTrigger1710000000000"
    assert f.file == "ms-stock/src/migrations/common/1710000000000-AuditTrigger.ts"
    assert "drop trigger if exists job_audit_deleted" in f.message
    assert {"ms-order/src/migrations/common/1710000000000-AuditTrigger.ts:3", f"{f.file}:4"} <= sites(f)
    # near-miss: the CreateOutbox copies differ only by the repository's own name
    assert not [x for x in report.findings if "CreateOutbox" in x.subject]
    [m] = of(report, "migration-missing")
    assert m.subject == "migrations:ms-billing/src/migrations/common" and "AuditTrigger1710000000000" in m.message
    # near-miss: AddStockTable lives in ms-stock only, nobody lacks it
    assert "AddStockTable" not in m.message


def test_options_silently_dropped(report: LintReport) -> None:
    [f] = of(report, "option-dropped")
    assert f.file == "post-processors-runner/src/options.ts" and f.line == 12
    assert "'maxRetry' (did you mean 'maxRetries'?)" in f.message and "PostProcessorOptions" in f.message
    assert "post-processors-runner/src/app.module.ts:15" in sites(f)
    assert "npm-packages/packages/post-processors/src/core/base.post-processor.ts:7" in sites(f)
    # near-miss: jobOutcomeOptionsProvider sets maxRetries, declared through RetryOptions; the inline
    # options of new JobFailedPostProcessor(...) (constructor inherited from BasePostProcessor) are all declared
    [k] = of(report, "config-key-unread")
    assert k.heuristic and k.subject == "config:post-processors-runner/config/default.json:postProcessor.batchSise"
    assert (k.file, k.line) == ("post-processors-runner/config/default.json", 7)
    assert "redis" not in k.subject  # near-miss: redis is handed over whole


def test_status_precondition_is_heuristic(report: LintReport) -> None:
    [f] = of(report, "status-precondition")
    assert f.heuristic and f.severity == "warning"
    assert f.file == "npm-packages/packages/post-processors/src/common/job-failed.post-processor.ts"
    assert f.line == 14 and "UPDATE jobs_outbox" in f.message and "'PENDING'" in f.message
    # near-misses: the outbox runner's own claim, and the success post-processor's WHERE status = 'FAILED'


def test_contract_member_newer_than_the_pin(report: LintReport) -> None:
    [f] = of(report, "contract-newer-than-pin")
    assert f.heuristic and f.file == "ms-order/src/order.service.ts" and f.line == 26
    assert "OrderJobType.REFUND_ORDER" in f.message and "1.3.0" in f.message
    assert "pins @acme/messaging 1.2.0" in f.message
    assert {"npm-packages/packages/messaging/CHANGELOG.md:3", "ms-order/package-lock.json:8"} <= sites(f)
    # near-miss: SHIP_ORDER was added in 1.0.0 (and only "fixed" in 1.2.0)
    assert "SHIP_ORDER" not in f.message


def test_every_class_is_found_and_the_default_hides_info(workspace: Path,
                                                         make_index: Callable[[Path], IndexService]) -> None:
    index = make_index(workspace)
    report = lint(index)
    assert report.min_severity == "warning" and all(f.severity != "info" for f in report.findings)
    assert report.summary.below_min_severity > 0
    assert set(report.summary.by_code) == set(CODES) - {"type-never-consumed", "stream-without-group",
                                                        "catalogue-orphan"}
    only = lint(index, codes=["option-dropped"], min_severity="info")
    assert [f.code for f in only.findings] == ["option-dropped"] and only.codes == ["option-dropped"]
    with pytest.raises(InvalidArgument, match=r"unknown lint code.*no-such-code.*known codes: consumer-never-matches"):
        lint(index, codes=["no-such-code"])
    with pytest.raises(InvalidArgument, match="min_severity must be one of info, warning, error"):
        lint(index, min_severity="fatal")


def test_findings_are_deterministic_and_sorted(workspace: Path, tmp_path: Path,
                                               make_index: Callable[[Path], IndexService]) -> None:
    first = lint(make_index(workspace), min_severity="info")
    again = lint(make_index(copy_workspace(workspace, tmp_path / "again")), min_severity="info")
    dump = [f.model_dump() for f in first.findings]
    assert dump == [f.model_dump() for f in again.findings]
    assert first.findings == sorted(first.findings, key=Finding.sort_key)
    ranks = [{"error": 0, "warning": 1, "info": 2}[f.severity] for f in first.findings]
    assert ranks == sorted(ranks)
    assert len({f.fingerprint for f in first.findings}) == len(first.findings)


def test_a_renamed_copy_gives_the_same_findings(workspace: Path, make_index: Callable[[Path], IndexService]) -> None:
    before = {(f.code, f.file) for f in lint(make_index(workspace), min_severity="info").findings}
    handler = workspace / "workers-runners/worker-order/src/workers/handlers/refund-order.handler.ts"
    handler.write_text(handler.read_text().replace("RefundOrderHandler", "MoneyBackHandler"))
    for path in (workspace / "workers-runners/worker-order/src/workers/order.worker.ts",
                 workspace / "workers-runners/worker-order/src/app.module.ts"):
        path.write_text(path.read_text().replace("RefundOrderHandler", "MoneyBackHandler"))
    after = lint(make_index(workspace), min_severity="info")
    assert {(f.code, f.file) for f in after.findings} == before
    assert "MoneyBackHandler" in next(f for f in after.findings if f.code == "payload-wrong-level").message


PP = "npm-packages/packages/post-processors/src/common/"
SHOP = "workers-runners/worker-shop/src/workers/"


@pytest.mark.parametrize(("name", "expected"), [
    ("realistic_workspace", {("consumer-never-matches", PP + "job-outbox-failed.post-processor.ts"),
                             ("migration-missing", "ms-post/src/migrations/common/"
                                                   "1700000000000-CreateOutboxTables.ts")}),
    ("verify_workspace", {("payload-wrong-level", SHOP + "handlers/restock-item.handler.ts"),
                          ("worker-queue-not-registered", SHOP + "alarm.worker.ts"),
                          ("worker-queue-not-registered", SHOP + "billing.worker.ts")}),
    ("workspace", {("option-dropped",
                    "post-processors-runner/post-processor-event/src/post-processors/options/event-created.options.ts")}),
])
def test_precision_on_the_other_fixtures(name: str, expected: set[tuple[str, str]], tmp_path: Path,
                                         make_index: Callable[[Path], IndexService]) -> None:
    report = lint(make_index(copy_workspace(FIXTURES / name, tmp_path / name)))
    assert {(f.code, f.file) for f in report.findings} == expected
