"""trace_request on three real service databases and a real Redis."""

from __future__ import annotations

import re
import time
import uuid
from urllib.parse import urlsplit, urlunsplit

import pytest

from server.demo.embedded import free_port
from server.errors import InvalidArgument
from server.runtime import Runtime
from tests.outbox.conftest import apply_schema
from tests.tcp_proxy import FreezingProxy
from tests.trace_request import saga as sg
from tools.outbox.mcp_tools import catalog_of
from tools.trace_request.service import trace_request

pytestmark = pytest.mark.anyio


def keys(report) -> list[str]:
    return [i.key for i in report.items]


async def test_saga_found_whole_by_correlation_and_first_broken_link(dbs, redis_client, saga_settings, run) -> None:
    s = sg.build(dbs["event"][1], dbs["notification"][1], redis_client)
    report = await run(saga_settings(), correlation_id=s.correlation)
    assert keys(report) == [f"event:event_queue:{s.ids['created']}", f"notification:jobs_outbox:{s.ids['job']}",
                            f"notification:event_queue:{s.ids['follow_up']}"]
    job = report.items[1]
    # the job's chain holds its audit row and the trigger-written outcome event (not an item of its own)
    assert [h.name for h in job.hops][:1] == ["jobs_outbox"]
    assert any(h.name == "job_audit" and h.state == "COMPLETED" for h in job.hops)
    assert any(h.row is not None and h.row.id == s.ids["outcome"] for h in job.hops)
    assert job.parent == report.items[0].key and "same trace" in job.link
    assert report.items[2].parent == report.items[0].key  # same correlation id
    assert report.verdict.code == "in_pel" and report.verdict.severity == "warning"
    assert report.verdict.hop.startswith(f"notification:event_queue:{s.ids['follow_up']}")
    assert "ws-service" in report.verdict.sentence
    assert not report.inconclusive and report.unavailable == []
    assert report.trace_context == []
    # the older schema of social is named, not silently skipped
    assert {n.lookup for n in report.skipped if n.service == "social"} == {
        "event_queue.correlation_id", "event_queue.traceparent", "jobs_outbox.traceparent"}
    text = report.summary_text()
    assert "in_pel" in text and s.ids["follow_up"] in text


async def test_saga_found_whole_by_trace_id(dbs, redis_client, saga_settings, run) -> None:
    s = sg.build(dbs["event"][1], dbs["notification"][1], redis_client, stuck_ws=False, job_fails=True)
    report = await run(saga_settings(), trace_id=s.trace.upper())
    assert keys(report) == [f"event:event_queue:{s.ids['created']}", f"notification:jobs_outbox:{s.ids['job']}",
                            f"notification:event_queue:{s.ids['follow_up']}"]
    # the first broken link of the whole tree: the job's handler failed (before anything else)
    assert report.verdict.code == "handler_failed"
    assert "FCM token expired" in report.verdict.sentence
    skipped = {(n.service, n.lookup) for n in report.skipped}
    assert ("social", "jobs_outbox.traceparent") in skipped and ("social", "event_queue.traceparent") in skipped


async def test_row_of_another_trace_is_left_out(dbs, redis_client, saga_settings, run) -> None:
    s = sg.build(dbs["event"][1], dbs["notification"][1], redis_client)
    other = sg.insert_event(dbs["notification"][1], type="notification:sent", emitter="ms-notification",
                            targets=["ws:notify"], correlation=s.correlation,
                            tp=sg.traceparent(sg.secrets.token_hex(16), sg.span()), age_s=570)
    unrelated = sg.insert_event(dbs["event"][1], type="event:created", emitter="ms-event", targets=["x"],
                                correlation=None, tp=sg.traceparent(sg.secrets.token_hex(16), sg.span()), age_s=5)
    report = await run(saga_settings(), trace_id=s.trace)
    assert f"notification:event_queue:{other}" not in keys(report)
    assert report.left_out == [f"notification:event_queue:{other}"]
    assert all(unrelated not in k for k in keys(report))
    # by correlation id the same row belongs to the request, and its context is flagged broken
    by_corr = await run(saga_settings(), correlation_id=s.correlation)
    assert f"notification:event_queue:{other}" in keys(by_corr)
    flagged = {f.item: f for f in by_corr.trace_context}
    assert f"notification:event_queue:{other}" in flagged
    assert "belongs to trace" in flagged[f"notification:event_queue:{other}"].sentence


