"""The questions a human expert answers from tests/fixtures/realistic_workspace, asked to the index.

The fixture is written in the shapes of the real code (seeds, target-system.md) by someone
other than the author of tests/fixtures/workspace: a meta repository holding one git
repository per folder, the messaging package merging `as const` objects and string enums by
spread, a fallback helper duplicated per service, test-only controllers, migrations whose
SQL is passed to `queryRunner.query`, an audit trigger redefined by a later migration in
two services and still in its first version in a third, several workers per domain, a
switch-routed worker, a handler no worker routes, a job type taken from a
`[RankingListKind] -> JobMessagingType` table, post-processors that name their stream with
or without the `stream:` prefix, mapping tables read through functions, an aliased and a
namespace import, `export { A as B } from`, CRLF line endings, `.tsx`, a file with merge
conflict markers, `export default class`, and a string literal equal to a member *name*.

Every expected site is located by a snippet of the fixture (see :func:`at`), so each
assertion names the exact line an expert would point at.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from server.config import Conventions
from tests.helpers import FIXTURES
from tools.mesh_index.service import IndexService

FIXTURE = FIXTURES / "realistic_workspace"
REPOS = ("npm-packages", "ms-user", "ms-event", "ms-post", "ms-ranking", "workers-runners", "outbox-runners",
         "post-processors-runner", "ws-service")

USER_CMD = "ms-user/src/modules/user/controllers/commands/user.command.controller.ts"
ACCOUNT_CMD = "ms-user/src/modules/user/controllers/commands/account.command.controller.ts"
USER_BASE = "ms-user/src/modules/user/controllers/commands/base.command.controller.ts"
USER_TEST_CTRL = "ms-user/src/modules/user/controllers/tests/user.test.controller.ts"
USER_AUDIT_V2 = "ms-user/src/migrations/common/1790000000000-UpdateJobAuditStatusTrigger.ts"
USER_TABLES = "ms-user/src/migrations/common/1700000000000-CreateOutboxTables.ts"
USER_CREATED_TRIGGER = "ms-user/src/migrations/domain/1750000000000-AddUserCreatedTrigger.ts"
EVENT_CMD = "ms-event/src/modules/event/controllers/commands/event.command.controller.ts"
EVENT_SERVICE = "ms-event/src/modules/event/event.service.ts"
EVENT_REPO = "ms-event/src/modules/event/repositories/event.repository.ts"
EVENT_AUDIT_V2 = "ms-event/src/migrations/common/1790000000000-UpdateJobAuditStatusTrigger.ts"
EVENT_TABLES = "ms-event/src/migrations/common/1700000000000-CreateOutboxTables.ts"
EVENT_UPDATED_TRIGGER = "ms-event/src/migrations/domain/1760000000000-AddEventUpdatedTrigger.ts"
POST_SERVICE = "ms-post/src/modules/post/post.service.ts"
POST_REPO = "ms-post/src/modules/post/repositories/post.repository.ts"
POST_CMD = "ms-post/src/modules/post/controllers/commands/post.command.controller.ts"
POST_TABLES = "ms-post/src/migrations/common/1700000000000-CreateOutboxTables.ts"
POST_CDC = "ms-post/src/migrations/domain/1770000000000-AddPostUpdatedCdcTrigger.ts"
RANKING_SERVICE = "ms-ranking/src/modules/ranking/ranking.service.ts"
MSG = "npm-packages/packages/messaging/src"
JOB_TO_EVENT = f"{MSG}/mappings/job-to-event.mapping.ts"
EVENT_TO_WS = f"{MSG}/websockets/event-to-ws.mapping.ts"
PP_LIB = "npm-packages/packages/post-processors/src/common"
SUCCESS_PP = f"{PP_LIB}/job-outbox-success.post-processor.ts"
FAILED_PP = f"{PP_LIB}/job-outbox-failed.post-processor.ts"
WU = "workers-runners/worker-user/src"
FALLBACK_USER_WORKER = f"{WU}/workers/fallback-user.worker.ts"
WE = "workers-runners/worker-event/src/workers"
WR = "workers-runners/worker-ranking/src"
PPR = "post-processors-runner/src"
WS = "ws-service/src/post-processors"


def at(rel: str, snippet: str, nth: int = 1) -> str:
    """``rel:line`` of the ``nth`` line of the fixture file ``rel`` containing ``snippet``."""
    lines = (FIXTURE / rel).read_text(encoding="utf-8").splitlines()
    found = [i for i, line in enumerate(lines, 1) if snippet in line]
    assert len(found) >= nth, f"{snippet!r} not found {nth} time(s) in {rel}"
    return f"{rel}:{found[nth - 1]}"


def where(sites) -> set[tuple[str, str, str | None]]:
    return {(s.kind, f"{s.file}:{s.line}", s.value) for s in sites}


def hops(result) -> set[tuple[int, str, str, str]]:
    return {(f.depth, f.from_value, f.kind, f.value) for f in result.followups}


@pytest.fixture(scope="module")
def rw(tmp_path_factory) -> Iterator[IndexService]:
    """The fixture as a meta repository holding one git repository per top-level folder."""
    root = tmp_path_factory.mktemp("realistic")
    ws = root / "meta"
    shutil.copytree(FIXTURE, ws, ignore=shutil.ignore_patterns(".mesh"))
    (ws / ".git").mkdir()
    for repo in REPOS:
        (ws / repo / ".git").mkdir()
    svc = IndexService(ws, Conventions(), root / "state")
    svc.refresh()
    yield svc
    svc.close()


# -- jobs ----------------------------------------------------------------------------------------


def test_fallback_update_user_names_a_job_an_event_and_a_ws_message(rw: IndexService) -> None:
    """Who produces FALLBACK_UPDATE_USER, which queue, which handler, what happens next?"""
    r = rw.analyze_impact("FALLBACK_UPDATE_USER", depth=2)
    assert {(m.kind, m.value) for m in r.matches} == {
        ("job", "user.fallback_update_user"),
        ("event", "user.fallback_update_user_feedback"),
        ("ws_event", "ws.user.fallback_update_user"),
    }
    assert where(r.producers) == {
        ("fallback", at(USER_CMD, "withFallback(JobMessagingType.FALLBACK_UPDATE_USER"), "user.fallback_update_user"),
        ("create_event", at(SUCCESS_PP, "EventQueueEntity.createFollowUp"), "user.fallback_update_user_feedback"),
        ("create_event", at(FALLBACK_USER_WORKER, "EventQueueEntity.createEvent({"),
         "user.fallback_update_user_feedback"),
        # the table entry is not a producer: the post-processor reading it and sending is
        ("ws_send", at(f"{WS}/ws-feedback.post-processor.ts", "this.gateway.sendToUser"),
         "ws.user.fallback_update_user"),
    }
    fallback = next(s for s in r.producers if s.kind == "fallback")
    assert (fallback.repo, fallback.confidence, fallback.test_only) == ("ms-user", "exact", False)
    assert fallback.symbol == "UserCommandController.updateUser"
    assert fallback.detail["queue"] == "fallback-user-queue"
    assert fallback.detail["emitter"] == "ms-user"  # SERVICE_NAME, a constant of another file
    assert fallback.detail["wrapper"] == at(USER_BASE, "JobsOutboxEntity.createJob<T>(")
    feedbacks = [s for s in r.producers if s.kind == "create_event"]
    assert {(s.confidence, s.detail["via"]) for s in feedbacks} == {("heuristic", "JOB_TO_EVENT_MAPPING")}
    assert where(r.consumers) == {
        ("handler", at(f"{WU}/handlers/fallback-update-user.handler.ts", "export class"), "user.fallback_update_user"),
        ("worker", at(FALLBACK_USER_WORKER, "export class"), "user.fallback_update_user"),
        ("post_processor", at(f"{WS}/ws-feedback.post-processor.ts", "export class"),
         "user.fallback_update_user_feedback"),
    }
    assert {(x.kind, x.name, x.consumers) for x in r.routes} == {
        ("queue", "fallback-user-queue", 1), ("stream", "stream:ws:event-created-feedback", 1)}
    assert hops(r) == {
        (1, "user.fallback_update_user", "event", "user:job:outbox:success"),
        (1, "user.fallback_update_user", "event", "user:job:outbox:failure"),
        (1, "user.fallback_update_user", "event", "user.fallback_update_user_feedback"),
        (1, "user.fallback_update_user_feedback", "ws_event", "ws.user.fallback_update_user"),  # WsFeedbackPP
        # the common success post-processor emits getEventForJob(jobType): only this job's entry
        (2, "user:job:outbox:success", "event", "user.fallback_update_user_feedback"),
    }
    assert {f.via for f in r.followups if f.depth == 1 and f.value == "user.fallback_update_user_feedback"} == {
        "worker FallbackUserWorker"}  # JOB_TO_EVENT_MAPPING is followed through its readers, not as a step
    assert {f.via for f in r.followups if f.value == "ws.user.fallback_update_user"} == {
        "post-processor WsFeedbackPostProcessor"}
    outcome = next(f for f in r.followups if f.value == "user:job:outbox:success")
    assert (f"{outcome.site.file}:{outcome.site.line}", outcome.confidence) == (
        at(USER_AUDIT_V2, "INSERT INTO event_queue", 1), "heuristic")
    # the only event whose type the index cannot resolve: PostRepository.publish(type) (a parameter)
    assert [(s.file, s.line, s.symbol) for s in r.unresolved] == [
        (POST_REPO, int(at(POST_REPO, "EventQueueEntity.createEvent({ type,").split(":")[1]), "PostRepository.publish")]


def test_a_member_value_or_qualified_name_names_only_the_job(rw: IndexService) -> None:
    for target in ("user.fallback_update_user", "JobMessagingType.FALLBACK_UPDATE_USER",
                   "UserJobType.FALLBACK_UPDATE_USER"):
        r = rw.analyze_impact(target)
        assert [(m.kind, m.value) for m in r.matches] == [("job", "user.fallback_update_user")], target
        assert {s.kind for s in r.producers} == {"fallback"}, target


def test_fallback_create_event_chain_to_the_websocket_message(rw: IndexService) -> None:
    """CRLF controller, fallback helper excluding 403, switch-routed worker, chain to the ws message."""
    r = rw.analyze_impact("JobMessagingType.FALLBACK_CREATE_EVENT", depth=3)
    assert [(m.kind, m.value) for m in r.matches] == [("job", "events.fallback_create_event")]
    assert where(r.producers) == {
        ("fallback", at(EVENT_CMD, "withFallback(JobMessagingType.FALLBACK_CREATE_EVENT"),
         "events.fallback_create_event")}
    assert r.producers[0].detail["queue"] == "fallback-event-queue"
    assert r.producers[0].detail["emitter"] == "ms-event"
    assert where(r.consumers) == {
        ("worker", at(f"{WE}/fallback-event.worker.ts", "export class"), "events.fallback_create_event")}
    assert r.consumers[0].detail["route"] == "switch"
    assert hops(r) == {
        (1, "events.fallback_create_event", "event", "event:job:outbox:success"),
        (1, "events.fallback_create_event", "event", "event:job:outbox:failure"),
        (2, "event:job:outbox:success", "event", "event.fallback_create_event_feedback"),
        (3, "event.fallback_create_event_feedback", "ws_event", "ws.event.fallback_create_event"),
    }
    ws = next(f for f in r.followups if f.kind == "ws_event")
    assert (ws.via, ws.site.kind, ws.site.symbol) == (
        "post-processor WsFeedbackPostProcessor", "ws_send", "WsFeedbackPostProcessor.processEvents")


def test_a_worker_reading_the_job_to_event_table_emits_only_for_the_jobs_it_routes(rw: IndexService) -> None:
    """getEventForJob(job.name) in FallbackUserWorker: FALLBACK_CREATE_EVENT never reaches that worker."""
    r = rw.analyze_impact("event.fallback_create_event_feedback")
    assert {s.symbol for s in r.producers} == {"JobOutboxSuccessPostProcessor.process"}
    delete = rw.analyze_impact("FALLBACK_DELETE_USER")
    assert not any(f.via.startswith("worker") for f in delete.followups)  # no entry for that job in the table


def test_fallback_delete_event_with_extra_payload_over_several_lines(rw: IndexService) -> None:
    r = rw.analyze_impact("FALLBACK_DELETE_EVENT")
    # the site is the call (its first line), the type is its first argument on the next line
    assert where(r.producers) == {("fallback", at(EVENT_CMD, "return this.withFallback(", 2),
                                   "events.fallback_delete_event")}
    assert where(r.consumers) == {
        ("worker", at(f"{WE}/fallback-event.worker.ts", "export class"), "events.fallback_delete_event")}


def test_aliased_import_producer_and_handler_declared_on_the_domain_enum(rw: IndexService) -> None:
    r = rw.analyze_impact("FALLBACK_DELETE_USER")
    assert where(r.producers) == {
        ("fallback", at(ACCOUNT_CMD, "withFallback(JMT.FALLBACK_DELETE_USER"), "user.fallback_delete_user")}
    assert where(r.consumers) == {
        ("handler", at(f"{WU}/handlers/fallback-delete-user.handler.ts", "export class"), "user.fallback_delete_user"),
        ("worker", at(f"{WU}/workers/fallback-user.worker.ts", "export class"), "user.fallback_delete_user"),
    }


def test_job_produced_only_by_the_test_controller(rw: IndexService) -> None:
    r = rw.analyze_impact("SEND_WELCOME_EMAIL")
    assert r.producers == []
    assert any("only in tests" in n for n in r.notes)
    assert where(r.consumers) == {
        ("handler", at(f"{WU}/handlers/send-welcome-email.handler.ts", "export class"), "user.send_welcome_email"),
        ("worker", at(f"{WU}/workers/user.worker.ts", "export class"), "user.send_welcome_email"),
    }
    with_tests = rw.analyze_impact("SEND_WELCOME_EMAIL", include_tests=True)
    assert where(with_tests.producers) == {
        ("create_job", at(USER_TEST_CTRL, "createJob<typeof JobMessagingType.SEND_WELCOME_EMAIL>"),
         "user.send_welcome_email")}
    assert with_tests.producers[0].test_only is True


def test_handler_no_worker_routes_and_queue_no_worker_listens_to(rw: IndexService) -> None:
    r = rw.analyze_impact("SYNC_EXTERNAL_CALENDAR")
    assert where(r.producers) == {("create_job", at(EVENT_SERVICE, "JobsOutboxEntity.createJob({"),
                                   "events.sync_external_calendar")}
    assert r.producers[0].detail["queue"] == "calendar-queue"
    assert where(r.consumers) == {("handler", at(f"{WE}/handlers/sync-external-calendar.handler.ts", "export class"),
                                   "events.sync_external_calendar")}
    assert "worker_class" not in r.consumers[0].detail
    q = rw.analyze_impact("calendar-queue")
    assert [(m.kind, m.value) for m in q.matches] == [("queue", "calendar-queue")]
    assert where(q.producers) == where(r.producers)
    assert q.consumers == []


def test_namespace_import_producer_and_the_first_audit_trigger_of_its_service(rw: IndexService) -> None:
    """ms-post still runs the first audit trigger: its jobs end as job.outbox.success / job.outbox.failed."""
    r = rw.analyze_impact("MODERATE_POST")
    assert where(r.producers) == {("create_job", at(POST_SERVICE, "JobsOutboxEntity.createJob({"),
                                   "post.moderate_post")}
    assert (r.producers[0].detail["queue"], r.producers[0].detail["emitter"]) == ("post-queue", "ms-post")
    assert r.consumers == []
    assert hops(r) == {(1, "post.moderate_post", "event", "job.outbox.success"),
                       (1, "post.moderate_post", "event", "job.outbox.failed")}
    assert {(f.confidence, f.site.file) for f in r.followups} == {("exact", POST_TABLES)}


def test_other_services_jobs_do_not_get_the_outcome_names_of_ms_post(rw: IndexService) -> None:
    for target, domain in (("GEOCODE_EVENT", "event"), ("FALLBACK_DELETE_USER", "user")):
        r = rw.analyze_impact(target)
        outcomes = {f.value for f in r.followups if f.via.startswith("audit trigger")}
        assert outcomes == {f"{domain}:job:outbox:success", f"{domain}:job:outbox:failure"}, target


def test_job_type_read_from_a_ranking_kind_table(rw: IndexService) -> None:
    """RANKING_JOB_BY_KIND[kind] with RANKING_QUEUE_BY_KIND[kind]: indirect producers, each with its own queue."""
    r = rw.analyze_impact("COMPUTE_USER_FEED")
    assert where(r.producers) == {
        ("create_job", at(RANKING_SERVICE, "JobsOutboxEntity.createJob({"), "ranking.compute_user_feed"),
        ("create_job", at(f"{WR}/domain/ranking-job-writer.ts", "JobsOutboxEntity.createJob({"),
         "ranking.compute_user_feed"),
    }
    assert {(s.confidence, s.detail["via"], s.detail["queue"]) for s in r.producers} == {
        ("heuristic", "RANKING_JOB_BY_KIND", "ranking-feed-queue")}
    assert where(r.consumers) == {
        ("handler", at(f"{WR}/workers/handlers/compute-user-feed.handler.ts", "export class"),
         "ranking.compute_user_feed"),
        ("worker", at(f"{WR}/workers/ranking-feed.worker.ts", "export class"), "ranking.compute_user_feed"),
    }
    assert {x.name for x in r.routes} == {"ranking-feed-queue"}
    ranking = rw.analyze_impact("COMPUTE_USER_RANKING")
    assert {s.detail["queue"] for s in ranking.producers} == {"ranking-queue"}
    assert {x.name for x in ranking.routes} == {"ranking-queue"}


def test_fanout_written_by_a_post_processor_and_followed_through_the_handlers_writer(rw: IndexService) -> None:
    r = rw.analyze_impact("FANOUT_RANKING")
    assert where(r.producers) == {
        ("create_job", at(f"{PPR}/post-processors/ranking-user-created.post-processor.ts", "createJob({"),
         "ranking.fanout_ranking")}
    assert where(r.consumers) == {
        ("handler", at(f"{WR}/workers/handlers/fanout-ranking.handler.ts", "export class"), "ranking.fanout_ranking"),
        ("worker", at(f"{WR}/workers/ranking.worker.ts", "export class"), "ranking.fanout_ranking"),
    }
    via_writer = {(f.value, f.confidence, f.via) for f in r.followups if "RankingJobWriter" in f.via}
    # the writer's type is RANKING_JOB_BY_KIND[kind]; the handler calls write(RankingListKind.FEED, ...)
    assert via_writer == {
        ("ranking.compute_user_feed", "heuristic", "handler FanoutRankingHandler via RankingJobWriter")}


# -- events, streams ------------------------------------------------------------------------------


def test_user_created_trigger_two_consumer_groups_and_what_they_emit(rw: IndexService) -> None:
    r = rw.analyze_impact("USER_CREATED", depth=2)
    assert {(m.kind, m.value) for m in r.matches} == {("event", "user.created"), ("stream", "stream:user:created")}
    trigger = at(USER_CREATED_TRIGGER, "CREATE TRIGGER user_created_event_trigger")
    assert where(r.producers) == {("sql_trigger", trigger, "user.created")}
    site = r.producers[0]
    assert (site.detail["emitter"], site.detail["stream"]) == ("ms-user", "stream:user:created")
    assert site.detail["defined_in"] == at(USER_TABLES, "INSERT INTO event_queue (type, emitter", 1)
    user_pp = at(f"{PPR}/post-processors/user-created.post-processor.ts", "export class")
    ranking_pp = at(f"{PPR}/post-processors/ranking-user-created.post-processor.ts", "export class")
    assert {(k, w) for k, w, _v in where(r.consumers)} == {("post_processor", user_pp), ("post_processor", ranking_pp)}
    groups = {s.detail["post_processor_class"]: s.detail["group"] for s in r.consumers}
    assert groups == {"UserCreatedPostProcessor": "post-processor-user",
                      "RankingUserCreatedPostProcessor": "post-processor-ranking"}
    assert {s.detail["stream"] for s in r.consumers} == {"stream:user:created"}
    assert (1, "user.created", "job", "ranking.fanout_ranking") in hops(r)
    assert {(d, f, k, v) for d, f, k, v in hops(r) if d == 2 and f == "ranking.fanout_ranking" and k == "event"} == {
        (2, "ranking.fanout_ranking", "event", "ranking:job:outbox:success"),
        (2, "ranking.fanout_ranking", "event", "ranking:job:outbox:failure"),
    }


def test_event_created_reaches_three_consumers_on_two_streams(rw: IndexService) -> None:
    r = rw.analyze_impact("EVENT_CREATED")
    assert {(m.kind, m.value) for m in r.matches} == {
        ("event", "event.created"), ("ws_event", "ws.event.created"), ("stream", "stream:event:successfully_created")}
    assert where(r.producers) == {
        ("create_event", at(EVENT_REPO, "const outboxEvent = EventQueueEntity.createEvent"), "event.created"),
        ("ws_send", at(f"{WS}/ws-event-created.post-processor.ts", "this.gateway.sendToUser"), "ws.event.created"),
        ("ws_send", at(f"{WS}/ws-feedback.post-processor.ts", "this.gateway.sendToUser"), "ws.event.created"),
    }
    event_consumers = {s.detail["post_processor_class"] for s in r.consumers if s.value == "event.created"}
    assert event_consumers == {"EventCreatedPostProcessor", "WsEventCreatedPostProcessor", "WsFeedbackPostProcessor"}
    stream_consumers = {s.detail["post_processor_class"] for s in r.consumers
                        if s.value == "stream:event:successfully_created"}
    assert stream_consumers == {"EventCreatedPostProcessor", "WsEventCreatedPostProcessor"}
    assert {(x.name, x.consumers) for x in r.routes} == {
        ("stream:event:successfully_created", 2), ("stream:ws:event-created-feedback", 1)}
    assert hops(r) == {(1, "event.created", "ws_event", "ws.event.created")}
    assert {f.via for f in r.followups} == {"post-processor WsEventCreatedPostProcessor",
                                            "post-processor WsFeedbackPostProcessor"}


def test_a_literal_equal_to_a_member_name_is_its_own_undeclared_type(rw: IndexService) -> None:
    r = rw.analyze_impact("EVENT_UPDATED")
    assert {(m.kind, m.value) for m in r.matches} == {
        ("event", "event.updated"), ("stream", "stream:event:updated"), ("event", "EVENT_UPDATED")}
    by_value = {v: (k, w) for k, w, v in where(r.producers)}
    assert by_value == {
        "event.updated": ("sql_trigger", at(EVENT_UPDATED_TRIGGER, "CREATE TRIGGER event_updated_event_trigger")),
        "EVENT_UPDATED": ("create_event", at(EVENT_REPO, "EventQueueEntity.createEvent({", 2)),
    }
    assert any("'EVENT_UPDATED'" in n and "member name" in n for n in r.notes)
    declared = rw.analyze_impact("event.updated")
    assert [s.value for s in declared.producers] == ["event.updated"]


def test_job_failure_event_has_no_consumer_bug_p4(rw: IndexService) -> None:
    r = rw.analyze_impact("user:job:outbox:failure")
    assert where(r.producers) == {("sql_trigger", at(USER_AUDIT_V2, "INSERT INTO event_queue", 2),
                                   "user:job:outbox:failure")}
    site = r.producers[0]
    assert (site.confidence, site.detail["status"], site.detail["emitter"], site.detail["table"]) == (
        "heuristic", "FAILED", "ms-user", "job_audit")
    assert r.consumers == []
    assert [(x.name, x.producers, x.consumers) for x in r.routes] == [("stream:user:job:outbox:failure", 1, 0)]


def test_job_success_event_read_by_the_common_post_processor(rw: IndexService) -> None:
    r = rw.analyze_impact("event:job:outbox:success")
    assert where(r.producers) == {("sql_trigger", at(EVENT_AUDIT_V2, "INSERT INTO event_queue", 1),
                                   "event:job:outbox:success")}
    assert {(s.kind, s.detail["post_processor_class"], s.detail["stream"]) for s in r.consumers} == {
        ("post_processor", "JobOutboxSuccessPostProcessor",
         "stream:event:job:outbox:success, stream:user:job:outbox:success")}
    assert r.consumers[0].detail["patterns"] == "endsWith::job:outbox:success"


def test_stream_named_without_its_prefix(rw: IndexService) -> None:
    r = rw.analyze_impact("ws:event-created-feedback")
    assert [(m.kind, m.value) for m in r.matches] == [("stream", "stream:ws:event-created-feedback")]
    assert {(s.kind, s.value, s.symbol) for s in r.producers} == {
        ("create_event", "event.created", "EventRepository.insert"),
        ("create_event", "event.fallback_create_event_feedback", "JobOutboxSuccessPostProcessor.process"),
        ("create_event", "user.fallback_update_user_feedback", "JobOutboxSuccessPostProcessor.process"),
        ("create_event", "user.fallback_update_user_feedback", "FallbackUserWorker.notify"),
    }
    assert where(r.consumers) == {("post_processor", at(f"{WS}/ws-feedback.post-processor.ts", "export class"),
                                   "stream:ws:event-created-feedback")}
    consumer = r.consumers[0]
    assert (consumer.detail["group"], consumer.detail["binding"]) == (
        "ws-service-feedback", "new WsFeedbackPostProcessor(...) options")


def test_batch_post_processor_with_its_group_from_a_config_file(rw: IndexService) -> None:
    r = rw.analyze_impact("post.created")
    assert where(r.producers) == {("create_event", at(POST_REPO, "EventQueueEntity.createEvent({"), "post.created")}
    assert where(r.consumers) == {
        ("post_processor", at(f"{PPR}/post-processors/post-created.batch-post-processor.ts", "export class"),
         "post.created")}
    pp = r.consumers[0]
    assert (pp.detail["stream"], pp.detail["group"]) == ("stream:post-created", "post-processor-post")
    assert "group from a config file" in pp.detail["binding"]


def test_domain_trigger_function_whose_second_argument_is_the_stream(rw: IndexService) -> None:
    r = rw.analyze_impact("post.updated")
    assert where(r.producers) == {("sql_trigger", at(POST_CDC, "CREATE TRIGGER post_updated_event_trigger"),
                                   "post.updated")}
    site = r.producers[0]
    assert (site.detail["emitter"], site.detail["stream"], site.detail["function"]) == (
        "ms-post", "stream:post-created", "create_post_event_queue_record")
    assert site.detail["defined_in"] == at(POST_CDC, "INSERT INTO event_queue")
    assert {s.detail["post_processor_class"] for s in r.consumers} == {"PostCreatedBatchPostProcessor"}


def test_post_processor_in_a_file_with_conflict_markers_that_nothing_starts(rw: IndexService) -> None:
    r = rw.analyze_impact("user.updated")
    digest = "post-processors-runner/src/legacy/digest.post-processor.ts"
    assert r.index.parse_error_files == [digest]
    assert any("syntax errors" in n for n in r.notes)
    assert where(r.consumers) == {("post_processor", at(digest, "export class"), "user.updated")}
    assert (r.consumers[0].confidence, r.consumers[0].detail.get("started")) == ("heuristic", "no")
    assert {(x.name, x.consumers) for x in r.routes} == {("stream:user:updated", 0)}


# -- the catalogue ----------------------------------------------------------------------------------


def test_catalogue_orphans_are_the_experts_list(rw: IndexService) -> None:
    cat = rw.catalogue(orphans_only=True, with_checks=False)
    got = {(e.kind, e.value): e.reasons for e in cat.entries}
    expected = {
        ("job", "events.publish_event"): ["only test producers (1)"],
        ("job", "user.send_welcome_email"): ["only test producers (1)"],
        ("job", "events.sync_external_calendar"): ["handler SyncExternalCalendarHandler not routed by any worker"],
        ("job", "post.fallback_create_post"): ["no handler"],
        ("job", "post.moderate_post"): ["no handler"],
        ("job", "ranking.fallback_recompute_ranking"): ["no producer"],
        ("job", "user.fallback_get_user"): ["no producer"],
        ("job", "user.fallback_sign_up"): ["no producer", "no handler"],
        ("event", "EVENT_UPDATED"): [
            "not declared: 'EVENT_UPDATED' is the member name of EventEventMessagingType.EVENT_UPDATED "
            "(value 'event.updated'), not a value", "no consumer (no post-processor accepts it)"],
        ("event", "event.geocoded"): ["no consumer (no post-processor accepts it)"],
        ("event", "event.updated"): ["no consumer (no post-processor accepts it)"],
        ("event", "event:job:outbox:failure"): ["no consumer (no post-processor accepts it)"],
        ("event", "job.outbox.failed"): ["no consumer (no post-processor accepts it)"],
        ("event", "job.outbox.success"): ["no consumer (no post-processor accepts it)"],
        ("event", "ranking:job:outbox:failure"): ["no consumer (no post-processor accepts it)"],
        ("event", "ranking:job:outbox:success"): ["no consumer (no post-processor accepts it)"],
        ("event", "user.deleted"): ["no consumer (no post-processor accepts it)"],
        ("event", "user.updated"): ["no consumer (post-processor DigestPostProcessor accepts it but nothing "
                                    "starts it)"],
        ("event", "user:job:outbox:failure"): ["no consumer (no post-processor accepts it)"],
        ("queue", "calendar-queue"): ["no worker listens"],
        ("queue", "fallback-post-queue"): ["no worker listens"],
        ("queue", "post-queue"): ["no worker listens"],
        ("queue", "fallback-ranking-queue"): ["no producer targets it"],
        ("queue", "user-queue"): ["only test producers target it (1)"],
        ("stream", "stream:event:geocoded"): ["no consumer group (no post-processor reads it)"],
        ("stream", "stream:event:job:outbox:failed"): ["no consumer group (no post-processor reads it)",
                                                       "nothing writes to it"],
        ("stream", "stream:event:job:outbox:failure"): ["no consumer group (no post-processor reads it)"],
        ("stream", "stream:event:updated"): ["no consumer group (no post-processor reads it)"],
        ("stream", "stream:job.outbox.failed"): ["no consumer group (no post-processor reads it)"],
        ("stream", "stream:job.outbox.success"): ["no consumer group (no post-processor reads it)"],
        ("stream", "stream:ranking:job:outbox:failure"): ["no consumer group (no post-processor reads it)"],
        ("stream", "stream:ranking:job:outbox:success"): ["no consumer group (no post-processor reads it)"],
        ("stream", "stream:user:deleted"): ["no consumer group (no post-processor reads it)"],
        ("stream", "stream:user:job:outbox:failed"): ["nothing writes to it"],
        ("stream", "stream:user:job:outbox:failure"): ["no consumer group (no post-processor reads it)"],
        ("stream", "stream:user:updated"): [
            "no consumer group (post-processor DigestPostProcessor reads it but nothing starts it)"],
    }
    assert got == expected


def test_catalogue_counts_of_the_wired_flows(rw: IndexService) -> None:
    cat = rw.catalogue(with_checks=False)
    counts = {(e.kind, e.value): (e.producers, e.test_producers, e.consumers) for e in cat.entries}
    assert counts[("job", "user.fallback_update_user")] == (1, 0, 1)
    assert counts[("job", "ranking.compute_user_feed")] == (2, 0, 1)
    assert counts[("queue", "ranking-queue")] == (3, 0, 1)
    assert counts[("queue", "ranking-feed-queue")] == (2, 0, 1)
    assert counts[("event", "user.created")] == (1, 0, 2)
    assert counts[("event", "event:job:outbox:success")] == (1, 0, 1)
    assert counts[("event", "user:job:outbox:success")] == (1, 0, 1)
    assert counts[("stream", "stream:ws:event-created-feedback")] == (4, 0, 1)
    assert counts[("ws_event", "ws.event.created")] == (2, 0, 0)  # two post-processors send it
    assert not any(e.kind == "stream" and not e.value.startswith("stream:") for e in cat.entries)


def test_unresolved_is_the_parameter_typed_helper_and_not_the_library_plumbing(rw: IndexService) -> None:
    """EventQueueEntity.createFollowUp forwards its caller's params to createEvent: not a producer, not unresolved.
    PostRepository.publish(type) is: its type is a parameter (the callers' values are not followed)."""
    idx = rw.linked()
    assert {k: [f"{s.file}:{s.line}" for s in v] for k, v in idx.unresolved.items() if v} == {
        "event": [at(POST_REPO, "EventQueueEntity.createEvent({ type,")]}
    site = idx.unresolved["event"][0]
    assert (site.detail["raw"], site.detail["reason"], site.detail["stream"]) == (
        "type", "a function parameter: the value comes from the callers", "stream:post-created")
    r = rw.analyze_impact("post.updated")
    assert [s.symbol for s in r.unresolved] == ["PostRepository.publish"]
    assert any("could not be resolved" in n for n in r.notes)
    jobs = rw.analyze_impact("MODERATE_POST")
    assert jobs.unresolved == []  # an event's unresolved site is not listed for a job


def test_outbox_runner_and_package_without_name_add_nothing(rw: IndexService) -> None:
    idx = rw.linked()
    files = {s.file for sites in idx.producers.values() for s in sites}
    assert not any(f.startswith("outbox-runners/") for f in files)
    assert rw.package_dir_of("outbox-runners/outbox-user/src/main.ts") == ""
    assert rw.info().parse_errors == 1


def test_repository_of_each_site_is_its_git_root(rw: IndexService) -> None:
    r = rw.analyze_impact("GEOCODE_EVENT")
    assert {(s.kind, s.repo) for s in [*r.producers, *r.consumers]} == {
        ("create_job", "ms-event"), ("handler", "workers-runners"), ("worker", "workers-runners")}
    assert r.matches[0].defined_at is not None and r.matches[0].defined_at.repo == "npm-packages"
    assert (1, "events.geocode_event", "event", "event.geocoded") in hops(r)


def test_cli_impact_on_the_realistic_workspace(rw: IndexService, tmp_path: Path) -> None:
    """The human command prints the same producers (smoke test of the table output on this shape)."""
    from tools.mesh_index.render import impact_text

    text = impact_text(rw.analyze_impact("FALLBACK_UPDATE_USER"))
    assert "UserCommandController.updateUser" in text
    assert "fallback-user-queue" in text
