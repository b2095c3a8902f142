"""analyze_impact on the fixture workspace: exact matches, producers, consumers, routes, follow-ups."""

from __future__ import annotations

import pytest

from server.errors import InvalidArgument
from tests.static.conftest import where

MSG = "npm-packages/packages/messaging/src"
EVENT_SERVICE = "ms-event/src/modules/event/event.service.ts"
EVENT_CMD = "ms-event/src/modules/event/controllers/commands/event.command.controller.ts"
HANDLERS = "workers-runners/worker-event/src/workers/handlers"
EVENT_WORKER = "workers-runners/worker-event/src/workers/event.worker.ts"
FALLBACK_WORKER = "workers-runners/worker-event/src/workers/fallback-event.worker.ts"
JOB_SUCCESS_PP = "npm-packages/packages/post-processors/src/common/job-outbox-success.post-processor.ts"
AUDIT_V2 = "ms-event/src/migrations/common/1700000500000-UpdateJobAuditStatusTrigger.ts"


def test_job_by_member_name(shared_service):
    r = shared_service.analyze_impact("GEOCODE_EVENT")
    assert [(m.kind, m.name, m.value) for m in r.matches] == [
        ("job", "EventsJobType.GEOCODE_EVENT", "events.geocode_event")]
    m = r.matches[0]
    assert (m.defined_at.file, m.defined_at.line) == (f"{MSG}/jobs/event/payloads.ts", 2)
    assert "JobMessagingType.GEOCODE_EVENT" in m.aliases
    assert where(r.producers) == {("create_job", f"{EVENT_SERVICE}:14", "events.geocode_event")}
    producer = r.producers[0]
    assert producer.detail["queue"] == "event-queue"
    assert producer.detail["emitter"] == "ms-event"
    assert producer.symbol == "EventService.create"
    assert producer.repo == "ms-event"
    assert producer.confidence == "exact" and not producer.test_only
    assert where(r.consumers) == {
        ("handler", f"{HANDLERS}/geocode-event.handler.ts:8", "events.geocode_event"),
        ("worker", f"{EVENT_WORKER}:11", "events.geocode_event"),
    }
    handler = next(c for c in r.consumers if c.kind == "handler")
    assert handler.detail["worker_class"] == "EventWorker"
    assert [(rt.kind, rt.name) for rt in r.routes] == [("queue", "event-queue")]
    assert any("exist only in tests" in n for n in r.notes)


@pytest.mark.parametrize(
    "target",
    ["GEOCODE_EVENT", "EventsJobType.GEOCODE_EVENT", "JobMessagingType.GEOCODE_EVENT", "events.geocode_event"],
)
def test_every_spelling_resolves_to_the_same_job(shared_service, target):
    r = shared_service.analyze_impact(target)
    assert [(m.kind, m.value) for m in r.matches] == [("job", "events.geocode_event")]
    assert where(r.producers) == {("create_job", f"{EVENT_SERVICE}:14", "events.geocode_event")}


def test_include_tests_lists_the_spec_producer(shared_service):
    r = shared_service.analyze_impact("events.geocode_event", include_tests=True)
    spec = [p for p in r.producers if p.test_only]
    assert where(spec) == {("create_job", "workers-runners/worker-event/src/tests/geocode.spec.ts:6",
                            "events.geocode_event")}


def test_same_member_name_three_values(shared_service):
    r = shared_service.analyze_impact("FALLBACK_CREATE_EVENT")
    assert [(m.kind, m.value) for m in r.matches] == [
        ("job", "events.fallback_create_event"),
        ("event", "event.fallback_create_event_feedback"),
        ("ws_event", "ws.event.fallback_create_event"),
    ]
    assert where(r.producers) == {
        ("fallback", f"{EVENT_CMD}:8", "events.fallback_create_event"),
        ("create_event", f"{JOB_SUCCESS_PP}:25", "event.fallback_create_event_feedback"),
    }  # the EVENT_TO_WS_EVENT_MAPPING entry is not a producer (no code of this fixture sends the message)
    fallback = next(p for p in r.producers if p.kind == "fallback")
    assert fallback.detail["queue"] == "fallback-event-queue"  # from the helper's createJob, through the class
    assert fallback.detail["wrapper_found"] == "class"
    mapped = next(p for p in r.producers if p.kind == "create_event")
    assert mapped.confidence == "heuristic" and mapped.detail["via"] == "JOB_TO_EVENT_MAPPING"
    assert where(r.consumers) == {
        ("handler", f"{HANDLERS}/fallback/fallback-create-event.handler.ts:5", "events.fallback_create_event"),
        ("worker", f"{FALLBACK_WORKER}:7", "events.fallback_create_event"),
        ("post_processor", "ws-service/src/post-processors/ws-job-outbox.post-processor.ts:6",
         "event.fallback_create_event_feedback"),
    }
    assert any("3 different things" in n for n in r.notes)


