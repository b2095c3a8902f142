"""dlq_list: parsed dead letters joined with retry keys, locks and the original's whereabouts."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from server.config import Settings
from server.connections import Connections
from server.errors import InvalidArgument, NotFound
from tests.helpers import in_process_client
from tests.streams import scenario as sc_mod
from tests.streams.conftest import Backend
from tests.streams.scenario import MAIN, STREAM, USER_EVENT_TYPE, USER_STREAM
from tools.streams.dlq import list_dead_letters, parse_dlq_entry

pytestmark = pytest.mark.anyio


async def test_one_stream_dead_letters_joined(backend: Backend, settings_for: Callable[..., Settings]) -> None:
    settings = settings_for(backend)
    sc = sc_mod.build_streams(backend.client, settings.conventions, age=False)
    async with in_process_client(settings) as client:
        result = await client.call_tool("dlq_list", {"stream": STREAM})
    assert not result.is_error, result.content
    page = result.structured_content
    assert page["dlq_streams"] == [STREAM + "-dlq"] and page["next_cursor"] is None
    retried, trimmed, not_json = page["entries"]
    assert [e["dlq_id"] for e in page["entries"]] == sc.dlq_ids

    assert retried["message_id"] == sc.ids[12] and retried["source_stream"] == STREAM
    assert retried["event_type"] == sc_mod.EVENT_TYPE and retried["event_id"] == "ev-12"
    assert retried["payload"]["id"] == "ev-12" and retried["payload_valid_json"]
    assert retried["error"].startswith("EntityNotFound") and retried["dead_at_ms"] > 1_700_000_000_000
    assert retried["original"] == {"source_exists": True, "in_stream": True, "pending_in": [],
                                   "groups_checked": ["pp-lag", "pp-main", "pp-ok"]}
    (book,) = retried["bookkeeping"]
    assert book["group"] == MAIN
    assert book["retry"]["attempt"] == 5 and book["retry"]["exists"]
    assert book["retry"]["last_error"] == "EntityNotFound: event 12 has no organiser"
    assert book["retry"]["key"] == f"retry:post-processor:{MAIN}:{sc.ids[12]}"
    assert book["idempotency"]["exists"] is False

    # its message was trimmed, but pp-dead still holds it in the PEL
    assert trimmed["original"]["in_stream"] is False
    assert [(p["group"], p["consumer"]) for p in trimmed["original"]["pending_in"]] == [(MAIN, "pp-dead")]
    assert trimmed["bookkeeping"] == []

    assert not_json["payload"] is None and not_json["payload_valid_json"] is False
    assert not_json["payload_preview"] == "not json {" and not_json["event_type"] is None
    assert "EntityNotFound" in result.content[0].text


async def test_retry_queue_and_lock_join(machine_or_cluster: Backend, settings_for: Callable[..., Settings]) -> None:
    machine = machine_or_cluster  # the machine's Redis, then the cluster
    settings = settings_for(machine)
    conv = settings.conventions
    sc = sc_mod.build_streams(machine.client, conv, age=False)
    machine.client.xadd(STREAM + "-dlq", sc_mod.dead_letter(sc.locked_retrying, "ev-11", sc_mod.EVENT_TYPE, "boom"))
    conns = Connections(settings)
    try:
        page = await list_dead_letters(conns, settings, stream=STREAM + "-dlq", contains="BOOM")
    finally:
        await conns.aclose()
    (entry,) = page.entries
    (book,) = entry.bookkeeping
    assert book.retry.next_retry_at_ms is not None and book.retry.next_retry_at_ms > 1_700_000_000_000
    assert book.idempotency.exists and 0 < (book.idempotency.ttl_s or 0) <= 86400


async def test_all_dead_letter_streams_paged_across_streams(
    backend: Backend, settings_for: Callable[..., Settings]
) -> None:
    settings = settings_for(backend)
    sc = sc_mod.build_streams(backend.client, settings.conventions, age=False)
    backend.client.set("looks-like-a-dlq-but-is-a-string-dlq", "x")
    conns = Connections(settings)
    seen = []
    cursor = None
    try:
        while True:
            page = await list_dead_letters(conns, settings, count=2, cursor=cursor)
            assert page.dlq_streams == [STREAM + "-dlq", USER_STREAM + "-dlq"] and page.scan_complete
            seen.extend((e.dlq_stream, e.dlq_id) for e in page.entries)
            cursor = page.next_cursor
            if cursor is None:
                break
    finally:
        await conns.aclose()
    expected = [(STREAM + "-dlq", i) for i in sc.dlq_ids] + [(USER_STREAM + "-dlq", i) for i in sc.user_dlq_ids]
    assert seen == expected


async def test_filters_by_event_type_and_error_text(backend: Backend, settings_for: Callable[..., Settings]) -> None:
    settings = settings_for(backend)
    sc = sc_mod.build_streams(backend.client, settings.conventions, age=False)
    conns = Connections(settings)
    try:
        users = await list_dead_letters(conns, settings, type=USER_EVENT_TYPE)
        fk = await list_dead_letters(conns, settings, contains="fk VIOLATION")
        none = await list_dead_letters(conns, settings, stream=USER_STREAM, contains="FK violation")
    finally:
        await conns.aclose()
    assert [e.dlq_id for e in users.entries] == sc.user_dlq_ids
    assert all(e.event_type == USER_EVENT_TYPE for e in users.entries)
    assert [e.dlq_id for e in fk.entries] == [sc.dlq_ids[1]]
    assert none.entries == [] and none.examined == 2


async def test_filtered_listing_stops_at_its_read_budget_and_resumes(
    machine_or_cluster: Backend, settings_for: Callable[..., Settings]
) -> None:
    machine = machine_or_cluster  # the machine's Redis, then the cluster
    for n in range(30):
        error = "needle here" if n in (3, 27) else "other"
        machine.client.xadd("stream:x-dlq", sc_mod.dead_letter(f"{n + 1}-0", f"e{n}", "t", error))
    settings = settings_for(machine, limits={"max_count": 5, "scan_max_iterations": 2})
    conns = Connections(settings)
    found, rounds, cursor = [], 0, None
    try:
        while True:
            page = await list_dead_letters(conns, settings, stream="stream:x", contains="needle", count=5,
                                           cursor=cursor)
            rounds += 1
            assert page.examined <= 2 * (5 + 1)  # 2 reads of at most count + 1 entries
            found.extend(e.message_id for e in page.entries)
            cursor = page.next_cursor
            if cursor is None:
                break
    finally:
        await conns.aclose()
    assert found == ["4-0", "28-0"]
    assert rounds >= 3


async def test_payload_and_error_are_cut_at_the_byte_cap(
    machine: Backend, settings_for: Callable[..., Settings]
) -> None:
    big = {"id": "e1", "type": "big.event", "payload": {"text": "x" * 1000}}
    machine.client.xadd("stream:b-dlq", {"messageId": "1-0", "error": "E" * 500, "payload": json.dumps(big),
                                         "timestamp": "2026-11-30T02:00:00Z", "group": "pp-b"})
    settings = settings_for(machine, limits={"payload_max_bytes": 100})
    conns = Connections(settings)
    try:
        page = await list_dead_letters(conns, settings, stream="stream:b", type="big.event")
        async with conns.redis_errors():
            ((raw_id, fields),) = await conns.redis().xrange("stream:b-dlq")
    finally:
        await conns.aclose()
    (entry,) = page.entries
    assert entry.error == "E" * 100 and entry.error_truncated
    assert entry.payload is None and entry.payload_truncated and entry.payload_valid_json
    assert entry.payload_preview is not None and len(entry.payload_preview) == 100
    assert entry.event_type == "big.event" and entry.payload_bytes == len(json.dumps(big))
    assert entry.dead_at_ms == int(datetime(2026, 11, 30, 2, 0, tzinfo=UTC).timestamp() * 1000)
    assert entry.extra_fields == {"group": "pp-b"}
    assert entry.original is not None and entry.original.source_exists is False
    whole = parse_dlq_entry(fields, dlq_stream="stream:b-dlq", dlq_id=raw_id.decode(),
                            conventions=settings.conventions)  # no cap: what a replay needs
    assert whole.payload == big and whole.error == "E" * 500


async def test_every_text_of_a_dead_letter_is_capped(machine: Backend, settings_for: Callable[..., Settings]) -> None:
    """Odd dead letters (binary bytes, a huge messageId, an object as event type, many extra fields,
    a type longer than the cap) stay within the byte cap, and the filters still see the whole entry."""
    long_type = "t" * 200
    machine.client.xadd("stream:odd-dlq", {
        "messageId": "m" * 1000, "error": b"\xff\xfe boom", "timestamp": "9" * 500,
        "payload": json.dumps({"type": {"nested": "x" * 1000}, "id": ["not", "an", "id"]}),
        **{f"extra{n}": "v" * 50 for n in range(100)},
    })
    machine.client.xadd("stream:odd-dlq", {"messageId": "1-0", "error": "e", "timestamp": "1",
                                           "payload": json.dumps({"type": long_type, "id": 7})})
    settings = settings_for(machine, limits={"payload_max_bytes": 64})
    conns = Connections(settings)
    try:
        page = await list_dead_letters(conns, settings, stream="stream:odd")
        typed = await list_dead_letters(conns, settings, stream="stream:odd", type=long_type)
    finally:
        await conns.aclose()
    odd, long_typed = page.entries
    assert odd.fields_truncated and odd.message_id == "m" * 64 and odd.dead_at_ms is None
    assert odd.error == "\ufffd\ufffd boom" and not odd.error_truncated
    assert odd.event_type is None and odd.event_id is None  # an object is no event type
    assert sum(len(k) + len(v) for k, v in odd.extra_fields.items()) <= 64
    assert long_typed.event_type == "t" * 64 and long_typed.fields_truncated and long_typed.event_id == "7"
    assert [e.dlq_id for e in typed.entries] == [long_typed.dlq_id]  # the filter compared the whole type


async def test_long_last_error_is_cut_and_flagged(machine: Backend, settings_for: Callable[..., Settings]) -> None:
    settings = settings_for(machine, limits={"payload_max_bytes": 64})
    conv = settings.conventions
    machine.client.xadd("stream:le", {"a": "1"})
    machine.client.xgroup_create("stream:le", "g", id="0")
    machine.client.set(f"retry:post-processor:g:5-0{conv.retry_last_error_suffix}", "L" * 500)
    machine.client.xadd("stream:le-dlq", sc_mod.dead_letter("5-0", "e5", "t", "boom"))
    conns = Connections(settings)
    try:
        page = await list_dead_letters(conns, settings, stream="stream:le")
    finally:
        await conns.aclose()
    ((book,),) = [e.bookkeeping for e in page.entries]
    assert book.retry.last_error == "L" * 64 and book.last_error_truncated


async def test_missing_streams_and_bad_arguments(machine: Backend, settings_for: Callable[..., Settings]) -> None:
    settings = settings_for(machine)
    machine.client.xadd("stream:no-dead-letters", {"a": "1"})
    machine.client.set("stream:weird-dlq", "x")
    machine.client.xadd("stream:weird", {"a": "1"})
    conns = Connections(settings)
    try:
        empty = await list_dead_letters(conns, settings, stream="stream:no-dead-letters")
        assert empty.entries == [] and empty.dlq_streams == [] and empty.next_cursor is None
        with pytest.raises(NotFound, match="neither stream"):
            await list_dead_letters(conns, settings, stream="stream:ghost")
        with pytest.raises(InvalidArgument, match="is a Redis string"):
            await list_dead_letters(conns, settings, stream="stream:weird")
        machine.client.set("a:string", "x")
        with pytest.raises(InvalidArgument, match="'a:string' is a Redis string, not a stream"):
            await list_dead_letters(conns, settings, stream="a:string")
        with pytest.raises(NotFound, match="dead-letter stream 'stream:ghost-dlq' does not exist"):
            await list_dead_letters(conns, settings, stream="stream:ghost-dlq")
        with pytest.raises(InvalidArgument, match="omit it"):
            await list_dead_letters(conns, settings, contains="")
        with pytest.raises(InvalidArgument, match="count must be"):
            await list_dead_letters(conns, settings, count=0)
        with pytest.raises(InvalidArgument, match="cursor is not one"):
            await list_dead_letters(conns, settings, cursor="c1.!!!")
    finally:
        await conns.aclose()


async def test_pel_lookup_falls_back_to_one_by_one_when_the_range_is_full(
    backend: Backend, settings_for: Callable[..., Settings]
) -> None:
    """With a sample of 1, pp-main's PEL between the page's ids holds more entries than the range
    read may return: each message is then looked up alone, with the same answer."""
    wide = settings_for(backend)
    narrow = settings_for(backend, limits={"stream_sample": 1})
    sc_mod.build_streams(backend.client, wide.conventions, age=False)
    answers = []
    for settings in (wide, narrow):
        conns = Connections(settings)
        try:
            page = await list_dead_letters(conns, settings, stream=STREAM)
        finally:
            await conns.aclose()
        answers.append([
            (e.message_id, e.original.in_stream if e.original else None, e.bookkeeping,
             [(h.group, h.consumer, h.deliveries) for h in (e.original.pending_in if e.original else [])])
            for e in page.entries
        ])
    assert answers[0] == answers[1]  # idle times aside, which move between the two reads
    assert [held for *_, held in answers[1]] == [[], [(MAIN, "pp-dead", 1)], []]
