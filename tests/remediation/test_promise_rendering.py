"""Promise: the command a human approves is exactly what runs, and it cannot hide anything.

``operations.render`` produces the text shown in a plan (and re-rendered at approve and apply
time: a step whose stored command differs is refused); ``sql_update_statement`` /
``sql_bound_params`` are what the SQL runner executes, ``bull_retry_commands`` what the BullMQ
runner sends inside MULTI/EXEC. Exact strings here, and the SQL executed on a real PostgreSQL
with non-default column names, so the displayed and executed forms cannot drift apart.
"""

from __future__ import annotations

from datetime import datetime

import psycopg
import pytest

from server.conventions import ColumnNames, Conventions
from tools.remediation.model import (
    BullRetryOp,
    ConfirmOp,
    DelOp,
    EntryRef,
    ExportOp,
    PendingRef,
    ReplayMessage,
    SqlRow,
    SqlUpdateOp,
    XAckOp,
    XAddOp,
    XClaimOp,
    XDelOp,
    ZRemOp,
)
from tools.remediation.operations import (
    bull_key,
    bull_retry_commands,
    redis_command,
    redis_quote,
    render,
    render_params,
    sql_bound_params,
    sql_display,
    sql_has_guard,
    sql_params,
    sql_select_statement,
    sql_update_statement,
)

CONV = Conventions()
PLAIN = "AZaz09_.:@/+*=<>,~{}[]$%^&!?|#-"


@pytest.mark.parametrize(
    ("arg", "shown"),
    [
        (PLAIN, PLAIN),  # every character of the bare set, left bare
        ("stream:event:created-dlq", "stream:event:created-dlq"),
        ("", '""'),
        ("two words", '"two words"'),
        ('say "hi"', '"say \\"hi\\""'),
        ("back\\slash", '"back\\\\slash"'),
        ("a\nb\rc\td", '"a\\nb\\rc\\td"'),
        ("\x1b[2Jcleared", '"\\x1b[2Jcleared"'),  # an ANSI escape cannot clear the approver's screen
        ("safe\u202eevil", '"safe\\xe2\\x80\\xaeevil"'),  # bidi override (Cf)
        ("line\u2028sep\u2029para", '"line\\xe2\\x80\\xa8sep\\xe2\\x80\\xa9para"'),  # Zl, Zp
        ("nul\x00", '"nul\\x00"'),
        ("café", '"café"'),  # printable non-ASCII: quoted, kept as is
        ("it's", '"it\'s"'),
        ("a;b", '"a;b"'),
        ("(x)", '"(x)"'),
        ("`x`", '"`x`"'),
    ],
)
def test_redis_arguments_are_quoted_so_nothing_hides(arg: str, shown: str) -> None:
    assert redis_quote(arg) == shown


def test_redis_command_and_keys() -> None:
    assert redis_command("XCLAIM", "s", "g", "c", 60000, "1-0", "JUSTID") == "XCLAIM s g c 60000 1-0 JUSTID"
    assert redis_command("DEL", "a b", "c") == 'DEL "a b" c'
    assert bull_key("{bull}", "q", "failed") == "{bull}:q:failed"


def _retry(**kw) -> BullRetryOp:
    base = {"queue": "q", "prefix": "bull", "job_ids": ["j1", "j 2"], "target_list": "wait", "push": "LPUSH",
            "marker": False, "events_maxlen": 1000}
    return BullRetryOp(**{**base, **kw})


def test_bullmq_retry_commands() -> None:
    events = ["XADD", "bull:q:events", "MAXLEN", "~", "1000", "*", "event", "waiting", "jobId", "j1", "prev", "failed"]
    assert bull_retry_commands(_retry(), "j1") == [
        ["ZREM", "bull:q:failed", "j1"],
        ["HDEL", "bull:q:j1", "finishedOn", "processedOn", "failedReason"],
        ["LPUSH", "bull:q:wait", "j1"],
        events,
    ]
    with_marker = bull_retry_commands(_retry(marker=True, push="RPUSH"), "j1")
    assert with_marker[2] == ["RPUSH", "bull:q:wait", "j1"]
    assert with_marker[3] == ["ZADD", "bull:q:marker", "0", "0"] and with_marker[4] == events
    paused = bull_retry_commands(_retry(marker=True, target_list="paused"), "j1")  # no marker for a paused queue
    assert [c[0] for c in paused] == ["ZREM", "HDEL", "LPUSH", "XADD"] and paused[2] == ["LPUSH", "bull:q:paused", "j1"]
    assert render(_retry(job_ids=["j1"]), CONV) == (
        "MULTI\nZREM bull:q:failed j1\nHDEL bull:q:j1 finishedOn processedOn failedReason\nLPUSH bull:q:wait j1\n"
        "XADD bull:q:events MAXLEN ~ 1000 * event waiting jobId j1 prev failed\nEXEC")
    assert render(_retry(), CONV).count("MULTI") == 2 and render(_retry(), CONV).endswith('prev failed\nEXEC')
    assert '"bull:q:j 2"' in render(_retry(), CONV)


ODD = Conventions(columns=ColumnNames(id="Id", status='st"at', updated_at="upd"))


def _sql(*rows: SqlRow) -> SqlUpdateOp:
    return SqlUpdateOp(service="event", table="event_queue", set_status="COMPLETED", expect_status="FAILED",
                       rows=list(rows))


