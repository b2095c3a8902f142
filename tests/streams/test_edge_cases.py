"""Edge cases of the stream tools: empty streams, `$` groups, BullMQ's events stream, binary data,
keys of other types, emptied dead-letter streams, on Redis 7 and 6.2."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from server.config import Settings
from server.connections import Connections
from server.errors import InvalidArgument, NotFound
from tests.streams.conftest import Backend
from tools.streams.discovery import list_streams
from tools.streams.dlq import list_dead_letters
from tools.streams.inspect import inspect_stream
from tools.streams.pending import list_pending

pytestmark = pytest.mark.anyio


async def test_group_created_with_dollar_on_an_empty_stream(
    backend: Backend, settings_for: Callable[..., Settings]
) -> None:
    """MKSTREAM + `$` on nothing: no entry, no anomaly; after 3 entries arrive, a lag of 3 whichever the version."""
    backend.client.xgroup_create("stream:new", "g", id="$", mkstream=True)
    settings = settings_for(backend)
    conns = Connections(settings)
    try:
        empty = await inspect_stream(conns, settings, "stream:new")
        for n in range(3):
            backend.client.xadd("stream:new", {"n": str(n)})
        filled = await inspect_stream(conns, settings, "stream:new")
        pending = await list_pending(conns, settings, "stream:new", "g")
    finally:
        await conns.aclose()
    assert (empty.length, empty.first_id, empty.last_id, empty.anomalies) == (0, None, None, [])
    (group,) = empty.groups
    assert (group.lag, group.pending, group.last_delivered_id, group.oldest_undelivered_id) == (0, 0, "0-0", None)
    assert group.pending_summary.count == 0 and group.pending_summary.oldest is None
    (group,) = filled.groups
    assert group.lag == 3 and group.lag_source in ("reported", "counted")
    assert group.oldest_undelivered_id == filled.first_id
    assert pending.entries == [] and pending.next_cursor is None


async def test_bullmq_events_stream_is_not_a_stream_without_group(
    machine_or_cluster: Backend, settings_for: Callable[..., Settings]
) -> None:
    machine = machine_or_cluster  # the machine's Redis, then the cluster
    machine.client.xadd("bull:event-queue:events", {"event": "added", "jobId": "1"})
    machine.client.xadd("stream:nobody", {"a": "1"})
    settings = settings_for(machine)
    conns = Connections(settings)
    try:
        events = await inspect_stream(conns, settings, "bull:event-queue:events")
        nobody = await inspect_stream(conns, settings, "stream:nobody")
    finally:
        await conns.aclose()
    assert events.anomalies == [] and events.dlq is None  # BullMQ reads it with XREAD, never by a group
    assert [a.code for a in nobody.anomalies] == ["no_group"]


async def test_binary_keys_fields_and_names(backend: Backend, settings_for: Callable[..., Settings]) -> None:
    """Bytes that are not UTF-8 in field names, values, consumer names and dead letters come back
    as replacement characters, never as an error."""
    client = backend.client
    client.xadd("stream:bin", {b"\xff\xfename": b"\x80\x81 value", b"type": b"t\xc3"})
    client.xgroup_create("stream:bin", "g", id="0")
    client.xreadgroup("g", b"c\xff", {"stream:bin": ">"})
    client.xadd("stream:bin-dlq", {b"messageId": b"\xff-0", b"error": b"\xfe boom", b"payload": b"\xff{",
                                   b"timestamp": b"\x00"})
    client.xadd(b"stream:\xffweird", {"a": "1"})
    settings = settings_for(backend)
    conns = Connections(settings)
    try:
        report = await inspect_stream(conns, settings, "stream:bin")
        page = await list_pending(conns, settings, "stream:bin", "g")
        dead = await list_dead_letters(conns, settings, stream="stream:bin")
        listed = await list_streams(conns, settings)
    finally:
        await conns.aclose()
    assert report.groups[0].consumer_list[0].name == "c\ufffd"
    (entry,) = page.entries
    assert entry.fields == {"\ufffd\ufffdname": "\ufffd\ufffd value", "type": "t\ufffd"}
    assert entry.consumer == "c\ufffd" and not entry.fields_truncated
    (letter,) = dead.entries
    assert (letter.message_id, letter.error, letter.payload_valid_json) == ("\ufffd-0", "\ufffd boom", False)
    assert letter.original is not None and letter.original.in_stream is False
    assert "stream:\ufffdweird" in [s.name for s in listed.streams]


async def test_keys_of_other_types_and_streams_without_groups(
    machine_or_cluster: Backend, settings_for: Callable[..., Settings]
) -> None:
    machine = machine_or_cluster  # the machine's Redis, then the cluster
    machine.client.hset("a:hash", mapping={"x": "1"})
    machine.client.xadd("stream:lonely", {"a": "1"})
    settings = settings_for(machine)
    conns = Connections(settings)
    try:
        with pytest.raises(InvalidArgument, match="'a:hash' is a Redis hash, not a stream"):
            await list_pending(conns, settings, "a:hash", "g")
        with pytest.raises(NotFound, match=r"no consumer group 'g' \(its groups: none\)"):
            await list_pending(conns, settings, "stream:lonely", "g")
        with pytest.raises(InvalidArgument, match="'a:hash' is a Redis hash, not a stream"):
            await inspect_stream(conns, settings, "a:hash")
    finally:
        await conns.aclose()


async def test_dead_letter_stream_emptied_by_xdel(backend: Backend, settings_for: Callable[..., Settings]) -> None:
    """A dead-letter stream whose entries were all replayed and XDELed exists with length 0: no anomaly."""
    client = backend.client
    client.xadd("stream:done", {"a": "1"})
    client.xgroup_create("stream:done", "g", id="$")
    dead_id = client.xadd("stream:done-dlq", {"messageId": "1-0", "error": "e", "payload": "{}", "timestamp": "1"})
    client.xdel("stream:done-dlq", dead_id)
    settings = settings_for(backend)
    conns = Connections(settings)
    try:
        report = await inspect_stream(conns, settings, "stream:done")
        page = await list_dead_letters(conns, settings, stream="stream:done")
        every = await list_dead_letters(conns, settings)
    finally:
        await conns.aclose()
    assert report.dlq is not None and report.dlq.exists and report.dlq.length == 0 and report.anomalies == []
    assert page.dlq_streams == ["stream:done-dlq"] and page.entries == [] and page.next_cursor is None
    assert every.entries == [] and every.next_cursor is None