async def test_broken_trace_context_null_and_copied_span(dbs, redis_client, saga_settings, run) -> None:
    s = sg.build(dbs["event"][1], dbs["notification"][1], redis_client)
    # a job written by code that copied its parent's span (not a child span)
    copied = sg.insert_job(dbs["notification"][1], type="notifications.digest", target="notification-queue",
                           emitter="ms-notification", tp=sg.traceparent(s.trace, s.spans["event"]), age_s=595)
    # a follow-up written by code without a traceparent: the trace is cut
    cut = sg.insert_event(dbs["notification"][1], type="notification:read", emitter="ms-notification",
                          targets=["ws:notify"], correlation=s.correlation, tp=None, age_s=575)
    report = await run(saga_settings(), correlation_id=s.correlation)
    flagged = {f.item: f.sentence for f in report.trace_context}
    assert "not a child span" in flagged[f"notification:jobs_outbox:{copied}"]
    assert "NULL" in flagged[f"notification:event_queue:{cut}"]
    # the trigger-written outcome event has a NULL traceparent by design: never a finding
    assert all(s.ids["outcome"] not in k for k in flagged)
    assert f"notification:jobs_outbox:{s.ids['job']}" not in flagged


async def test_service_down_is_named_and_inconclusive(dbs, redis_client, saga_settings, run) -> None:
    s = sg.build(dbs["event"][1], dbs["notification"][1], redis_client)
    services = {name: {"postgres": url} for name, (url, _) in dbs.items()}
    services["ranking"] = {"postgres": f"postgresql://postgres@127.0.0.1:{free_port()}/nothing"}
    report = await run(saga_settings(services=services), correlation_id=s.correlation)
    assert report.inconclusive is True
    assert [p.service for p in report.unavailable] == ["ranking"]
    assert "ranking" not in report.searched_services
    assert "inconclusive" in report.verdict.sentence and "ranking" in report.verdict.sentence
    assert len(report.items) == 3
    nothing = await run(saga_settings(services=services), correlation_id="00000000-0000-0000-0000-000000000001")
    assert nothing.verdict.code == "not_found" and nothing.inconclusive
    assert "purged" in nothing.verdict.sentence and "not searched: ranking" in nothing.verdict.sentence


async def test_start_and_entity_ways_in(dbs, redis_client, saga_settings, run) -> None:
    s = sg.build(dbs["event"][1], dbs["notification"][1], redis_client)
    from_audit_id = dbs["notification"][1].execute("SELECT id FROM job_audit WHERE job_id = %s",
                                                   (s.ids["job"],)).fetchone()[0]
    by_start = await run(saga_settings(), start=f"notification:job_audit:{from_audit_id}")
    assert f"event:event_queue:{s.ids['created']}" in keys(by_start)
    assert by_start.items[0].link == "trace_id"
    by_entity = await run(saga_settings(), entity_id="evt-42")
    created = next(i for i in by_entity.items if i.id == s.ids["created"])
    assert created.heuristic and created.link == "entity_id"
    assert len(by_entity.items) == 3


async def test_unindexed_lookups_are_said(dbs, redis_client, saga_settings, run) -> None:
    s = sg.build(dbs["event"][1], dbs["notification"][1], redis_client)
    before = await run(saga_settings(), correlation_id=s.correlation)
    assert any(n.lookup == "event_queue.correlation_id" and n.service == "event" for n in before.unindexed)
    for name in ("event", "notification"):
        conn = dbs[name][1]
        conn.execute("CREATE INDEX ON event_queue (correlation_id)")
        conn.execute("CREATE INDEX ON event_queue ((substr(traceparent, 4, 32)))")
        conn.execute("CREATE INDEX ON jobs_outbox ((substr(traceparent, 4, 32)))")
        conn.execute('CREATE INDEX ON event_queue ("traceId")')
        conn.execute('CREATE INDEX ON jobs_outbox ("traceId")')
    after = await run(saga_settings(), correlation_id=s.correlation)
    assert [n for n in after.unindexed if n.service in ("event", "notification")] == []


async def test_mermaid_is_a_well_formed_flowchart(dbs, redis_client, saga_settings, run) -> None:
    s = sg.build(dbs["event"][1], dbs["notification"][1], redis_client)
    report = await run(saga_settings(), correlation_id=s.correlation)
    lines = report.mermaid.splitlines()
    assert lines[0] == "flowchart TD"
    defined, used = set(), set()
    for line in lines[1:]:
        line = line.strip()
        if m := re.fullmatch(r'(n\d+(?:h\d+)?)\["([^"\[\]<>]*)"\]', line):
            defined.add(m.group(1))
        elif m := re.fullmatch(r'(n\d+(?:h\d+)?) -->(?:\|"[^"|]*"\|)? (n\d+(?:h\d+)?)', line):
            used |= {m.group(1), m.group(2)}
        elif re.fullmatch(r"class n\d+(h\d+)? broken|classDef broken .*", line):
            continue
        else:
            raise AssertionError(f"not a flowchart line: {line!r}")
    assert used <= defined and len([d for d in defined if "h" not in d]) == 3
    assert "n0 -->" in report.mermaid