def test_qualified_names_pick_one_of_the_homonyms(shared_service):
    r = shared_service.analyze_impact("EventWebsocketMessagingType.FALLBACK_CREATE_EVENT")
    assert [(m.kind, m.value) for m in r.matches] == [("ws_event", "ws.event.fallback_create_event")]
    r = shared_service.analyze_impact("Jobs.FALLBACK_CREATE_EVENT")  # an import alias is not a declaration name
    assert r.matches == [] or all(m.kind == "job" for m in r.matches)


def test_aliased_import_and_namespace_import(shared_service):
    r = shared_service.analyze_impact("events.fallback_delete_event")  # produced through `Jobs.` (alias)
    assert where(r.producers) == {("fallback", f"{EVENT_CMD}:14", "events.fallback_delete_event")}
    assert where(r.consumers) == {("worker", f"{FALLBACK_WORKER}:7", "events.fallback_delete_event")}
    assert r.consumers[0].detail["route"] == "switch"
    r = shared_service.analyze_impact("FALLBACK_UPDATE_USER")  # messaging.JobMessagingType.X (namespace)
    assert where(r.producers) == {
        ("fallback", "ms-user/src/modules/user/controllers/commands/user.command.controller.ts:7",
         "users.fallback_update_user")}
    assert r.producers[0].detail["queue"] == "fallback-user-queue"
    assert {(rt.kind, rt.name) for rt in r.routes} == {("queue", "fallback-user-queue"), ("queue", "user-queue")}


def test_spread_through_namespace_import(shared_service):
    r = shared_service.analyze_impact("JobMessagingType.FOLLOW_USER")
    assert [(m.kind, m.name, m.value) for m in r.matches] == [
        ("job", "SocialJobType.FOLLOW_USER", "social.follow_user")]


def test_a_literal_equal_to_the_member_name_is_not_a_reference(shared_service):
    r = shared_service.analyze_impact("events.sync_calendar")
    assert r.producers == []
    assert where(r.consumers) == {("handler", f"{HANDLERS}/sync-calendar.handler.ts:6", "events.sync_calendar")}
    assert r.consumers[0].detail.get("worker_class", "") == ""
    r = shared_service.analyze_impact("SYNC_CALENDAR")  # member name and the observed literal value
    assert sorted((m.kind, m.value) for m in r.matches) == [("job", "SYNC_CALENDAR"), ("job", "events.sync_calendar")]


def test_unknown_target_suggests_close_names(shared_service):
    r = shared_service.analyze_impact("GEOCODE_EVENTS")
    assert r.matches == [] and r.producers == [] and r.consumers == []
    assert "GEOCODE_EVENT" in r.suggestions
    r = shared_service.analyze_impact("events.geocode")
    assert "events.geocode_event" in r.suggestions


def test_case_and_separator_insensitive_fallback(shared_service):
    r = shared_service.analyze_impact("geocode-event")
    assert [(m.kind, m.value) for m in r.matches] == [("job", "events.geocode_event")]
    assert "matched ignoring case and separators" in r.notes


def test_event_with_producers_consumers_and_stream(shared_service):
    r = shared_service.analyze_impact("EventEventMessagingType.EVENT_CREATED")
    assert where(r.producers) == {("create_event", f"{EVENT_SERVICE}:22", "event.created")}
    assert r.producers[0].detail["stream"] == "stream:event:events"
    assert where(r.consumers) == {
        ("post_processor",
         "post-processors-runner/post-processor-event/src/post-processors/event-created.post-processor.ts:5",
         "event.created")}
    pp = r.consumers[0]
    assert pp.detail["stream"] == "stream:event:events"
    assert pp.detail["group"] == "post-processor-event"  # read from config/default.config.json
    assert pp.detail["binding"] == "DI provider options (group from a config file)"
    assert [(rt.kind, rt.name) for rt in r.routes] == [("stream", "stream:event:events")]


def test_generic_literal_and_handler_producers(shared_service):
    r = shared_service.analyze_impact("event.geocoded")
    assert where(r.producers) == {
        ("create_event", "ms-event/src/modules/event/repositories/event.repository.ts:15", "event.geocoded"),
        ("create_event", f"{HANDLERS}/geocode-event.handler.ts:12", "event.geocoded"),
    }
    assert where(r.consumers) == {
        ("post_processor", "ws-service/src/post-processors/geocoded.post-processor.ts:5", "event.geocoded")}
    assert r.consumers[0].detail["group"] == "ws-geocoded"


