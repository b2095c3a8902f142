"""Render each operation as the exact command a human reads, and compose its SQL.

The text shown in a plan is produced here from the typed operation, at propose time and
again at approve and apply time: the executor refuses a step whose stored command is not
what its operation renders to, so what the human approved is what runs.

Redis commands use redis-cli syntax (arguments double-quoted with C-style escapes when
they hold spaces, quotes or non-printable characters). SQL uses ``$n`` placeholders for
display; execution composes the same statement with ``psycopg.sql.Identifier`` for every
name (taken from ``[conventions]``) and bound ``%s`` parameters for every value.
"""

from __future__ import annotations

import re
import unicodedata
from datetime import datetime

from server.config import Conventions
from server.lazy_modules import LazyModule
from tools.remediation.model import (
    BullRequeueStalledOp,
    BullRetryOp,
    ConfirmOp,
    DelOp,
    ExportOp,
    Operation,
    SqlDeleteOp,
    SqlUpdateOp,
    XAckOp,
    XAddOp,
    XClaimOp,
    XDelOp,
    ZRemOp,
)

sql = LazyModule("psycopg.sql")

_PLAIN_ARG = re.compile(r"^[A-Za-z0-9_.:@/+*=<>,~{}\[\]$%^&!?|#-]+$")


def _invisible(ch: str) -> bool:
    """Control and format characters (ANSI escapes, bidi overrides...) that could hide text on a terminal."""
    return unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp")


def redis_quote(arg: str) -> str:
    """One redis-cli argument: bare when safe, else double-quoted with escapes.

    Control and format characters are written as ``\\xHH`` escapes of their UTF-8 bytes
    (valid redis-cli syntax), so a value cannot hide or rewrite text on the approver's screen.
    """
    if arg and _PLAIN_ARG.match(arg):
        return arg
    out = ['"']
    for ch in arg:
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif _invisible(ch):
            out.append("".join(f"\\x{b:02x}" for b in ch.encode("utf-8")))
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def redis_command(*args: str | int) -> str:
    return " ".join(redis_quote(str(a)) for a in args)


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def bull_key(prefix: str, queue: str, suffix: str) -> str:
    return f"{prefix}:{queue}:{suffix}"


def bull_retry_commands(op: BullRetryOp, job_id: str) -> list[list[str]]:
    """The commands of one job's retry, in order (run inside MULTI/EXEC)."""
    key = bull_key(op.prefix, op.queue, job_id)
    cmds = [
        ["ZREM", bull_key(op.prefix, op.queue, "failed"), job_id],
        ["HDEL", key, "finishedOn", "processedOn", "failedReason"],
        [op.push, bull_key(op.prefix, op.queue, op.target_list), job_id],
    ]
    if op.marker and op.target_list == "wait":
        cmds.append(["ZADD", bull_key(op.prefix, op.queue, "marker"), "0", "0"])
    cmds.append(
        [
            "XADD", bull_key(op.prefix, op.queue, "events"), "MAXLEN", "~", str(op.events_maxlen), "*",
            "event", "waiting", "jobId", job_id, "prev", "failed",
        ]
    )
    return cmds


def bull_requeue_stalled_commands(op: BullRequeueStalledOp, job_id: str) -> list[list[str]]:
    """The commands moving one stalled job back to wait (run inside MULTI/EXEC, the lock absent under WATCH)."""
    cmds = [
        ["LREM", bull_key(op.prefix, op.queue, "active"), "1", job_id],
        [op.push, bull_key(op.prefix, op.queue, op.target_list), job_id],
    ]
    if op.marker and op.target_list == "wait":
        cmds.append(["ZADD", bull_key(op.prefix, op.queue, "marker"), "0", "0"])
    cmds.append(
        [
            "XADD", bull_key(op.prefix, op.queue, "events"), "MAXLEN", "~", str(op.events_maxlen), "*",
            "event", "waiting", "jobId", job_id, "prev", "active",
        ]
    )
    return cmds


def sql_delete_display(op: SqlDeleteOp, conventions: Conventions) -> str:
    cols = conventions.columns
    return f"DELETE FROM {_ident(op.table)} WHERE {_ident(cols.id)} = $1 AND {_ident(cols.status)} = $2"


def sql_delete_statement(op: SqlDeleteOp, conventions: Conventions) -> sql.Composed:
    """The executable form of :func:`sql_delete_display`."""
    cols = conventions.columns
    return sql.SQL("DELETE FROM {t} WHERE {i} = %s AND {s} = %s").format(
        t=sql.Identifier(op.table), i=sql.Identifier(cols.id), s=sql.Identifier(cols.status))


def sql_has_guard(op: SqlUpdateOp) -> bool:
    return any(row.updated_at is not None for row in op.rows)


