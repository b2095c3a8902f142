"""The demo's job-outcome stream entries are the runner's: the trigger's row, every stream-entry field."""

from __future__ import annotations

import json

import redis

from server.demo.command import DemoRun
from server.demo.seed import EMITTER

# target-system.md, "Redis keys": the fields of every stream entry
ENTRY_FIELDS = {"id", "type", "emitter", "emitterId", "correlationId", "traceId", "traceparent", "version",
                "createdAt", "payload", "event"}


def test_outcome_entries_follow_the_conventions_and_carry_every_field(demo_run: DemoRun) -> None:
    conv = demo_run.settings.conventions
    domain = EMITTER.removeprefix("ms-")
    success = {t.replace("{domain}", domain) for t in conv.job_success_types}
    failure = {t.replace("{domain}", domain) for t in conv.job_failure_types}
    client = redis.Redis.from_url(demo_run.settings.redis.url, decode_responses=True)
    try:
        keys = [k for k in demo_run.scenario.redis_keys if client.type(k) == "stream"]
        found: dict[str, list[dict[str, str]]] = {}
        for key in keys:
            for _, fields in client.xrange(key):
                if fields.get("type") in success | failure:
                    # the trigger's target_services is the type: the runner pushes to stream_prefix + type
                    assert key == conv.stream_prefix + fields["type"], key
                    found.setdefault(fields["type"], []).append(fields)
    finally:
        client.close()
    assert set(found) == {f"{domain}:job:outbox:success", f"{domain}:job:outbox:failure"}
    for entries in found.values():
        for fields in entries:
            assert set(fields) == ENTRY_FIELDS, sorted(set(fields) ^ ENTRY_FIELDS)
            payload = json.loads(fields["payload"])
            assert set(payload) == {"before", "after"}
            assert fields["emitterId"] == payload["after"]["job_id"]  # the latest trigger sets the job id
            assert fields["emitter"] == EMITTER and fields["version"] == "1" and fields["createdAt"].isdigit()
            assert fields["traceparent"] == "" and fields["traceId"] == ""  # NULL on trigger-written rows
            event = json.loads(fields["event"])
            assert event["id"] == fields["id"] and event["payload"] == payload
