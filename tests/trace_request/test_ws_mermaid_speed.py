"""trace_request: the websocket messages of the final consumers (static index), the Mermaid picture read
by the real Mermaid parser, the lookups served by the indexes doctor recommends, the batched round trips."""

from __future__ import annotations

import shutil
from pathlib import Path

import anyio
import psycopg
import pytest

from server.config import Conventions
from server.runtime import Runtime
from tests.flow_map.mermaid_parser import edges, parse_ok, vertices
from tests.helpers import FIXTURES, in_process_client
from tests.trace_request import saga as sg
from tools.mesh_index.service import IndexService
from tools.outbox.indexes import recommended_indexes
from tools.outbox.mcp_tools import catalog_of
from tools.outbox.schema_discovery import TABLE_KINDS
from tools.trace_request.explain import explain_query, lookup_queries, scans
from tools.trace_request.indexes import recommended
from tools.trace_request.model import RequestReport
from tools.trace_request.service import trace_request

pytestmark = pytest.mark.anyio

SITE = "ws-service/src/post-processors/order-placed.ws-post-processor.ts:22"


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    """A renamed copy of the feedback workspace: answers come from resolution, not from its folder name."""
    ws = tmp_path / "renamed-shop"
    shutil.copytree(FIXTURES / "feedback_workspace", ws, ignore=shutil.ignore_patterns(".mesh"))
    return ws


def order_request(dbs: dict, r) -> dict[str, str]:
    """order.placed written twice in one request: once to stream:order:placed, read and acknowledged by
    group ws-order-placed (the index's OrderPlacedWsPostProcessor), once to a stream no consumer of the
    index reads (order:archive, group someone-else): no websocket message there."""
    conn = dbs["event"][1]
    corr, trace = str(sg.uuid.uuid4()), sg.secrets.token_hex(16)
    ids = {"correlation": corr}
    for name, target, group, age in (("placed", "order:placed", "ws-order-placed", 300),
                                     ("other", "order:archive", "someone-else", 200)):
        event = sg.insert_event(conn, type="order.placed", emitter="ms-order", targets=[target], correlation=corr,
                                tp=sg.traceparent(trace, sg.span()), age_s=age)
        sg.push_and_ack(conn, r, event, group)
        ids[name] = event
    return ids


async def test_ws_message_of_the_final_consumer_is_the_last_node(dbs, redis_client, saga_settings, shop) -> None:
    ids = order_request(dbs, redis_client)
    async with in_process_client(saga_settings(workspace=str(shop))) as client:
        result = await client.call_tool("trace_request", {"correlation_id": ids["correlation"], "detail": "full"})
    assert not result.is_error, result.content[0].text
    data = result.structured_content
    placed = f"event:event_queue:{ids['placed']}"
    assert [i["key"] for i in data["items"]] == [placed, f"event:event_queue:{ids['other']}"]
    # the index's consumer of stream:order:placed in group ws-order-placed sends ws.order.placed; nothing
    # for the copy on order:archive (no consumer of the index reads that stream)
    (msg,) = data["ws_messages"]
    assert msg["parent"] == placed and msg["group"] == "ws-order-placed"
    assert msg["value"] == "ws.order.placed" and msg["consumer"] == "OrderPlacedWsPostProcessor"
    assert msg["stream"] == "stream:order:placed" and msg["site"] == SITE
    assert msg["evidence"] == "static" and msg["runtime_seen"] is False
    assert msg["group_state"] == "acknowledged"
    text = result.content[0].text
    assert "ws.order.placed" in text and "static evidence" in text and "not seen at run time" in text
    # the picture: the message hangs from the group's hop, dotted (static)
    assert "-.->" in data["mermaid"] and "ws ws.order.placed (static, not seen at run time)" in data["mermaid"]


async def test_without_a_workspace_the_ws_join_is_said_not_done(dbs, redis_client, saga_settings, run) -> None:
    ids = order_request(dbs, redis_client)
    report = await run(saga_settings(), correlation_id=ids["correlation"])
    assert report.ws_messages == [] and "no workspace is configured" in (report.ws_note or "")
    assert "websocket messages: not joined" in report.summary_text()