@pytest.mark.parametrize("kwargs, message", [
    ({}, "exactly one of"),
    ({"correlation_id": "a", "trace_id": "b" * 32}, "exactly one of"),
    ({"trace_id": "xyz"}, "not a W3C trace id"),
    ({"start": "event:users:1"}, "not an outbox table"),
    ({"start": "event-only"}, "SERVICE:TABLE:ID"),
    ({"start": "nope:event_queue:1"}, "not configured"),
    ({"correlation_id": "a", "services": ["nope"]}, "unknown service(s) nope"),
    ({"correlation_id": "a", "since_s": 0}, "since_s"),
])
async def test_bad_input_is_refused(make_settings, run, kwargs, message) -> None:
    # validation happens before any connection: these services are never reached
    settings = make_settings(services={"event": {"postgres": "postgresql://postgres@127.0.0.1:1/x"}})
    with pytest.raises(InvalidArgument) as err:
        await run(settings, **kwargs)
    assert message in str(err.value)


async def test_stalled_service_is_named_within_the_deadline(dbs, redis_client, saga_settings, run, make_pg_db
                                                            ) -> None:
    s = sg.build(dbs["event"][1], dbs["notification"][1], redis_client)
    ranking = make_pg_db()
    apply_schema(ranking)
    target = urlsplit(ranking)
    proxy = FreezingProxy(target.hostname or "127.0.0.1", target.port or 5432)
    try:
        user = target.netloc.rpartition("@")[0]
        services = {name: {"postgres": url} for name, (url, _) in dbs.items()}
        services["ranking"] = {"postgres": urlunsplit(target._replace(netloc=f"{user}@127.0.0.1:{proxy.port}"))}
        settings = saga_settings(services=services, limits={"statement_timeout_ms": 400,
                                                            "sql_deadline_margin_ms": 600, "connect_timeout_s": 1})
        runtime = Runtime(settings)
        try:
            warm = await trace_request(runtime.connections, settings, catalog_of(runtime), correlation_id=s.correlation)
            assert warm.unavailable == [] and len(warm.items) == 3  # ranking answered: its connection is pooled
            proxy.freeze()  # its peer stops answering mid-session (statement_timeout cannot help)
            started = time.monotonic()
            report = await trace_request(runtime.connections, settings, catalog_of(runtime),
                                         correlation_id=s.correlation)
            elapsed = time.monotonic() - started
        finally:
            proxy.thaw()
            await runtime.aclose()
    finally:
        proxy.close()
    assert elapsed < 1.0 + 2.5, elapsed  # one deadline (400 + 600 ms), not one per lookup
    assert [p.service for p in report.unavailable] == ["ranking"]
    assert "deadline of 1000 ms" in report.unavailable[0].error
    assert report.inconclusive and "ranking" in report.verdict.sentence
    assert len(report.items) == 3 and report.verdict.code == "in_pel"  # the other services still answered


async def test_old_trace_id_column_found_where_traceparent_is_missing(dbs, redis_client, saga_settings, run
                                                                      ) -> None:
    s = sg.build(dbs["event"][1], dbs["notification"][1], redis_client)
    social = dbs["social"][1]  # the older schema: no traceparent, the trace in the old uuid "traceId"
    job = sg.sim.insert_job(social, type="social.share", target="social-queue", emitter="ms-social", age_s=585)
    social.execute('UPDATE jobs_outbox SET "traceId" = %s WHERE id = %s', (str(uuid.UUID(hex=s.trace)), job))
    stranger = sg.sim.insert_job(social, type="social.share", target="social-queue", emitter="ms-social", age_s=584)
    social.execute('UPDATE jobs_outbox SET "traceId" = %s WHERE id = %s', (str(uuid.uuid4()), stranger))
    for way in ({"trace_id": s.trace}, {"correlation_id": s.correlation}):
        report = await run(saga_settings(), **way)
        assert f"social:jobs_outbox:{job}" in keys(report), way
        assert all(stranger not in k for k in keys(report))
        assert ("social", "jobs_outbox.traceparent") in {(n.service, n.lookup) for n in report.skipped}
