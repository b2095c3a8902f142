"""flow_map from the static index: every hop named, each kind of trouble marked, fan-out folded.

Every picture is read back with the real Mermaid parser and compared with the data and with
analyze_impact's answer for the same target.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from server.errors import InvalidArgument, NotFound
from tests.flow_map.conftest import copy_workspace
from tests.flow_map.mermaid_parser import edges, parse_ok, vertices
from tools.flow_map.graph import class_of
from tools.flow_map.service import MAX_BYTES, build_map


def picture(svc, target: str, depth: int = 3, direction: str = "LR"):
    result, _graph = build_map(svc, target, depth, direction)
    (parsed,) = parse_ok([result.mermaid])
    return result, vertices(parsed), edges(parsed)


def node_of(result, **where):
    found = [n for n in result.nodes if all(getattr(n, k) == v for k, v in where.items())]
    assert found, f"no node with {where} among {[(n.kind, n.label) for n in result.nodes]}"
    return found[0]


def test_fallback_job_names_every_hop(fixture_index):
    result, seen, links = picture(fixture_index, "FALLBACK_CREATE_EVENT", 3)
    impact = fixture_index.analyze_impact("FALLBACK_CREATE_EVENT", 3)
    labels = "\n".join(v["label"] for v in seen.values())
    # the data and the parsed picture are the same graph
    assert {n.id for n in result.nodes} <= set(seen)
    for n in result.nodes:
        assert seen[n.id]["label"].startswith(n.label)
    assert {(e.source, e.target) for e in result.edges} == set(links)
    for e in result.edges:
        assert links[(e.source, e.target)]["stroke"] == ("dotted" if e.confidence == "heuristic" else "normal")
    # every hop analyze_impact knows is drawn
    for site in [*impact.producers, *impact.consumers, *(f.site for f in impact.followups)]:
        assert class_of(site.symbol) in labels, site
    for route in impact.routes:
        assert route.name in labels
    for f in impact.followups:
        assert f.value in labels
    for m in impact.matches:
        assert node_of(result, value=m.value, kind=m.kind).target
    # the chain reads in order: producer -> job -> queue -> worker -> handler
    job = node_of(result, kind="job", value="events.fallback_create_event")
    queue = node_of(result, kind="queue", value="fallback-event-queue")
    worker = node_of(result, symbol="FallbackEventWorker")
    handler = node_of(result, symbol="FallbackCreateEventHandler")
    producer = node_of(result, symbol="EventCommandController")
    assert (producer.id, job.id) in links and links[(producer.id, job.id)]["label"] == "fallback"
    assert (job.id, queue.id) in links and (queue.id, worker.id) in links and (worker.id, handler.id) in links
    assert producer.file == "ms-event/src/modules/event/controllers/commands/event.command.controller.ts"
    assert producer.line == 8 and producer.service == "ms-event"
    # the audit trigger hangs from the worker and writes both outcomes
    trigger = node_of(result, symbol="notify_job_audit_status_change")
    success = node_of(result, kind="event", value="event:job:outbox:success")
    failure = node_of(result, kind="event", value="event:job:outbox:failure")
    assert (worker.id, trigger.id) in links
    assert links[(trigger.id, success.id)]["label"] == "on COMPLETED"
    assert links[(trigger.id, failure.id)]["label"] == "on FAILED"
    # the unconsumed outcome is a dead end, drawn so
    assert [t.code for t in failure.trouble] == ["dead_end"]
    assert "deadend" in seen[failure.id]["classes"]
    assert "dead end" in seen[failure.id]["label"]
    assert not success.trouble and "broken" not in seen[success.id]["classes"]
    assert result.mermaid_bytes == len(result.mermaid.encode()) <= MAX_BYTES
    assert "legend" in result.mermaid and "```mermaid" in result.summary_text()


def test_each_kind_of_trouble_is_marked(tmp_path: Path, make_index):
    ws = copy_workspace("workspace", tmp_path / "ws")
    pp = ws / "ws-service" / "src" / "post-processors" / "mismatch.post-processor.ts"
    pp.write_text(
        "import { SinglePostProcessor } from '@acme/post-processors';\n"
        "import { UserEventMessagingType, getEventStreamName } from '@acme/messaging';\n"
        "import { Streams } from '@acme/shared';\n\n"
        "export class MismatchPostProcessor extends SinglePostProcessor<unknown> {\n"
        "  protected override shouldProcess(eventType: string): boolean {\n"
        "    return eventType === UserEventMessagingType.USER_CREATED;\n"
        "  }\n"
        "  protected async processEvent(_event: unknown, _id: string): Promise<void> {}\n"
        "}\n", encoding="utf-8")
    main = ws / "ws-service" / "src" / "main.ts"
    text = main.read_text(encoding="utf-8")
    text = text.replace("import { config } from './config.js';",
                        "import { config } from './config.js';\n"
                        "import { MismatchPostProcessor } from './post-processors/mismatch.post-processor.js';")
    text = text.replace("  await Promise.all(",
                        "  const mismatch = new MismatchPostProcessor(redis, {\n"
                        "    streamName: getEventStreamName(Streams.WS_JOBS_OUTBOX),\n"
                        "    groupName: 'Mismatch',\n  });\n  await Promise.all(")
    main.write_text(text, encoding="utf-8")
    svc = make_index(ws)

    # a type nobody produces, and a handler no worker routes
    result, seen, _ = picture(svc, "EventsJobType.SYNC_CALENDAR")
    job = node_of(result, kind="job", value="events.sync_calendar")
    handler = node_of(result, symbol="SyncCalendarHandler")
    assert "no_producer" in [t.code for t in job.trouble] and "broken" in seen[job.id]["classes"]
    assert [t.code for t in handler.trouble] == ["handler_not_routed"]
    assert "broken" in seen[handler.id]["classes"] and "no worker routes it" in seen[handler.id]["label"]
    # a queue no worker reads
    result, seen, _ = picture(svc, "UserJobType.FALLBACK_UPDATE_USER")
    queue = node_of(result, kind="queue", value="fallback-user-queue")
    assert [t.code for t in queue.trouble] == ["queue_no_worker"] and "broken" in seen[queue.id]["classes"]
    # an event nobody consumes
    result, seen, _ = picture(svc, "EVENT_ARCHIVED")
    event = node_of(result, kind="event", value="event.archived")
    assert [t.code for t in event.trouble] == ["dead_end"] and "deadend" in seen[event.id]["classes"]
    # a consumer whose filter matches nothing on its stream
    for target in ("stream:ws:jobs-outbox", "event.fallback_create_event_feedback"):
        result, seen, links = picture(svc, target)
        mismatch = node_of(result, symbol="MismatchPostProcessor")
        stream = node_of(result, kind="stream", value="stream:ws:jobs-outbox")
        assert [t.code for t in mismatch.trouble] == ["filter_matches_nothing"], target
        assert "broken" in seen[mismatch.id]["classes"]
        assert links[(stream.id, mismatch.id)]["label"] == "group Mismatch"
        accepting = node_of(result, symbol="WsJobOutboxPostProcessor")
        assert not accepting.trouble
    assert result.trouble >= 1 and "MismatchPostProcessor" in result.summary_text()


def test_fan_out_is_folded_under_the_budget(tmp_path: Path, make_index):
    ws = copy_workspace("workspace", tmp_path / "ws")
    folder = ws / "ms-event" / "src" / "modules" / "event" / "producers"
    folder.mkdir()
    for i in range(15):
        (folder / f"producer{i}.ts").write_text(
            "import { JobsOutboxEntity } from '@acme/database';\n"
            "import { JobMessagingType, EventsQueue } from '@acme/messaging';\n\n"
            f"export class GeocodeProducerNumber{i:02d} {{\n"
            "  send(id: string) {\n"
            "    return JobsOutboxEntity.createJob({ type: JobMessagingType.GEOCODE_EVENT, emitter: 'ms-event', "
            "emitterId: id, target: EventsQueue.EVENTS, payload: { id } });\n"
            "  }\n}\n", encoding="utf-8")
    svc = make_index(ws)
    impact = svc.analyze_impact("GEOCODE_EVENT", 3)
    producers = {class_of(s.symbol) for s in impact.producers}
    assert len(producers) >= 16
    result, seen, links = picture(svc, "GEOCODE_EVENT", 3)
    assert result.mermaid_bytes <= MAX_BYTES
    fold = next(f for f in result.folded if f.what == "producers")
    job = node_of(result, kind="job", value="events.geocode_event")
    assert fold.at == job.id
    drawn = {n.symbol for n in result.nodes if (n.id, job.id) in links and n.role == "code"}
    assert fold.count == len(producers) - len(drawn)
    folded_names = {item.split(" (")[0] for item in fold.items}
    assert folded_names | drawn == producers
    assert all(":" in item for item in fold.items)  # file:line of each
    assert seen[fold.node]["label"] == f"+{fold.count} more producers"
    assert (fold.node, job.id) in links
    assert f"{fold.count} producers" in result.summary_text()


def test_fallback_job_of_the_realistic_workspace_at_depth_5(realistic_index):
    result, seen, _links = picture(realistic_index, "JobMessagingType.FALLBACK_CREATE_EVENT", 5)
    labels = {v["label"].split("\n")[0] for v in seen.values()}
    assert "queue fallback-event-queue" in labels
    assert "FallbackEventWorker" in labels
    assert "stream stream:event:job:outbox:success" in labels
    assert "ws message ws.event.fallback_create_event" in labels
    ws_class = node_of(result, symbol="WsFeedbackPostProcessor")
    assert ws_class.service == "ws-service"
    failure = node_of(result, kind="event", value="event:job:outbox:failure")
    assert "deadend" in seen[failure.id]["classes"]
    assert result.mermaid_bytes <= MAX_BYTES
    # code nodes link to their file:line when the picture has room for it
    code = [n for n in result.nodes if n.role == "code"]
    assert code and all(seen[n.id]["link"] == f"{n.file}#L{n.line}" for n in code)
    assert all(seen[n.id]["link"] is None for n in result.nodes if n.role != "code")


def test_links_are_left_out_rather_than_unsafe_or_over_budget(fixture_index):
    from tools.flow_map import mermaid as mm

    assert mm.click_line("c1", 'a"b.ts', 3) is None and mm.click_line("c1", "a b.ts", 3) is None
    assert mm.click_line("c1", "ms-x/src/a.ts", 3) == '  click c1 href "ms-x/src/a.ts#L3"'
    result, seen, _ = picture(fixture_index, "FALLBACK_CREATE_EVENT", 3)
    if any(v["link"] for v in seen.values()):
        assert result.mermaid_bytes <= MAX_BYTES
    else:
        assert any("no click links" in n for n in result.notes)


@pytest.mark.parametrize("name", ["fixture_index", "realistic_index"])
def test_every_target_of_the_catalogue_parses_and_fits(name, request):
    svc = request.getfixturevalue(name)
    entries = svc.catalogue(with_checks=False).entries
    texts, results = [], []
    for entry in entries:
        for direction in ("LR", "TB"):
            result, _g = build_map(svc, entry.value, 3, direction)
            texts.append(result.mermaid)
            results.append(result)
    parse_ok(texts)
    assert len(texts) == 2 * len(entries) > 40
    too_big = [(r.target, r.mermaid_bytes) for r in results if r.mermaid_bytes > MAX_BYTES]
    assert not too_big


def test_bad_arguments_are_refused(fixture_index):
    with pytest.raises(NotFound, match=r"closest names: .*GEOCODE_EVENT"):
        build_map(fixture_index, "GEOCODE_EVENTS", 3, "LR")
    with pytest.raises(InvalidArgument, match="depth"):
        build_map(fixture_index, "GEOCODE_EVENT", 9, "LR")
    with pytest.raises(InvalidArgument, match="direction"):
        build_map(fixture_index, "GEOCODE_EVENT", 3, "UP")
    with pytest.raises(InvalidArgument, match="empty"):
        build_map(fixture_index, "  ", 3, "LR")
    result, _ = build_map(fixture_index, "GEOCODE_EVENT", 0, "TD")
    assert result.mermaid.startswith("flowchart TB\n") and result.depth == 0