async def test_mermaid_parsed_by_the_real_parser(dbs, redis_client, saga_settings, shop) -> None:
    s = sg.build(dbs["event"][1], dbs["notification"][1], redis_client)  # the follow-up stuck in ws-service's PEL
    ids = order_request(dbs, redis_client)
    settings = saga_settings(workspace=str(shop))
    runtime = Runtime(settings)
    index = IndexService(shop, Conventions(), settings.resolved_state_dir)
    try:
        saga = await trace_request(runtime.connections, settings, catalog_of(runtime), correlation_id=s.correlation)
        orders = await trace_request(runtime.connections, settings, catalog_of(runtime),
                                     correlation_id=ids["correlation"], index=index)
    finally:
        await runtime.aclose()
        index.close()
    results = await anyio.to_thread.run_sync(parse_ok, [saga.mermaid, orders.mermaid])
    for report, parsed in zip((saga, orders), results, strict=True):
        nodes = vertices(parsed)
        assert {f"n{i}" for i in range(len(report.items))} <= set(nodes)
        for i, item in enumerate(report.items):
            assert item.type in nodes[f"n{i}"]["label"] and item.service in nodes[f"n{i}"]["label"]
    saga_edges = edges(results[0])
    assert ("n0", "n1") in saga_edges and "same trace" in saga_edges[("n0", "n1")]["label"]
    assert "broken" in " ".join(str(nodes_class) for nodes_class in vertices(results[0])["n2"].get("classes", []))
    order_nodes, order_edges = vertices(results[1]), edges(results[1])
    assert order_nodes["w0"]["label"] == "ws ws.order.placed (static, not seen at run time)"
    (source, _), = [k for k in order_edges if k[1] == "w0"]
    assert source.startswith("n0h")  # from the hop of group ws-order-placed
    assert order_nodes[source]["label"] == "group: acknowledged"
    assert order_edges[(source, "w0")]["label"] == "OrderPlacedWsPostProcessor (ws-order-placed) sends"


def _explain(conn: psycopg.Connection, query) -> list[str]:
    text, params = explain_query(query)
    with conn.transaction():
        conn.execute("SET LOCAL enable_seqscan = off")  # the tables are tiny: ask the planner what it CAN use
        plan = conn.execute(text, params).fetchone()[0]
    return scans(plan)


async def test_lookups_use_the_indexes_doctor_recommends(dbs, saga_settings) -> None:
    settings = saga_settings()
    runtime = Runtime(settings)
    try:
        tables = await catalog_of(runtime).tables("event", with_indexes=True)
        queries = lookup_queries(tables, settings)
        conn = dbs["event"][1]
        without = {label: _explain(conn, q) for label, q in queries}
        wanted = [*[r for kind in TABLE_KINDS for r in recommended_indexes(tables[kind], settings.conventions)],
                  *[r for kind in TABLE_KINDS for r in recommended(tables[kind]).values()]]
        for rec in wanted:
            conn.execute(rec.ddl.replace(" CONCURRENTLY", ""))
        conn.execute("ANALYZE")
        with_indexes = {label: _explain(conn, q) for label, q in queries}
    finally:
        await runtime.aclose()
    assert {label for label, _q in queries} == {
        "event_queue.correlation_id", "jobs_outbox.traceparent", "jobs_outbox.trace_id", "event_queue.traceparent",
        "event_queue.trace_id", "job_audit.job_id", "event_queue.outcomes"}
    # before: the lookups of trace_request's own indexes scan their table whole
    for label in ("event_queue.correlation_id", "jobs_outbox.traceparent", "event_queue.traceparent"):
        assert any(s.startswith("Seq Scan") for s in without[label]), (label, without[label])
    for label, found in with_indexes.items():
        assert found and not any(s.startswith("Seq Scan") for s in found), (label, found)
        assert any(" on " in s and "Index" in s for s in found), (label, found)


async def test_lookups_are_batched(dbs, redis_client, saga_settings, run) -> None:
    s = sg.build(dbs["event"][1], dbs["notification"][1], redis_client)
    report: RequestReport = await run(saga_settings(), correlation_id=s.correlation)
    assert len(report.items) == 3
    # per service: its transaction's set-up, then one round trip per level (seed, expansion by the trace
    # found), the jobs' audit + outcome rows of notification together, and the clock offset of the
    # services whose events were pushed (measured once per service). Per-row queries would be 15 or more.
    assert report.sql_round_trips <= 3 * 3 + 1 + 2, report.sql_round_trips