def test_queue_and_stream_targets(shared_service):
    r = shared_service.analyze_impact("fallback-event-queue")
    assert [(m.kind, m.name) for m in r.matches] == [("queue", "EventsQueue.FALLBACK_EVENTS")]
    assert where(r.consumers) == {("worker", f"{FALLBACK_WORKER}:7", "fallback-event-queue")}
    assert {p.value for p in r.producers} == {"events.fallback_create_event", "events.fallback_delete_event"}
    for spelling in ("stream:ws:jobs-outbox", "ws:jobs-outbox", "Streams.WS_JOBS_OUTBOX"):
        r = shared_service.analyze_impact(spelling)
        assert [(m.kind, m.value) for m in r.matches] == [("stream", "stream:ws:jobs-outbox")], spelling
        assert {c.symbol for c in r.consumers} == {"WsJobOutboxPostProcessor"}
        assert where(r.producers) == {("create_event", f"{JOB_SUCCESS_PP}:25", "event.fallback_create_event_feedback")}


def test_sql_trigger_producers(shared_service):
    r = shared_service.analyze_impact("tag.changed")
    assert where(r.producers) == {
        ("sql_trigger", "ms-event/src/migrations/domain/1700000100000-SetupEventTriggers.ts:6", "tag.changed")}
    site = r.producers[0]
    assert site.detail["function"] == "create_event_queue_record"
    assert site.detail["emitter"] == "ms-event"
    # the last definition of create_event_queue_record sends to event:events, not social:interactions
    assert site.detail["stream"] == "stream:event:events"
    r = shared_service.analyze_impact("requirement.changed")  # from a .sql file
    assert where(r.producers) == {
        ("sql_trigger", "ms-event/src/migrations/sql/requirements.trigger.sql:3", "requirement.changed")}
    r = shared_service.analyze_impact("event.updated")  # trigger SQL built by a template function of a package
    assert where(r.producers) == {
        ("sql_trigger", "ms-event/src/migrations/domain/1700000200000-AddEventUpdatedTrigger.ts:7", "event.updated")}
    assert shared_service.analyze_impact("tag.legacy").matches == []  # only in down()


def test_last_definition_of_the_audit_trigger_wins(shared_service):
    r = shared_service.analyze_impact("job.outbox.success")
    assert r.producers == []  # the first version wrote it, the redefinition does not
    assert {c.symbol for c in r.consumers} == {"JobOutboxSuccessPostProcessor"}
    r = shared_service.analyze_impact("event:job:outbox:success")
    assert [(m.kind, m.value, m.defined_at) for m in r.matches] == [("event", "event:job:outbox:success", None)]
    assert where(r.producers) == {("sql_trigger", f"{AUDIT_V2}:16", "event:job:outbox:success")}
    assert r.producers[0].confidence == "heuristic"
    assert r.producers[0].detail["status"] == "COMPLETED"
    assert {c.symbol for c in r.consumers} == {"JobOutboxSuccessPostProcessor"}  # endsWith(':job:outbox:success')


def test_unresolved_references_are_reported(shared_service):
    r = shared_service.analyze_impact("events.publish_event")
    assert r.producers == []
    assert [(u.kind, u.file, u.line, u.detail["raw"]) for u in r.unresolved] == [
        ("create_job", EVENT_SERVICE, 45, "this.pickType()")]
    assert "not a function of the workspace" in r.unresolved[0].detail["reason"]
    assert any("not proof of absence" in n for n in r.notes)


def test_index_info(shared_service):
    r = shared_service.analyze_impact("GEOCODE_EVENT")
    assert r.index.files == 66
    assert r.index.parse_errors == 1 and r.index.parse_error_files == ["ms-event/src/legacy/broken.ts"]
    assert r.index.stale_files == []


@pytest.mark.parametrize("kwargs", [{"target": ""}, {"target": "x" * 600}, {"target": "X", "depth": 9},
                                    {"target": "X", "depth": -1}])
def test_invalid_arguments(shared_service, kwargs):
    with pytest.raises(InvalidArgument):
        shared_service.analyze_impact(**kwargs)
    with pytest.raises(InvalidArgument):
        shared_service.catalogue(kind="jobs")


def test_stream_and_group_read_from_a_json_config(shared_service):
    r = shared_service.analyze_impact("user.created")
    assert where(r.consumers) == {
        ("post_processor", "ws-service/src/post-processors/user-created.post-processor.ts:8", "user.created")}
    pp = r.consumers[0]
    assert (pp.detail["stream"], pp.detail["group"]) == ("stream:user:users", "ws-users")
    assert "config" in pp.detail["binding"] and pp.confidence == "heuristic"
    assert pp.detail["accepts"] == "user.created"  # SUPPORTED.has(type), a module-level Set
