"""Promise: a dead letter is never replayed twice. Before a replay step runs, ``earlier_replay`` looks
in the audit log and in the target stream (real Redis, real audit log) for that replay already done,
and a scan it cannot finish stops the replay (seeing nothing is no proof). ``prior_replays`` lets
the planner see what earlier plans replayed.

Stream ids are explicit, so "before" and "after" the dead letter and the plan are exact.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import redis

from server.approval.audit import audit_log, audit_path
from server.connections import Connections
from tests.remediation.conftest import settings_for
from tools.remediation.model import ReplayMessage, XAddOp
from tools.remediation.replays import CLOCK_MARGIN_MS, earlier_replay, prior_replays, replay_state

pytestmark = pytest.mark.anyio

STREAM, DLQ = "stream:event:created", "stream:event:created-dlq"
PLAN, OTHER = "p-20261201-100000-0a1b2c3d", "p-20261201-090000-0f0f0f0f"
T = 1_800_000_000_000  # the dead letter's millisecond
DLQ_ID = f"{T}-5"
PROPOSED = T + 1000  # the plan was proposed a second after the dead letter


def _op(*messages: ReplayMessage) -> XAddOp:
    return XAddOp(stream=STREAM, maxlen=None, messages=list(messages) or [_message()])


def _message(dlq_id: str = DLQ_ID, event: str | None = "ev-1", message_id: str = f"{T - 10}-0") -> ReplayMessage:
    fields = ([("id", event)] if event else []) + [("type", "user:created"), ("payload", "{}")]
    return ReplayMessage(dlq_key=DLQ, dlq_id=dlq_id, message_id=message_id, source="stream", fields=fields)


async def _guard(settings, op: XAddOp, proposed_ms: int = PROPOSED, scanned: dict[str, str] | None = None,
                 plan_id: str = PLAN) -> str | None:
    connections = Connections(settings)
    try:
        return await earlier_replay(connections.redis(), settings, audit_log(settings), plan_id, op, proposed_ms,
                                    scanned)
    finally:
        await connections.aclose()


def _add(client: redis.Redis, entry_id: str, event: str | None = "ev-1", **extra: str) -> None:
    fields: dict[str, Any] = ({"id": event} if event else {}) | {"type": "user:created", "payload": "{}"} | extra
    client.xadd(STREAM, fields, id=entry_id)


async def test_nothing_replayed_yet(settings, redis_client) -> None:
    _add(redis_client, f"{T - 10}-0")  # the original message, before its dead letter
    _add(redis_client, f"{T}-3")  # a retry of it, still before the dead letter
    _add(redis_client, f"{T + 5}-0", event="ev-2")  # another event after it
    _add(redis_client, f"{T + 6}-0", event="ev-1", payload="{\"other\": 1}")  # no: another event id would match...
    assert await _guard(settings, _op(_message(event="ev-9"))) is None  # ...but this plan replays ev-9


async def test_the_audit_log_of_this_plan_or_of_that_dead_letter(settings, redis_client) -> None:
    audit = audit_log(settings)
    audit.record("step", plan_id=PLAN, result="done")  # another event of this plan: not a replay
    audit.record("replayed", plan_id=OTHER, dlq_key=DLQ, dlq_id=f"{T}-6", new_id="9-0")  # another dead letter
    audit.record("replayed", plan_id=OTHER, dlq_key="other-dlq", dlq_id=DLQ_ID, new_id="9-1")  # another DLQ
    assert await _guard(settings, _op()) is None
    record = audit.record("replayed", plan_id=OTHER, dlq_key=DLQ, dlq_id=DLQ_ID, new_id=f"{T + 50}-0")
    assert await _guard(settings, _op()) == (
        f"the audit log records that dead letter {DLQ_ID} was already replayed as {T + 50}-0 (plan {OTHER}, "
        f"{record['time']}): a replay is never delivered twice; check whether it was processed, then propose the "
        "remediation again")


async def test_the_audit_log_of_this_plan_whatever_dead_letter_it_names(settings, redis_client) -> None:
    audit = audit_log(settings)
    assert await _guard(settings, _op()) is None
    mine = audit.record("replayed", plan_id=PLAN, dlq_key="some-dlq", dlq_id="1-1", new_id="2-2")
    found = await _guard(settings, _op())  # this plan replayed already (a step re-run after a crash)
    assert found is not None and "dead letter 1-1 was already replayed as 2-2 " in found
    assert f"(plan {PLAN}, {mine['time']})" in found


async def test_the_stream_holds_the_replay_by_event_id_or_by_fields(settings, redis_client) -> None:
    _add(redis_client, f"{T - 10}-0")
    _add(redis_client, f"{T + 7}-0", payload="{\"changed\": true}")  # same event id, other payload: re-sent
    assert await _guard(settings, _op()) == (
        f"{STREAM} already holds entry {T + 7}-0 carrying the same original id ev-1 as dead letter {DLQ_ID}, added "
        "after it was dead-lettered: it was replayed (or re-sent) already; a replay is never delivered twice")
    redis_client.delete(STREAM)
    _add(redis_client, f"{T + 8}-0", event=None)  # no event id: the exact same fields
    assert await _guard(settings, _op(_message(event=None))) == (
        f"{STREAM} already holds entry {T + 8}-0 carrying the same original id (same fields) as dead letter "
        f"{DLQ_ID}, added after it was dead-lettered: it was replayed (or re-sent) already; a replay is never "
        "delivered twice")


async def test_only_what_came_after_the_dead_letter_counts(settings, redis_client) -> None:
    _add(redis_client, f"{T}-4")  # same event, same millisecond, before the dead letter (a retry)
    _add(redis_client, DLQ_ID)  # same id as the dead letter: not after it
    assert await _guard(settings, _op()) is None
    _add(redis_client, f"{T}-6")  # one sequence number after it
    assert f"entry {T}-6 " in (await _guard(settings, _op()) or "")


async def test_the_original_message_itself_is_not_a_replay(settings, redis_client) -> None:
    """Clocks differ between streams: the original may carry an id after its dead letter's. It is skipped,
    and the scan goes on to the real replay after it."""
    _add(redis_client, f"{T + 10}-0")
    assert await _guard(settings, _op(_message(message_id=f"{T + 10}-0"))) is None
    _add(redis_client, f"{T + 20}-0")
    assert f"entry {T + 20}-0 " in (await _guard(settings, _op(_message(message_id=f"{T + 10}-0"))) or "")


async def test_the_scan_starts_a_clock_margin_before_the_proposal(settings, redis_client) -> None:
    """An old dead letter, a plan proposed much later: entries before ``proposed - margin`` are not read."""
    proposed = T + 10 * CLOCK_MARGIN_MS
    _add(redis_client, f"{proposed - CLOCK_MARGIN_MS - 1}-0")  # a re-send long before the plan: not looked at
    assert await _guard(settings, _op(), proposed_ms=proposed) is None
    _add(redis_client, f"{proposed - CLOCK_MARGIN_MS}-0")  # within the margin: seen
    assert f"entry {proposed - CLOCK_MARGIN_MS}-0 " in (await _guard(settings, _op(), proposed_ms=proposed) or "")
    assert CLOCK_MARGIN_MS == 300_000


async def test_each_message_is_matched_on_its_own_dead_letter(settings, redis_client) -> None:
    later = f"{T + 100}-0"
    op = _op(_message(), _message(dlq_id=later, event="ev-2", message_id=f"{T + 90}-0"))
    _add(redis_client, f"{T + 50}-0", event="ev-2")  # ev-2 re-sent before ITS dead letter: a retry, not a replay
    assert await _guard(settings, op) is None
    _add(redis_client, f"{T + 150}-0", event="ev-2")
    assert f"as dead letter {later}," in (await _guard(settings, op) or "")


async def test_a_scan_that_cannot_finish_stops_the_replay(tmp_path, redis_url, redis_client) -> None:
    narrow = settings_for(tmp_path, None, redis_url, limits={"max_count": 2, "scan_max_iterations": 2})
    for n in range(3):
        _add(redis_client, f"{T + 10 + n}-0", event=f"other-{n}")
    assert await _guard(narrow, _op()) is None  # 2 + 1: the second page was not full, the end was seen
    _add(redis_client, f"{T + 20}-0", event="other-3")
    assert await _guard(narrow, _op()) == (
        f"could not check {STREAM} for an earlier replay within [limits] scan_max_iterations x max_count entries: "
        "not replaying (seen nothing is no proof); propose again later or raise the limits")


async def test_a_second_look_resumes_where_the_first_ended(tmp_path, redis_url, redis_client) -> None:
    narrow = settings_for(tmp_path, None, redis_url, limits={"max_count": 2, "scan_max_iterations": 2})
    for n in range(3):
        _add(redis_client, f"{T + 10 + n}-0", event=f"other-{n}")
    scanned: dict[str, str] = {}
    assert await _guard(narrow, _op(), scanned=scanned) is None
    assert scanned == {STREAM: f"{T + 12}-0"}  # the last entry checked
    for n in range(3, 5):  # two more: a fresh look would need 3 pages, the resumed one reads 1
        _add(redis_client, f"{T + 10 + n}-0", event=f"other-{n}")
    assert (await _guard(narrow, _op())).startswith("could not check")  # type: ignore[union-attr]
    assert await _guard(narrow, _op(), scanned=scanned) is None
    assert scanned == {STREAM: f"{T + 14}-0"}
    _add(redis_client, f"{T + 30}-0")  # the replay itself, after the resumed point: still seen
    assert f"entry {T + 30}-0 " in (await _guard(narrow, _op(), scanned=scanned) or "")
    # a resume point before the scan's start is ignored: the scan starts at the dead letter
    assert f"entry {T + 30}-0 " in (await _guard(settings_for(tmp_path, None, redis_url), _op(),
                                                scanned={STREAM: f"{T - 100}-0"}) or "")


async def test_prior_replays_reads_the_latest_replay_of_each_dead_letter(settings) -> None:
    audit = audit_log(settings)
    audit.record("replayed", plan_id=OTHER, dlq_key=DLQ, dlq_id="1-0", new_id="10-0")
    audit.record("replayed", plan_id=PLAN, dlq_key=DLQ, dlq_id="1-0", new_id="11-0")  # replayed again later
    audit.record("replayed", plan_id=PLAN, dlq_key=DLQ, dlq_id="2-0", new_id="12-0")
    audit.record("replayed", plan_id=PLAN, dlq_key="other-dlq", dlq_id="3-0", new_id="13-0")
    audit.record("replayed", plan_id=PLAN, dlq_key=DLQ, new_id="14-0")  # no dead-letter id: not usable
    audit.record("step", plan_id=PLAN, dlq_key=DLQ, dlq_id="4-0")  # not a replay
    found = prior_replays(audit, DLQ)
    assert sorted(found) == ["1-0", "2-0"]
    assert found["1-0"]["new_id"] == "11-0" and found["1-0"]["plan_id"] == PLAN
    assert found["2-0"]["new_id"] == "12-0"
    assert prior_replays(audit, "nothing-dlq") == {}


async def test_a_flood_of_later_records_cannot_hide_a_replay(settings, redis_client) -> None:
    """Issue 32, attack 4: ~19,000 refusals of invented plans (one audit record each, 9 MiB) after a replay no
    longer push it out of what the guard reads: ``replayed`` records have their own index. The log's tail is
    still read for records written before the index existed."""
    audit = audit_log(settings)
    audit.record("replayed", plan_id=OTHER, dlq_key=DLQ, dlq_id=DLQ_ID, new_id=f"{T + 50}-0")
    assert sorted(prior_replays(audit, DLQ)) == [DLQ_ID]
    filler = (json.dumps({"event": "apply_refused", "plan_id": "p-20261130-000000-0badc0de", "result": "NotFound",
                          "detail": "plan p-20261130-000000-0badc0de not found " + "x" * 400}) + "\n").encode()
    with open(audit_path(settings), "ab") as fh:  # 9 MiB of later records, as many refusals write
        fh.write(filler * (9 * 1024 * 1024 // len(filler)))
    assert audit_path(settings).stat().st_size > 9 * 1024 * 1024
    assert sorted(prior_replays(audit, DLQ)) == [DLQ_ID]
    assert "already replayed" in (await _guard(settings, _op()) or "")  # not in the stream: the index says so
    legacy = audit_path(settings).parent / "old" / "audit.log"  # written before the index: its tail still counts
    legacy.parent.mkdir()
    legacy_log = type(audit)(legacy)
    legacy.write_bytes(json.dumps({"event": "replayed", "plan_id": OTHER, "dlq_key": DLQ, "dlq_id": "7-0",
                                   "new_id": "8-0", "seq": 1}).encode() + b"\n")
    assert sorted(prior_replays(legacy_log, DLQ)) == ["7-0"]


async def test_an_empty_event_id_is_not_an_event_id(settings, redis_client) -> None:
    """A message whose id field is empty is matched by its fields only: an entry without that field is not it."""
    message = ReplayMessage(dlq_key=DLQ, dlq_id=DLQ_ID, message_id=f"{T - 10}-0", source="stream",
                            fields=[("id", ""), ("type", "user:created")])
    redis_client.xadd(STREAM, {"type": "something else"}, id=f"{T + 9}-0")
    assert await _guard(settings, _op(message)) is None
    redis_client.xadd(STREAM, {"id": "", "type": "user:created"}, id=f"{T + 10}-0")  # the same fields: replayed
    assert f"entry {T + 10}-0 " in (await _guard(settings, _op(message)) or "")


async def test_the_scan_pages_on_from_the_last_entry_of_each_page(tmp_path, redis_url, redis_client) -> None:
    """Pages of 3, at most 2: 5 entries are read in 2 pages (3 + 2, the end seen)."""
    narrow = settings_for(tmp_path, None, redis_url, limits={"max_count": 3, "scan_max_iterations": 2})
    for n in range(5):
        _add(redis_client, f"{T + 10 + n}-0", event=f"other-{n}")
    assert await _guard(narrow, _op()) is None


async def test_replay_state_names_each_state(tmp_path, redis_url, redis_client) -> None:
    settings = settings_for(tmp_path, None, redis_url)
    redis_client.xgroup_create(STREAM, "g", id="$", mkstream=True)
    first, second = (redis_client.xadd(STREAM, {"id": f"e{n}"}).decode() for n in range(2))
    redis_client.xreadgroup("g", "c1", {STREAM: ">"}, count=1)
    connections = Connections(settings)
    try:
        pending = await replay_state(connections.redis(), settings, STREAM, "g", first)
        waiting = await replay_state(connections.redis(), settings, STREAM, "g", second)
        narrow = settings_for(tmp_path, None, redis_url, limits={"max_count": 1, "scan_max_iterations": 1})
        for n in range(3):
            redis_client.xadd(DLQ, {"messageId": f"1-{n}"})
        unknown = await replay_state(connections.redis(), narrow, STREAM, "g", first)
    finally:
        await connections.aclose()
    assert pending[0] == "pending"
    assert pending[1].startswith(f"the replay {first} is pending at consumer c1 (1 deliveries")
    assert waiting == ("undelivered", f"the replay {second} was not read by group g yet (is a consumer running?)")
    assert unknown == ("unknown", f"the dead-letter stream of {STREAM} holds too many entries after the replay {first} "
                                  "to check within [limits] scan_max_iterations x max_count: not confirmed")