def test_sql_display_and_params() -> None:
    plain = _sql(SqlRow(id="a"), SqlRow(id="b"))
    guarded = _sql(SqlRow(id="a", updated_at="2026-12-01T10:00:00.123456+00:00"), SqlRow(id="b"))
    assert not sql_has_guard(plain) and sql_has_guard(guarded)
    assert sql_display(plain, CONV) == ('UPDATE "event_queue" SET "status" = $1, "updated_at" = now() '
                                        'WHERE "id" = $2 AND "status" = $3')
    assert sql_display(guarded, ODD) == ('UPDATE "event_queue" SET "st""at" = $1, "upd" = now() '
                                         'WHERE "Id" = $2 AND "st""at" = $3 AND "upd" = $4')
    assert sql_params(plain) == [["COMPLETED", "a", "FAILED"], ["COMPLETED", "b", "FAILED"]]
    assert sql_params(guarded) == [["COMPLETED", "a", "FAILED", "2026-12-01T10:00:00.123456+00:00"],
                                   ["COMPLETED", "b", "FAILED", None]]
    assert render(guarded, ODD) == sql_display(guarded, ODD) and render_params(guarded) == sql_params(guarded)
    assert render_params(DelOp(keys=["k"])) == []
    bound = sql_bound_params(guarded)
    assert bound[0][:3] == ["COMPLETED", "a", "FAILED"]
    assert bound[0][3] == datetime.fromisoformat("2026-12-01T10:00:00.123456+00:00")
    assert bound[1] == ["COMPLETED", "b", "FAILED", None]
    assert sql_bound_params(plain) == sql_params(plain)


def test_sql_statements_as_executed() -> None:
    guarded = _sql(SqlRow(id="a", updated_at="2026-12-01T10:00:00+00:00"))
    assert sql_update_statement(_sql(SqlRow(id="a")), ODD).as_string(None) == (
        'UPDATE "event_queue" SET "st""at" = %s, "upd" = now() WHERE "Id" = %s AND "st""at" = %s')
    assert sql_update_statement(guarded, ODD).as_string(None) == (
        'UPDATE "event_queue" SET "st""at" = %s, "upd" = now() WHERE "Id" = %s AND "st""at" = %s AND "upd" = %s')
    assert sql_select_statement(guarded, ODD).as_string(None) == (
        'SELECT * FROM "event_queue" WHERE "Id" = %s FOR UPDATE')


def test_the_executed_update_is_the_displayed_one_on_a_real_database(pg_url: str) -> None:
    """Odd column names, a guard that holds for one row and not the other: exactly one row changes."""
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute('CREATE TABLE event_queue ("Id" text PRIMARY KEY, "st""at" text, upd timestamptz)')
        conn.execute("INSERT INTO event_queue VALUES ('a', 'FAILED', '2026-12-01T10:00:00+00:00'), "
                     "('b', 'FAILED', '2026-12-01T11:00:00+00:00')")
        op = _sql(SqlRow(id="a", updated_at="2026-12-01T10:00:00+00:00"),
                  SqlRow(id="b", updated_at="2026-12-01T10:00:00+00:00"))  # b was updated since
        counts = [conn.execute(sql_update_statement(op, ODD), params).rowcount for params in sql_bound_params(op)]
        assert counts == [1, 0]
        rows = conn.execute('SELECT "Id", "st""at" FROM event_queue ORDER BY 1').fetchall()
        assert rows == [("a", "COMPLETED"), ("b", "FAILED")]
        assert conn.execute(sql_select_statement(op, ODD), ("b",)).fetchone()[:2] == ("b", "FAILED")


def test_every_operation_renders_exactly() -> None:
    export = ExportOp(entries=[EntryRef(key="s", id="1-0")], pending=[PendingRef(stream="s", group="g", id="1-0")])
    assert render(export, CONV) == "XRANGE s 1-0 1-0\nXPENDING s g 1-0 1-0 1"
    assert render(XClaimOp(stream="s", group="g", consumer="c", min_idle_ms=5000, ids=["1-0", "2-0"]), CONV) == (
        "XCLAIM s g c 5000 1-0 2-0 JUSTID")
    assert render(XAckOp(stream="s", group="g", ids=["1-0", "2-0"]), CONV) == "XACK s g 1-0 2-0"
    assert render(DelOp(keys=["a", "b"]), CONV) == "DEL a b"
    messages = [ReplayMessage(dlq_key="s-dlq", dlq_id="1-0", message_id="0-1", source="stream",
                              fields=[("id", "e1"), ("payload", '{"a": 1}')]),
                ReplayMessage(dlq_key="s-dlq", dlq_id="2-0", message_id="0-2", source="dlq_payload",
                              fields=[("id", "e2")])]
    assert render(XAddOp(stream="s", maxlen=1000, messages=messages), CONV) == (
        'XADD s MAXLEN ~ 1000 * id e1 payload "{\\"a\\": 1}"\nXADD s MAXLEN ~ 1000 * id e2')
    assert render(XAddOp(stream="s", maxlen=None, messages=messages[1:]), CONV) == "XADD s * id e2"
    assert render(ConfirmOp(stream="s", group="g", replay_step=2, timeout_ms=30000), CONV) == (
        "# poll every 250 ms for up to 30000 ms, for each id replayed by step 2:\n"
        'XINFO GROUPS s\nXPENDING s g "<replayed id>" "<replayed id>" 1')
    assert render(XDelOp(key="s-dlq", ids=["1-0"]), CONV) == "XDEL s-dlq 1-0"
    assert render(ZRemOp(key="z", members=["m 1", "m2"]), CONV) == 'ZREM z "m 1" m2'
    with pytest.raises(TypeError, match="unknown operation EntryRef"):
        render(EntryRef(key="s", id="1-0"), CONV)  # type: ignore[arg-type]
