"""Pure pieces: stream ids, byte caps, cursors, dead-letter parsing (properties with hypothesis)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from server.config import Conventions
from server.errors import InvalidArgument
from tools.streams.cursor import decode_cursor, encode_cursor, fingerprint
from tools.streams.dlq import parse_dlq_entry, parse_timestamp_ms
from tools.streams.ids import StreamId, parse_id_argument
from tools.streams.keys import glob_escape, idempotency_key, is_dlq, retry_key, source_of_dlq
from tools.streams.values import capped, capped_fields, read_json

ids = st.builds(StreamId, st.integers(0, 2**64 - 1), st.integers(0, 2**64 - 1))


@given(ids, ids)
def test_ids_order_like_redis(a: StreamId, b: StreamId) -> None:
    assert (a < b) == ((a.ms, a.seq) < (b.ms, b.seq))
    assert StreamId.parse(str(a)) == a


@given(ids)
def test_successor_and_predecessor_are_adjacent(a: StreamId) -> None:
    if a != StreamId(2**64 - 1, 2**64 - 1):
        nxt = a.successor()
        assert nxt > a and nxt.predecessor() == a
    before = a.predecessor()
    assert (before is None) == (a == StreamId(0, 0))
    if before is not None:
        assert before < a and before.successor() == a


def test_id_arguments_are_checked() -> None:
    assert parse_id_argument(" 1700000000000-3 ", "x") == StreamId(1700000000000, 3)
    assert StreamId.parse("17") == StreamId(17, 0)
    for bad in ("", "abc", "1-2-3", "-1-0", "1-", "99999999999999999999999-0"):
        with pytest.raises(InvalidArgument, match="not a stream id"):
            parse_id_argument(bad, "cursor position")


@given(st.text(max_size=200), st.integers(0, 300))
def test_capped_text_stays_within_the_budget_on_character_boundaries(value: str, budget: int) -> None:
    out, cut = capped(value, budget)
    assert out is not None
    assert len(out.encode()) <= budget
    assert value.startswith(out)
    assert cut == (len(value.encode()) > budget)


@given(st.binary(max_size=200), st.integers(0, 300))
def test_capped_bytes_stay_within_the_budget_once_decoded(value: bytes, budget: int) -> None:
    out, cut = capped(value, budget)
    decoded = value.decode("utf-8", errors="replace")
    assert out is not None and len(out.encode()) <= budget and decoded.startswith(out)
    assert cut == (len(decoded.encode()) > budget)


def test_capped_fields_share_one_budget() -> None:
    fields, cut = capped_fields({b"a": b"12345", b"b": b"67890", b"c": b"x"}, 9)
    assert (fields, cut) == ({"a": "12345", "b": "67"}, True)
    assert capped_fields({b"a": b"1", b"b": b"2"}, 4) == ({"a": "1", "b": "2"}, False)
    assert capped_fields({b"a": b"1"}, None) == ({"a": "1"}, False)
    assert capped_fields({b"a": b"1", b"name" * 10: b"v", b"b": b"2"}, 6) == ({"a": "1"}, True)


@given(st.dictionaries(st.binary(max_size=30), st.binary(max_size=60), max_size=10), st.integers(0, 120))
def test_capped_fields_never_exceed_the_budget(fields: dict[bytes, bytes], budget: int) -> None:
    out, cut = capped_fields(fields, budget)
    assert sum(len(k.encode()) + len(v.encode()) for k, v in out.items()) <= budget
    if not cut:
        assert len(out) == len({k.decode("utf-8", "replace") for k in fields})


def test_read_json_keeps_the_document_for_fields_even_over_the_cap() -> None:
    doc = {"type": "t", "text": "x" * 100}
    small = read_json(json.dumps(doc), 1000)
    assert (small.value, small.preview, small.truncated) == (doc, None, False)
    big = read_json(json.dumps(doc), 20)
    assert big.value is None and big.truncated and big.document == doc and len(big.preview or "") == 20
    broken = read_json(b"\xff{not json", 100)
    assert broken.value is None and not broken.valid_json and broken.preview is not None


def test_cursor_round_trip_and_tampering() -> None:
    query = fingerprint("list_pending", "s", "g", None, 0)
    cursor = encode_cursor({"after": "5-1"}, query)
    assert decode_cursor(cursor, query) == {"after": "5-1"}
    with pytest.raises(InvalidArgument, match="other arguments"):
        decode_cursor(cursor, fingerprint("list_pending", "s", "g", "c", 0))
    for bad in ("5-1", "c1.", "c1.%%%", "c1." + "A" * 3000, encode_cursor({"after": "1-0"}, query)[:-3] + "x"):
        with pytest.raises(InvalidArgument):
            decode_cursor(bad, query)


def test_key_names_come_from_the_conventions() -> None:
    conv = Conventions(retry_key="r:{group}:{message_id}", idempotency_key="lock/{group}/{message_id}",
                       dlq_suffix=".dead")
    assert retry_key(conv, "g{x}", "1-0") == "r:g{x}:1-0"
    assert idempotency_key(conv, "g", "1-0") == "lock/g/1-0"
    assert is_dlq(conv, "s.dead") and source_of_dlq(conv, "s.dead") == "s" and not is_dlq(conv, ".dead")
    assert glob_escape("a*b?[c]\\") == "a\\*b\\?\\[c\\]\\\\"


def test_parse_dead_letter_of_the_target_format() -> None:
    message = {"id": "3f1c", "type": "event.created", "payload": {"after": {"n": 1}}}
    entry = parse_dlq_entry(
        {b"messageId": b"1700000000000-0", b"error": b"Error: boom\n at x", b"payload": json.dumps(message).encode(),
         b"timestamp": b"1700000000123"},
        dlq_stream="stream:event:created-dlq", dlq_id="1700000000200-0",
    )
    assert entry.source_stream == "stream:event:created"
    assert (entry.message_id, entry.event_type, entry.event_id) == ("1700000000000-0", "event.created", "3f1c")
    assert entry.payload == message and entry.dead_at_ms == 1700000000123 and entry.extra_fields == {}


def test_parse_dead_letter_with_renamed_fields() -> None:
    conv = Conventions(dlq_message_id_field="mid", dlq_error_field="err", dlq_payload_field="body",
                       dlq_timestamp_field="at", event_type_field="kind", event_id_field="uid")
    entry = parse_dlq_entry({"mid": "1-0", "err": "e", "body": '{"kind": "k", "uid": 7}', "at": "1700000000"},
                            conventions=conv)
    assert (entry.message_id, entry.error, entry.event_type, entry.event_id) == ("1-0", "e", "k", "7")
    assert entry.dead_at_ms == 1_700_000_000_000  # seconds become ms


def test_timestamps() -> None:
    assert parse_timestamp_ms("2026-11-30T02:00:00.000Z") == 1_796_004_000_000
    assert parse_timestamp_ms("garbage") is None and parse_timestamp_ms(None) is None
    for odd in ("inf", "-inf", "nan", "9" * 500, "-5", "1e300", "99999-01-01"):
        assert parse_timestamp_ms(odd) is None, odd


@given(st.text(max_size=40))
def test_timestamps_never_raise(value: str) -> None:
    parsed = parse_timestamp_ms(value)
    assert parsed is None or 0 <= parsed < 2**63


@given(st.dictionaries(st.binary(max_size=20), st.binary(max_size=200), max_size=8), st.none() | st.integers(0, 64))
def test_parse_dead_letter_never_raises(fields: dict[bytes, bytes], cap: int | None) -> None:
    entry = parse_dlq_entry(fields, dlq_stream="s-dlq", dlq_id="1-0", max_bytes=cap)
    if cap is not None and entry.error is not None:
        assert len(entry.error.encode()) <= cap
    assert entry.source_stream == "s"
