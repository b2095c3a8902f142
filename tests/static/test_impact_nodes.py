"""analyze_impact on any node (issue 33): a class (what it consumes, what it emits), a config key, a stream;
``direction`` = downstream|upstream|both; ``limit`` / ``offset`` paging on every list; through a real MCP
session too (unknown arguments still refused)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from server.config import Conventions
from server.errors import InvalidArgument
from tests.helpers import in_process_client
from tests.static.gather_fixture import make_gather
from tools.mesh_index.model import NodeMatch
from tools.mesh_index.node_targets import NODE_KINDS, NodeHit, register_node_kind
from tools.mesh_index.service import IndexService

OUTCOME_WS = "ws-service/src/post-processors/job-outcome-success.ws-post-processor.ts"


@pytest.fixture(scope="module")
def gw(tmp_path_factory) -> Iterator[IndexService]:
    root = tmp_path_factory.mktemp("nodes")
    svc = IndexService(make_gather(root), Conventions(), root / "state")
    svc.refresh()
    yield svc
    svc.close()


def test_a_post_processor_class_says_what_it_consumes_and_emits(gw: IndexService) -> None:
    r = gw.analyze_impact("JobOutcomeSuccessWsPostProcessor", direction="both", depth=2)
    assert [(n.kind, n.name, n.role, n.file) for n in r.nodes] == [
        ("class", "JobOutcomeSuccessWsPostProcessor", "post_processor", OUTCOME_WS)]
    assert r.matches == [] and r.suggestions == []
    assert {(c.kind, c.value) for c in r.consumers} == {("post_processor", "order.fallback_place_order_feedback")}
    assert {(p.kind, p.value) for p in r.producers} == {("ws_send", "ws.order.fallback_place_order")}
    assert {(x.kind, x.name) for x in r.routes} == {("stream", "stream:ws:jobs-outbox-success")}
    up = {(f.depth, f.from_value, f.value, f.site.symbol) for f in r.upstream}
    assert (1, "order:job:outbox:success", "order.fallback_place_order_feedback",
            "JobOutboxSuccessPostProcessor.process") in up
    assert (2, "orders.fallback_place_order", "order:job:outbox:success", "notify_job_audit_status_change") in up
    assert "JobOutcomeSuccessWsPostProcessor" in r.summary_text() and "upstream (" in r.summary_text()


def test_a_gather_subclass_a_controller_and_a_config_key(gw: IndexService) -> None:
    r = gw.analyze_impact("PostDeletionGatherPostProcessor")
    assert {p.value for p in r.producers} == {"social.deletion_completed", "social.deletion_failed",
                                               "ws.social.deletion_completed", "ws.social.deletion_failed"}
    assert ("ws_event", "ws.social.deletion_completed") in {(f.kind, f.value) for f in r.followups}
    ctl = gw.analyze_impact("OrderCommandController", depth=2)
    assert [(p.kind, p.value) for p in ctl.producers] == [("fallback", "orders.fallback_place_order")]
    assert ctl.consumers == [] and ctl.upstream == []  # downstream only by default
    assert "order:job:outbox:success" in {f.value for f in ctl.followups}
    cfg = gw.analyze_impact("scatterGather.aggregations")
    assert cfg.nodes[0].kind == "config_key" and cfg.nodes[0].file == "ws-service/config/default.json"
    assert {p.symbol.split(".")[0] for p in cfg.producers} == {"FeedFanoutGatherPostProcessor",
                                                                "PostDeletionGatherPostProcessor"}
    assert gw.analyze_impact("successEvent").nodes[0].kind == "config_key"


def test_upstream_of_a_value_and_of_a_stream(gw: IndexService) -> None:
    r = gw.analyze_impact("ws.order.fallback_place_order", direction="upstream", depth=3)
    assert r.followups == []
    chain = {(f.depth, f.from_value, f.value) for f in r.upstream}
    assert {(1, "order.fallback_place_order_feedback", "ws.order.fallback_place_order"),
            (2, "order:job:outbox:success", "order.fallback_place_order_feedback"),
            (3, "orders.fallback_place_order", "order:job:outbox:success")} <= chain
    s = gw.analyze_impact("stream:social:gathered", direction="upstream")
    assert {f.site.symbol for f in s.upstream} >= {"FeedFanoutGatherPostProcessor.process",
                                                   "PostDeletionGatherPostProcessor.fail"}


def test_paging_cuts_every_list_and_keeps_the_totals(gw: IndexService) -> None:
    whole = gw.analyze_impact("scatterGather.aggregations", depth=2)
    first = gw.analyze_impact("scatterGather.aggregations", depth=2, limit=3)
    second = gw.analyze_impact("scatterGather.aggregations", depth=2, limit=3, offset=3)
    assert first.totals["producers"] == len(whole.producers) == 8
    assert first.producers == whole.producers[:3] and second.producers == whole.producers[3:6]
    assert first.followups == whole.followups[:3] and (first.limit, second.offset) == (3, 3)
    assert any("page offset=0 limit=3" in n for n in first.notes)
    for bad in ({"direction": "sideways"}, {"limit": 0}, {"limit": 501}, {"offset": -1}):
        with pytest.raises(InvalidArgument):
            gw.analyze_impact("GatherPostProcessor", **bad)


def test_another_target_kind_plugs_in(gw: IndexService) -> None:
    def routes(engine, target: str) -> list[NodeHit]:
        if target != "POST /orders":
            return []
        sites = [s for s in engine.idx.producers[("job", "orders.fallback_place_order")]]
        return [NodeHit(NodeMatch(kind="http_route", name=target, role="route"), [], sites)]

    register_node_kind("http_route", routes)
    try:
        r = gw.analyze_impact("POST /orders")
        assert [n.kind for n in r.nodes] == ["http_route"]
        assert [p.value for p in r.producers] == ["orders.fallback_place_order"]
    finally:
        NODE_KINDS.pop("http_route")


@pytest.mark.anyio
async def test_direction_and_paging_through_mcp(make_settings, tmp_path) -> None:
    ws = make_gather(tmp_path)
    async with in_process_client(make_settings(workspace=str(ws))) as client:
        r = await client.call_tool("analyze_impact", {"target": "FeedFanoutGatherPostProcessor", "direction": "both",
                                                      "limit": 1, "detail": "full"})
        summary = await client.call_tool("analyze_impact", {"target": "FeedFanoutGatherPostProcessor",
                                                            "direction": "upstream"})
        bad = await client.call_tool("analyze_impact", {"target": "X", "directions": "both"})
        worse = await client.call_tool("analyze_impact", {"target": "X", "direction": "sideways"})
    assert not r.is_error
    data = r.structured_content
    assert data["nodes"][0]["name"] == "FeedFanoutGatherPostProcessor" and len(data["producers"]) == 1
    assert data["totals"]["producers"] == 4 and data["direction"] == "both"
    assert summary.structured_content["nodes"] and summary.structured_content["upstream"]
    assert bad.is_error and "'directions'" in bad.content[0].text
    assert worse.is_error and "direction" in worse.content[0].text
