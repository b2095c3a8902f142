"""list_catalogue and follow-ups on the fixture workspace: orphans with their reasons, depth-2 chains."""

from __future__ import annotations

EXPECTED_ORPHANS = {
    # the createJob({ type: 'SYNC_CALENDAR' }) literal is its own value, and the member name of a declared job
    ("job", "SYNC_CALENDAR"): ["not declared: 'SYNC_CALENDAR' is the member name of EventsJobType.SYNC_CALENDAR "
                               "(value 'events.sync_calendar'), not a value", "no handler"],
    ("job", "events.publish_event"): ["no producer"],
    ("job", "events.sync_calendar"): ["no producer", "handler SyncCalendarHandler not routed by any worker"],
    ("job", "social.follow_user"): ["no producer", "no handler"],
    ("job", "users.fallback_sign_up"): ["no producer", "no handler"],
    ("job", "users.fallback_update_user"): [
        "producers target queue fallback-user-queue but its worker listens on user-queue"],
    ("job", "users.send_welcome_email"): ["only test producers (1)"],
    ("event", "event.archived"): ["no consumer (no post-processor accepts it)"],
    ("event", "event.updated"): ["no consumer (no post-processor accepts it)"],
    ("event", "event:job:outbox:failure"): ["no consumer (no post-processor accepts it)"],
    ("event", "job.outbox.failed"): ["no producer", "no consumer (no post-processor accepts it)"],
    ("event", "job.outbox.success"): ["no producer"],
    ("event", "requirement.changed"): ["no consumer (no post-processor accepts it)"],
    ("event", "tag.changed"): ["no consumer (no post-processor accepts it)"],
    ("event", "user:job:outbox:failure"): ["no consumer (no post-processor accepts it)"],
    ("event", "user:job:outbox:success"): ["no consumer (no post-processor accepts it)"],
    ("queue", "archive-queue"): ["no worker listens", "no producer targets it"],
    ("queue", "fallback-user-queue"): ["no worker listens"],
    ("queue", "user-queue"): ["only test producers target it (1)"],
    ("stream", "stream:event:archive"): ["no consumer group (no post-processor reads it)"],
    ("stream", "stream:event:job:outbox:failure"): ["no consumer group (no post-processor reads it)"],
    ("stream", "stream:misc:unused"): ["no consumer group (no post-processor reads it)", "nothing writes to it"],
    ("stream", "stream:user:job:outbox:failure"): ["no consumer group (no post-processor reads it)"],
    ("stream", "stream:user:job:outbox:success"): ["no consumer group (no post-processor reads it)"],
    # a mapping table entry is not a producer, and no code of this fixture sends a websocket message
    ("ws_event", "ws.event.created"): ["no producer (no code sends it)"],
    ("ws_event", "ws.event.fallback_create_event"): ["no producer (no code sends it)"],
}


def test_orphans_and_reasons(shared_service):
    cat = shared_service.catalogue(orphans_only=True)
    assert {(e.kind, e.value): e.reasons for e in cat.entries} == EXPECTED_ORPHANS
    assert cat.orphans == len(EXPECTED_ORPHANS)
    assert all(e.orphan for e in cat.entries)


def test_full_catalogue_counts(shared_service):
    cat = shared_service.catalogue()
    assert cat.counts == {"job": 10, "event": 14, "ws_event": 2, "queue": 5, "stream": 9}
    entries = {(e.kind, e.value): e for e in cat.entries}
    geocode = entries[("job", "events.geocode_event")]
    assert (geocode.producers, geocode.consumers, geocode.test_producers, geocode.orphan) == (1, 1, 1, False)
    assert geocode.name == "EventsJobType.GEOCODE_EVENT"
    assert geocode.defined_at.file.endswith("jobs/event/payloads.ts")
    switch_only = entries[("job", "events.fallback_delete_event")]
    assert (switch_only.producers, switch_only.consumers, switch_only.orphan) == (1, 1, False)
    ws = entries[("ws_event", "ws.event.created")]
    assert (ws.producers, ws.orphan) == (0, True)  # a mapping table entry is not a producer; nothing sends it
    stream = entries[("stream", "stream:event:events")]
    assert stream.name == "EventStream.EVENT_EVENTS" and stream.consumers == 2


def test_catalogue_kind_filter(shared_service):
    cat = shared_service.catalogue(kind="queue")
    assert {e.value for e in cat.entries} == {"event-queue", "fallback-event-queue", "archive-queue",
                                              "user-queue", "fallback-user-queue"}
    assert cat.counts == {"queue": 5}


def _chain(result):
    return {(f.depth, f.from_value, f.kind, f.value, f.via, f.confidence) for f in result.followups}


def test_depth_two_followups_of_a_fallback_job(shared_service):
    r = shared_service.analyze_impact("events.fallback_create_event", depth=2)
    audit = "audit trigger notify_job_audit_status_change on status"
    assert _chain(r) == {
        (1, "events.fallback_create_event", "event", "event:job:outbox:success", f"{audit} COMPLETED", "heuristic"),
        (1, "events.fallback_create_event", "event", "event:job:outbox:failure", f"{audit} FAILED", "heuristic"),
        # the common post-processor emits getEventForJob(job): only this job's mapped event is followed (the
        # table JOB_TO_EVENT_MAPPING itself is not a step: the code reading it is)
        (2, "event:job:outbox:success", "event", "event.fallback_create_event_feedback",
         "post-processor JobOutboxSuccessPostProcessor", "heuristic"),
    }
    r3 = shared_service.analyze_impact("events.fallback_create_event", depth=3)
    assert (3, "event.fallback_create_event_feedback", "ws_event", "ws.event.fallback_create_event",
            "mapping EVENT_TO_WS_EVENT_MAPPING", "exact") in _chain(r3)  # a table no code reads: followed as is
    assert all(f.site.file and f.site.line > 0 for f in r.followups)


def test_depth_limits_followups(shared_service):
    r1 = shared_service.analyze_impact("events.fallback_create_event", depth=1)
    assert {f.depth for f in r1.followups} == {1} and len(r1.followups) == 2
    assert shared_service.analyze_impact("events.fallback_create_event", depth=0).followups == []


def test_handler_emissions_are_followed(shared_service):
    r = shared_service.analyze_impact("GEOCODE_EVENT", depth=2)
    assert {(f.depth, f.kind, f.value, f.via) for f in r.followups} == {
        (1, "event", "event.geocoded", "handler GeocodeEventHandler"),
        (1, "event", "event:job:outbox:success",
         "audit trigger notify_job_audit_status_change on status COMPLETED"),
        (1, "event", "event:job:outbox:failure", "audit trigger notify_job_audit_status_change on status FAILED"),
    }
    handler_step = next(f for f in r.followups if f.value == "event.geocoded")
    assert handler_step.confidence == "exact"
    assert handler_step.site.file.endswith("geocode-event.handler.ts") and handler_step.site.line == 12
