"""The static map on the real shapes (issue 33): every claim backed by a resolved path.

On :mod:`tests.static.gather_fixture` (the feedback workspace with the gather overlay): a gather subclass is the
producer of *its* aggregation's events and websocket types only (the config entry its own ``super(...)``
argument chooses), a filter "any key of the mapping" receives only what reaches its stream, the ws-service's
job-outcome post-processor sends the websocket types of the feedback events the common success
post-processor writes for the jobs whose outcomes it reads, and what could only be guessed is a candidate.
The renamed twin (contents, files and folders) gives the same answers modulo the renaming.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from server.config import Conventions
from tests.static.gather_fixture import IDENTIFIERS, make_gather, make_twin, rename_path, rename_value
from tools.mesh_index.service import IndexService

GATHER = "ws-service/src/gather/gather.post-processor.ts"
GATHERED = "ws-service/src/post-processors/gathered.ws-post-processor.ts"
OUTCOME_WS = "ws-service/src/post-processors/job-outcome-success.ws-post-processor.ts"


def _line(ws: Path, rel: str, snippet: str, nth: int = 0) -> int:
    lines = (ws / rel).read_text(encoding="utf-8").splitlines()
    return [i for i, line in enumerate(lines, 1) if snippet in line][nth]


@pytest.fixture(scope="module")
def gw(tmp_path_factory) -> Iterator[IndexService]:
    root = tmp_path_factory.mktemp("gather")
    svc = IndexService(make_gather(root), Conventions(), root / "state")
    svc.refresh()
    yield svc
    svc.close()


@pytest.fixture(scope="module")
def twin(tmp_path_factory) -> Iterator[IndexService]:
    root = tmp_path_factory.mktemp("gather_twin")
    svc = IndexService(make_twin(root), Conventions(), root / "state")
    svc.refresh()
    yield svc
    svc.close()


def _at(sites) -> set[tuple[str, str, int, str | None, str | None]]:
    return {(s.kind, s.file, s.line, s.symbol, s.value) for s in sites}


def test_each_gather_subclass_writes_only_its_own_aggregation(gw: IndexService) -> None:
    ws = Path(gw.workspace)
    create_ok = _line(ws, GATHER, "this.eventQueueRepository.create(", 0)
    create_ko = _line(ws, GATHER, "this.eventQueueRepository.create(", 1)
    cases = {
        "social.feed_fanout_successfull": ("FeedFanoutGatherPostProcessor.process", create_ok),
        "social.feed_fanout_failed": ("FeedFanoutGatherPostProcessor.fail", create_ko),
        "social.deletion_completed": ("PostDeletionGatherPostProcessor.process", create_ok),
        "social.deletion_failed": ("PostDeletionGatherPostProcessor.fail", create_ko),
    }
    for value, (symbol, line) in cases.items():
        r = gw.analyze_impact(value)
        assert _at(r.producers) == {("repository_create", GATHER, line, symbol, value)}, value
        (site,) = r.producers
        sub = symbol.split(".")[0]
        assert f"super(...) of {sub}" in site.detail["binding"] and ".trigger" in site.detail["binding"]
        assert site.detail["config"].startswith("ws-service/config/default.json: scatterGather.aggregations.")
        assert site.detail["stream"] == "stream:social:gathered" and site.detail["emitter"] == "ws-service"
        # the only consumer is the one reading the stream it is written to; no "any key of the mapping" elsewhere
        assert {c.symbol for c in r.consumers} == {"GatheredWsPostProcessor"}, value
        assert not [c for c in r.candidates if c.kind == "repository_create"]
        assert not r.unresolved or all(u.kind != "repository_create" for u in r.unresolved)


def test_each_gather_subclass_sends_only_its_own_websocket_types(gw: IndexService) -> None:
    ws = Path(gw.workspace)
    send_ok = _line(ws, GATHER, "getWsEventForEvent(aggregation.successEvent)")
    send_ko = _line(ws, GATHER, "getWsEventForEvent(aggregation.failureEvent)")
    gathered = _line(ws, GATHERED, "notifyUser(")
    cases = {
        "ws.social.feed_fanout_successfull": ("FeedFanoutGatherPostProcessor.process", send_ok),
        "ws.social.feed_fanout_failed": ("FeedFanoutGatherPostProcessor.fail", send_ko),
        "ws.social.deletion_completed": ("PostDeletionGatherPostProcessor.process", send_ok),
        "ws.social.deletion_failed": ("PostDeletionGatherPostProcessor.fail", send_ko),
    }
    for value, (symbol, line) in cases.items():
        r = gw.analyze_impact(value)
        assert _at(r.producers) == {("ws_send", GATHER, line, symbol, value),
                                    ("ws_send", GATHERED, gathered, "GatheredWsPostProcessor.process", value)}, value
    # no send of the gather base class claims a type of another aggregation or of the fallback jobs
    for value in ("ws.order.fallback_place_order", "ws.billing.fallback_charge_card", "ws.order.placed"):
        r = gw.analyze_impact(value)
        assert not [p for p in [*r.producers, *r.candidates] if p.file == GATHER], value


def test_any_key_of_the_mapping_receives_only_what_reaches_its_stream(gw: IndexService) -> None:
    for value in ("order.placed", "order.fallback_place_order_feedback", "social.deletion_completed"):
        r = gw.analyze_impact(value)
        consumers = {c.symbol for c in r.consumers}
        if value != "order.fallback_place_order_feedback":
            assert "JobOutcomeSuccessWsPostProcessor" not in consumers, value
        if not value.startswith("social."):
            assert "GatheredWsPostProcessor" not in consumers, value
    # GatheredWsPostProcessor sends the mapping of what its stream carries: the four gather outcomes, nothing else
    sent = {v for (k, v), sites in gw.linked().producers.items()
            if k == "ws_event" and any(s.file == GATHERED for s in sites)}
    assert sent == {"ws.social.feed_fanout_successfull", "ws.social.feed_fanout_failed",
                    "ws.social.deletion_completed", "ws.social.deletion_failed"}


def test_a_fallback_jobs_websocket_type_names_the_job_outcome_send(gw: IndexService) -> None:
    ws = Path(gw.workspace)
    r = gw.analyze_impact("ws.order.fallback_place_order")
    assert _at(r.producers) == {("ws_send", OUTCOME_WS, _line(ws, OUTCOME_WS, "notifyUser("),
                                 "JobOutcomeSuccessWsPostProcessor.processEvents", "ws.order.fallback_place_order")}
    # the feedback event: written by the common success post-processor for the jobs whose outcomes it reads
    fb = gw.analyze_impact("order.fallback_place_order_feedback")
    (writer,) = fb.producers
    assert writer.symbol == "JobOutboxSuccessPostProcessor.process" and writer.detail["emitter"] == "ms-post-processors"
    assert writer.detail["stream"] == "stream:ws:jobs-outbox-success"
    assert "orders.fallback_place_order" in writer.detail["inputs"]
    assert {c.symbol for c in fb.consumers} == {"JobOutcomeSuccessWsPostProcessor"}
    chain = gw.analyze_impact("FALLBACK_PLACE_ORDER", depth=4)
    assert ("ws_event", "ws.order.fallback_place_order", "post-processor JobOutcomeSuccessWsPostProcessor") in {
        (f.kind, f.value, f.via) for f in chain.followups}


def test_guesses_are_candidates_with_a_reason(gw: IndexService) -> None:
    r = gw.analyze_impact("ws.social.deletion_failed")
    by_symbol = {c.symbol: c for c in r.candidates}
    # WsFeedbackPostProcessor reads a stream nothing writes anymore: "every value of the table" is only a guess
    assert "WsFeedbackPostProcessor.processEvents" in by_symbol
    assert "a candidate" in by_symbol["WsFeedbackPostProcessor.processEvents"].detail["reason"]
    assert not {c.symbol for c in r.candidates} & {p.symbol for p in r.producers}
    cat = {(e.kind, e.value): e for e in gw.catalogue().entries}
    assert cat[("ws_event", "ws.social.deletion_failed")].producers == 2
    billing = cat[("event", "billing.fallback_charge_card_feedback")]
    assert billing.producers == 0 and billing.reasons[0].startswith("no producer resolved (1 candidate(s)")


def _sites(sites, rename=lambda v: v, path=lambda p: p, sym=lambda s: s) -> list[tuple]:
    return sorted((s.kind, path(s.file), s.line, sym(s.symbol or ""), s.confidence, rename(s.value or ""))
                  for s in sites)


def _rename_symbol(symbol: str) -> str:
    return ".".join(IDENTIFIERS.get(p, p) for p in symbol.split("."))


def test_the_renamed_twin_gives_the_same_answers(gw: IndexService, twin: IndexService) -> None:
    values = [(e.kind, e.value) for e in gw.catalogue().entries if e.kind in ("job", "event", "ws_event")]
    assert len(values) >= 25
    for kind, value in values:
        a = gw.analyze_impact(value, depth=3)
        b = twin.analyze_impact(rename_value(value), depth=3)
        assert [rename_value(m.value) for m in a.matches if m.kind == kind] == [
            m.value for m in b.matches if m.kind == kind], value
        for field in ("producers", "consumers", "candidates"):
            assert _sites(getattr(a, field), rename_value, rename_path, _rename_symbol) == _sites(
                getattr(b, field)), (value, field)
        assert sorted((f.depth, f.kind, rename_value(f.value)) for f in a.followups) == sorted(
            (f.depth, f.kind, f.value) for f in b.followups), value


def test_each_gather_subclass_consumes_only_what_its_aggregation_expects(gw: IndexService) -> None:
    # the base class's filter is `aggregation.expects.includes(type)`: the expects[] of the subclass's own entry
    for value, sub in (("social.feed_shard_done", "FeedFanoutGatherPostProcessor"),
                       ("social.deletion_shard_done", "PostDeletionGatherPostProcessor")):
        r = gw.analyze_impact(value)
        assert {c.symbol for c in r.consumers} == {sub}, value
        assert r.consumers[0].detail["filter"] == "types" and r.consumers[0].detail["accepts"] == value


def test_verify_flow_follows_the_same_rule(gw: IndexService) -> None:
    from tools.verify.service import verify_flow

    def status(target: str) -> str:
        return next(c.status for c in verify_flow(gw, target).checks if c.id == "has_producer")

    # a guessed writer (every value of the job-to-event table) does not make a producer; a bound subclass does
    assert status("billing.fallback_charge_card_feedback") == "fail"
    assert status("social.feed_fanout_successfull") == "pass"
