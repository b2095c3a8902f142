"""list_pending: pages by id, filters, messages joined, trimmed and deleted messages."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from server.config import Settings
from server.connections import Connections
from server.errors import InvalidArgument, NotFound
from tests.helpers import in_process_client
from tests.streams import scenario as sc_mod
from tests.streams.conftest import Backend
from tests.streams.scenario import MAIN, STREAM
from tools.streams.pending import list_pending

pytestmark = pytest.mark.anyio


async def test_pages_cover_the_pel_once_in_id_order(backend: Backend, settings_for: Callable[..., Settings]) -> None:
    settings = settings_for(backend)
    sc = sc_mod.build_streams(backend.client, settings.conventions, age=False)
    seen: list[str] = []
    pages = 0
    cursor = None
    async with in_process_client(settings) as client:
        while True:
            args = {"stream": STREAM, "group": MAIN, "count": 2, **({"cursor": cursor} if cursor else {})}
            result = await client.call_tool("list_pending", args)
            assert not result.is_error, result.content
            page = result.structured_content
            pages += 1
            seen.extend(e["id"] for e in page["entries"])
            assert page["group_pending"] == 7
            cursor = page["next_cursor"]
            if cursor is None:
                break
    assert pages == 4
    assert seen == sc.dead_pending + sc.live_stuck
    direct = backend.client.xpending_range(STREAM, MAIN, "-", "+", 100)
    assert seen == [r["message_id"].decode() for r in direct]


async def test_entries_carry_their_message_or_why_it_is_gone(
    backend: Backend, settings_for: Callable[..., Settings]
) -> None:
    settings = settings_for(backend)
    sc = sc_mod.build_streams(backend.client, settings.conventions, age=False)
    backend.client.xdel(STREAM, sc.live_stuck[1])
    conns = Connections(settings)
    try:
        page = await list_pending(conns, settings, STREAM, MAIN, count=50)
    finally:
        await conns.aclose()
    by_id = {e.id: e for e in page.entries}
    # after that XDEL nothing proves the older ones were trimmed: on Redis >= 7 max-deleted-entry-id moved past
    # them, on 6.2 the stream is one entry under its configured MAXLEN
    assert [by_id[i].gone_reason for i in sc.ids[:3]] == ["deleted_or_trimmed"] * 3
    assert all(not by_id[i].message_exists and by_id[i].fields is None for i in sc.ids[:3])
    assert by_id[sc.live_stuck[1]].gone_reason == "deleted"
    present = by_id[sc.ids[3]]
    assert present.message_exists and present.gone_reason is None
    assert present.fields is not None and present.fields["type"] == sc_mod.EVENT_TYPE
    assert set(present.fields) >= {"id", "type", "emitter", "payload", "event", "traceId"}
    assert (present.consumer, present.deliveries) == ("pp-dead", 1)
    assert page.next_cursor is None


async def test_trimmed_is_proven_without_a_deletion(backend: Backend, settings_for: Callable[..., Settings]) -> None:
    settings = settings_for(backend)
    sc = sc_mod.build_streams(backend.client, settings.conventions, age=False)
    conns = Connections(settings)
    try:
        page = await list_pending(conns, settings, STREAM, MAIN, count=50)
        loose = settings.model_copy(update={"conventions": settings.conventions.model_copy(
            update={"stream_maxlen": 10_000})})
        unproven = await list_pending(conns, loose, STREAM, MAIN, count=50)
    finally:
        await conns.aclose()
    by_id = {e.id: e for e in page.entries}
    assert [by_id[i].gone_reason for i in sc.ids[:3]] == ["trimmed"] * 3
    # with a MAXLEN the stream is far under, only Redis >= 7's entries-added still proves it
    redis7 = not backend.version.startswith("6.")
    loose_by_id = {e.id: e for e in unproven.entries}
    assert [loose_by_id[i].gone_reason for i in sc.ids[:3]] == ["trimmed" if redis7 else "deleted_or_trimmed"] * 3


async def test_consumer_and_idle_filters(backend: Backend, settings_for: Callable[..., Settings]) -> None:
    settings = settings_for(backend)
    sc = sc_mod.build_streams(backend.client, settings.conventions, age=False)
    conns = Connections(settings)
    try:
        live = await list_pending(conns, settings, STREAM, MAIN, consumer="pp-live")
        assert [e.id for e in live.entries] == sc.live_stuck
        none_idle = await list_pending(conns, settings, STREAM, MAIN, min_idle_ms=3_600_000)
        assert none_idle.entries == []
        backend.client.xclaim(STREAM, MAIN, "pp-live", 0, [sc.dead_pending[3]], idle=10_000_000)
        idle = await list_pending(conns, settings, STREAM, MAIN, min_idle_ms=5_000_000)
        assert [(e.id, e.consumer) for e in idle.entries] == [(sc.dead_pending[3], "pp-live")]
        with pytest.raises(NotFound, match=r"no consumer 'ghost'.*pp-dead, pp-live"):
            await list_pending(conns, settings, STREAM, MAIN, consumer="ghost")
        with pytest.raises(NotFound, match="no consumer group 'nope'"):
            await list_pending(conns, settings, STREAM, "nope")
        with pytest.raises(NotFound, match="does not exist"):
            await list_pending(conns, settings, "stream:missing", MAIN)
    finally:
        await conns.aclose()


async def test_fields_are_cut_at_the_byte_cap(machine: Backend, settings_for: Callable[..., Settings]) -> None:
    machine.client.xadd("stream:big-entry", {"payload": "é" * 5000, "type": "x"})
    machine.client.xgroup_create("stream:big-entry", "g", id="0")
    machine.client.xreadgroup("g", "c", {"stream:big-entry": ">"})
    settings = settings_for(machine, limits={"payload_max_bytes": 100})
    conns = Connections(settings)
    try:
        page = await list_pending(conns, settings, "stream:big-entry", "g")
    finally:
        await conns.aclose()
    (entry,) = page.entries
    assert entry.fields_truncated
    # names and values share the 100 bytes: "payload" (7) + 46 two-byte characters; "type" (4) does not fit
    assert entry.fields == {"payload": "é" * 46}


async def test_huge_field_names_and_many_fields_stay_within_the_byte_cap(
    machine: Backend, settings_for: Callable[..., Settings]
) -> None:
    machine.client.xadd("stream:wide", {("n" * 5000): "v", **{f"f{n}": "x" for n in range(2000)}})
    machine.client.xgroup_create("stream:wide", "g", id="0")
    machine.client.xreadgroup("g", "c", {"stream:wide": ">"})
    settings = settings_for(machine, limits={"payload_max_bytes": 100})
    conns = Connections(settings)
    try:
        page = await list_pending(conns, settings, "stream:wide", "g")
    finally:
        await conns.aclose()
    (entry,) = page.entries
    assert entry.fields_truncated and entry.fields == {}


async def test_bad_arguments_are_refused_with_a_reason(machine: Backend, settings_for: Callable[..., Settings]) -> None:
    settings = settings_for(machine)
    sc_mod.build_streams(machine.client, settings.conventions, age=False)
    async with in_process_client(settings) as client:
        first = await client.call_tool("list_pending", {"stream": STREAM, "group": MAIN, "count": 2})
        cursor = first.structured_content["next_cursor"]
        other = await client.call_tool("list_pending", {"stream": STREAM, "group": MAIN, "count": 2,
                                                        "consumer": "pp-dead", "cursor": cursor})
        forged = await client.call_tool("list_pending", {"stream": STREAM, "group": MAIN, "cursor": "abc"})
        elsewhere = await client.call_tool("list_pending", {"stream": sc_mod.USER_STREAM, "group": "pp-user",
                                                            "count": 2, "cursor": cursor})
        dlq_cursor = (await client.call_tool("dlq_list", {"count": 1})).structured_content["next_cursor"]
        from_dlq = await client.call_tool("list_pending", {"stream": STREAM, "group": MAIN, "count": 2,
                                                           "cursor": dlq_cursor})
        too_many = await client.call_tool("list_pending", {"stream": STREAM, "group": MAIN, "count": 501})
    assert other.is_error and "other arguments" in other.content[0].text
    assert forged.is_error and "next_cursor" in forged.content[0].text
    assert elsewhere.is_error and "other arguments" in elsewhere.content[0].text
    assert dlq_cursor and from_dlq.is_error and "other arguments" in from_dlq.content[0].text
    assert too_many.is_error and "less than or equal to 500" in too_many.content[0].text
    conns = Connections(settings)
    try:
        with pytest.raises(InvalidArgument, match="count must be between 1 and 500"):
            await list_pending(conns, settings, STREAM, MAIN, count=0)
    finally:
        await conns.aclose()