def sql_display(op: SqlUpdateOp, conventions: Conventions) -> str:
    cols = conventions.columns
    text = (
        f"UPDATE {_ident(op.table)} SET {_ident(cols.status)} = $1, {_ident(cols.updated_at)} = now() "
        f"WHERE {_ident(cols.id)} = $2 AND {_ident(cols.status)} = $3"
    )
    if sql_has_guard(op):
        text += f" AND {_ident(cols.updated_at)} = $4"
    return text


def sql_params(op: SqlUpdateOp) -> list[list[str | None]]:
    guard = sql_has_guard(op)
    out: list[list[str | None]] = []
    for row in op.rows:
        params: list[str | None] = [op.set_status, row.id, op.expect_status]
        if guard:
            params.append(row.updated_at)
        out.append(params)
    return out


def sql_update_statement(op: SqlUpdateOp, conventions: Conventions) -> sql.Composed:
    """The executable form of :func:`sql_display` (identifiers quoted by psycopg)."""
    cols = conventions.columns
    query = sql.SQL("UPDATE {t} SET {s} = %s, {u} = now() WHERE {i} = %s AND {s} = %s").format(
        t=sql.Identifier(op.table), s=sql.Identifier(cols.status), u=sql.Identifier(cols.updated_at),
        i=sql.Identifier(cols.id),
    )
    if sql_has_guard(op):
        query = query + sql.SQL(" AND {u} = %s").format(u=sql.Identifier(cols.updated_at))
    return query


def sql_bound_params(op: SqlUpdateOp) -> list[list[object]]:
    """Parameters as executed: the ``updated_at`` guard goes back to a datetime."""
    out: list[list[object]] = []
    for params in sql_params(op):
        bound: list[object] = list(params)
        if len(bound) == 4 and bound[3] is not None:
            bound[3] = datetime.fromisoformat(str(bound[3]))
        out.append(bound)
    return out


def sql_select_statement(op: SqlUpdateOp | SqlDeleteOp, conventions: Conventions) -> sql.Composed:
    """``SELECT * ... FOR UPDATE`` of one row (its backup, taken inside the transaction)."""
    return sql.SQL("SELECT * FROM {t} WHERE {i} = %s FOR UPDATE").format(
        t=sql.Identifier(op.table), i=sql.Identifier(conventions.columns.id)
    )


def render(op: Operation, conventions: Conventions) -> str:
    """The exact command(s) of ``op``, one per line."""
    if isinstance(op, ExportOp):
        lines = [redis_command("XRANGE", e.key, e.id, e.id) for e in op.entries]
        lines += [redis_command("XPENDING", p.stream, p.group, p.id, p.id, 1) for p in op.pending]
        return "\n".join(lines)
    if isinstance(op, XClaimOp):
        return redis_command("XCLAIM", op.stream, op.group, op.consumer, op.min_idle_ms, *op.ids, "JUSTID")
    if isinstance(op, XAckOp):
        return redis_command("XACK", op.stream, op.group, *op.ids)
    if isinstance(op, DelOp):
        return redis_command("DEL", *op.keys)
    if isinstance(op, XAddOp):
        trim = ["MAXLEN", "~", str(op.maxlen)] if op.maxlen else []
        return "\n".join(
            redis_command("XADD", op.stream, *trim, "*", *[part for pair in m.fields for part in pair])
            for m in op.messages
        )
    if isinstance(op, ConfirmOp):
        return (
            f"# poll every 250 ms for up to {op.timeout_ms} ms, for each id replayed by step {op.replay_step}:\n"
            + redis_command("XINFO", "GROUPS", op.stream)
            + "\n"
            + redis_command("XPENDING", op.stream, op.group, "<replayed id>", "<replayed id>", 1)
        )
    if isinstance(op, XDelOp):
        return redis_command("XDEL", op.key, *op.ids)
    if isinstance(op, ZRemOp):
        return redis_command("ZREM", op.key, *op.members)
    if isinstance(op, SqlUpdateOp):
        return sql_display(op, conventions)
    if isinstance(op, SqlDeleteOp):
        return sql_delete_display(op, conventions)
    if isinstance(op, BullRequeueStalledOp):
        out: list[str] = []
        for job_id in op.job_ids:
            out.append("MULTI")
            out += [redis_command(*cmd) for cmd in bull_requeue_stalled_commands(op, job_id)]
            out.append("EXEC")
        return "\n".join(out)
    if isinstance(op, BullRetryOp):
        lines: list[str] = []
        for job_id in op.job_ids:
            lines.append("MULTI")
            lines += [redis_command(*cmd) for cmd in bull_retry_commands(op, job_id)]
            lines.append("EXEC")
        return "\n".join(lines)
    raise TypeError(f"unknown operation {type(op).__name__}")


def render_params(op: Operation) -> list[list[str | None]]:
    if isinstance(op, SqlDeleteOp):
        return [[row_id, op.expect_status] for row_id in op.ids]
    return sql_params(op) if isinstance(op, SqlUpdateOp) else []
