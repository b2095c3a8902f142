"""SQL that writes event_queue rows: trigger functions, triggers and plain inserts.

:func:`sql_facts` reads SQL text (a ``.sql`` file or a string passed to ``queryRunner.query``)
and returns symbolic facts: function definitions with the ``INSERT INTO event_queue``
statements of their body, ``CREATE TRIGGER ... EXECUTE FUNCTION f('<type>', '<emitter>')``
statements, and inserts outside functions. Values are kept as small SQL expressions
(``["s", lit]``, ``["argv", n]``, ``["col", "NEW.emitter"]``, ``["cat", [...]]``,
``["replace", x, a, b]``, ``["arr", [...]]``, ``["|", [...]]``, ``["?", raw]``) so that
:func:`evaluate` can later bind ``TG_ARGV`` to a trigger's arguments and ``NEW.emitter`` to
the known emitters (``replace(emitter, 'ms-', '') || ':job:outbox:success'``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

SqlExpr = list[Any]

_FUNC = re.compile(r"create\s+(?:or\s+replace\s+)?function\s+([\w.\"]+)\s*\(", re.I)
_DOLLAR = re.compile(r"\$(\w*)\$")
_TRIGGER = re.compile(
    r"create\s+(?:or\s+replace\s+)?(?:constraint\s+)?trigger\s+([\w\"]+)(.*?)execute\s+(?:function|procedure)\s+"
    r"([\w.\"]+)\s*\((.*?)\)\s*(?:;|$)",
    re.I | re.S,
)
_ON = re.compile(r"\bon\s+([\w.\"]+)", re.I)
_INSERT = re.compile(r"insert\s+into\s+([\w.\"]+)\s*\(([^)]*)\)\s*values\s*\(", re.I)
_ASSIGN = re.compile(r"^([a-z_]\w*)\s*(?:[\w\[\]() ,]*?)\s*(?::=|\bdefault\b)\s*(.+)$", re.I | re.S)
_STATUS = re.compile(r"\b(?:new\.)?status\s*=\s*'(\w+)'", re.I)
_LEAD = re.compile(r"^(?:.*\b(?:then|else|begin|loop|declare)\b)?\s*", re.I | re.S)


def _name(raw: str) -> str:
    return raw.replace('"', "").split(".")[-1].lower()


def _line_at(text: str, offset: int, base: int) -> int:
    return base + text.count("\n", 0, offset)


_SPECIAL = "()[]'"


@lru_cache(maxsize=8)
def _split_pattern(sep: str) -> re.Pattern[str]:
    return re.compile(r"[()\[\]']|" + re.escape(sep))


def split_top(s: str, sep: str = ",") -> list[str]:
    """Split on ``sep`` outside quotes (``''`` escapes a quote), parentheses and brackets.

    A regex jumps from one quote, bracket or separator to the next (the text between is
    never looked at in Python); an unbalanced ``)`` leaves the depth below zero, where
    nothing splits, and an unterminated quote runs to the end."""
    if not sep or any(c in _SPECIAL for c in sep):
        return _split_top_chars(s, sep)
    pattern = _split_pattern(sep)
    out: list[str] = []
    depth = start = pos = 0
    n = len(s)
    while True:
        m = pattern.search(s, pos)
        if m is None:
            break
        i = m.start()
        ch = s[i]
        if ch == "'":
            j = i + 1
            while True:  # to the quote that closes it (a doubled quote is an escaped one)
                k = s.find("'", j)
                if k < 0:
                    j = n
                    break
                if k + 1 < n and s[k + 1] == "'":
                    j = k + 2
                    continue
                j = k + 1
                break
            pos = j
        elif ch in "([":
            depth += 1
            pos = i + 1
        elif ch in ")]":
            depth -= 1
            pos = i + 1
        elif depth == 0:
            out.append(s[start:i])
            start = pos = i + len(sep)
        else:
            pos = i + 1
    out.append(s[start:])
    return [p.strip() for p in out]


def _split_top_chars(s: str, sep: str) -> list[str]:
    """:func:`split_top` one character at a time (for a separator holding a quote or a bracket)."""
    out, depth, cur, i, quote = [], 0, [], 0, False
    while i < len(s):
        ch = s[i]
        if quote:
            cur.append(ch)
            if ch == "'":
                if i + 1 < len(s) and s[i + 1] == "'":
                    cur.append("'")
                    i += 1
                else:
                    quote = False
        elif ch == "'":
            quote = True
            cur.append(ch)
        elif ch in "([":
            depth += 1
            cur.append(ch)
        elif ch in ")]":
            depth -= 1
            cur.append(ch)
        elif depth == 0 and sep and s.startswith(sep, i):
            out.append("".join(cur))
            cur = []
            i += len(sep)
            continue
        else:
            cur.append(ch)
        i += 1
    out.append("".join(cur))
    return [p.strip() for p in out]


def _matching_paren(s: str, start: int) -> int:
    """Index of the ``)`` closing the ``(`` just before ``start`` (or len(s))."""
    depth, quote = 1, False
    for i in range(start, len(s)):
        ch = s[i]
        if quote:
            if ch == "'":
                quote = False
        elif ch == "'":
            quote = True
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return i
    return len(s)


def parse_expr(raw: str, env: dict[str, SqlExpr] | None = None) -> SqlExpr:
    """A SQL value expression as a symbolic expression (variables looked up in ``env``)."""
    s = re.sub(r"::\s*[\w\" ]+(\[\])?", "", raw.strip()).strip()
    if not s:
        return ["?", raw]
    parts = split_top(s, "||")
    if len(parts) > 1:
        return ["cat", [parse_expr(p, env) for p in parts]]
    if s.startswith("(") and s.endswith(")") and _matching_paren(s, 1) == len(s) - 1:
        return parse_expr(s[1:-1], env)
    if s.startswith("'") and s.endswith("'") and len(s) >= 2 and "'" not in s[1:-1].replace("''", ""):
        return ["s", s[1:-1].replace("''", "'")]
    low = s.lower()
    m = re.fullmatch(r"tg_argv\s*\[\s*(\d+)\s*\]", low)
    if m:
        return ["argv", int(m.group(1))]
    if low.startswith("array[") and s.endswith("]"):
        return ["arr", [parse_expr(p, env) for p in split_top(s[6:-1]) if p]]
    m = re.fullmatch(r"(\w+)\s*\((.*)\)", s, re.S)
    if m:
        fn, args = m.group(1).lower(), split_top(m.group(2))
        if fn == "replace" and len(args) == 3:
            return ["replace", parse_expr(args[0], env), parse_expr(args[1], env), parse_expr(args[2], env)]
        if fn in ("coalesce", "greatest", "least"):
            return ["|", [parse_expr(a, env) for a in args]]
        if fn in ("lower", "upper", "trim", "btrim") and len(args) == 1:
            return [fn, parse_expr(args[0], env)]
        if fn in ("concat",):
            return ["cat", [parse_expr(a, env) for a in args]]
        return ["?", s[:120]]
    if re.fullmatch(r"(new|old)\.\"?\w+\"?", low):
        return ["col", "NEW." + s.split(".", 1)[1].strip('"')]
    if re.fullmatch(r"[a-z_]\w*", low):
        if env is not None and low in env:
            return env[low]
        return ["?", s]
    return ["?", s[:120]]


def _statements(body: str) -> Iterable[tuple[int, str]]:
    """(offset, text) of the ``;``-separated statements of a plpgsql body."""
    offset = 0
    for part in split_top(body, ";"):
        idx = body.find(part, offset) if part else offset
        if idx < 0:
            idx = offset
        yield idx, part
        offset = idx + len(part)


def _inserts(body: str, base_line: int, table: str) -> list[dict[str, Any]]:
    """The ``INSERT INTO <table>`` statements of a function body, values evaluated symbolically."""
    env: dict[str, SqlExpr] = {}
    status: str | None = None
    out: list[dict[str, Any]] = []
    for offset, stmt in _statements(body):
        cond = list(_STATUS.finditer(stmt))
        if re.search(r"\b(if|elsif)\b", stmt, re.I) and cond:
            status = cond[-1].group(1).upper()
        elif re.search(r"\belse\b|\bend\s+if\b", stmt, re.I):
            status = None
        clean = _LEAD.sub("", stmt, count=1).strip() if re.search(
            r"\b(then|else|begin|loop|declare)\b", stmt, re.I) else stmt.strip()
        m = _INSERT.search(clean)
        if m:
            if _name(m.group(1)) != table:
                continue
            cols = [c.strip().strip('"').lower() for c in m.group(2).split(",")]
            start = m.end()
            values = split_top(clean[start:_matching_paren(clean, start)])
            row = dict(zip(cols, values, strict=False))
            rel = stmt.find(clean[:20]) if clean else 0
            item: dict[str, Any] = {"line": _line_at(body, offset + max(rel, 0), base_line)}
            for col in ("type", "target_services", "emitter"):
                if col in row:
                    item[col] = parse_expr(row[col], env)
            if status:
                item["status"] = status
            out.append(item)
            continue
        a = _ASSIGN.match(clean)
        if a and not clean.lower().startswith(("select", "update", "delete", "return", "perform", "raise")):
            env[a.group(1).lower()] = parse_expr(a.group(2), env)
    return out


def sql_facts(text: str, base_line: int, symbol: str | None, table: str = "event_queue") -> list[list[Any]]:
    """Functions (``["fn", name, line, inserts]``), triggers (``["trg", name, table, fn, args, line]``)
    and inserts outside functions (``["ins", line, insert]``) found in ``text``."""
    out: list[list[Any]] = []
    low = text.lower()
    spans: list[tuple[int, int]] = []
    for m in _FUNC.finditer(text):
        d = _DOLLAR.search(text, m.end())
        if d is None:
            continue
        closing = text.find(d.group(0), d.end())
        if closing < 0:
            continue
        body = text[d.end():closing]
        spans.append((d.end(), closing))
        line = _line_at(text, m.start(), base_line)
        out.append(["fn", _name(m.group(1)), line, _inserts(body, _line_at(text, d.end(), base_line), table)])
    for m in _TRIGGER.finditer(text):
        if any(a <= m.start() < b for a, b in spans):
            continue
        on = _ON.search(m.group(2))
        args = [parse_expr(a) for a in split_top(m.group(4)) if a.strip()]
        out.append(["trg", _name(m.group(1)), _name(on.group(1)) if on else "", _name(m.group(3)), args,
                    _line_at(text, m.start(), base_line)])
    if "insert" in low:
        for m in _INSERT.finditer(text):
            if any(a <= m.start() < b for a, b in spans) or _name(m.group(1)) != table:
                continue
            inner = _inserts(text[m.start():], _line_at(text, m.start(), base_line), table)
            if inner:
                out.append(["ins", inner[0]["line"], inner[0]])
    return out


def evaluate(expr: SqlExpr, argv: list[SqlExpr], emitters: list[str]) -> list[tuple[str, bool, str | None]]:
    """Possible string values of ``expr``: (value, heuristic, emitter it was computed for)."""
    tag = expr[0]
    if tag == "s":
        return [(expr[1], False, None)]
    if tag == "argv":
        n = expr[1]
        return evaluate(argv[n], [], emitters) if n < len(argv) else []
    if tag == "col":
        if expr[1].lower() == "new.emitter":
            return [(e, True, e) for e in emitters]
        return []
    if tag == "|":
        return [v for e in expr[1] for v in evaluate(e, argv, emitters)]
    if tag in ("lower", "upper", "trim", "btrim"):
        fn = {"lower": str.lower, "upper": str.upper}.get(tag, str.strip)
        return [(fn(v), h, em) for v, h, em in evaluate(expr[1], argv, emitters)]
    if tag == "replace":
        targets = evaluate(expr[1], argv, emitters)
        olds = evaluate(expr[2], argv, emitters)
        news = evaluate(expr[3], argv, emitters)
        if len(olds) != 1 or len(news) != 1:
            return []
        return [(v.replace(olds[0][0], news[0][0]), h, em) for v, h, em in targets]
    if tag == "cat":
        results: list[tuple[str, bool, str | None]] = [("", False, None)]
        for part in expr[1]:
            values = evaluate(part, argv, emitters)
            if not values:
                return []
            nxt = []
            for acc, h, em in results:
                for v, h2, em2 in values:
                    if em is not None and em2 is not None and em != em2:
                        continue
                    nxt.append((acc + v, h or h2, em or em2))
            results = nxt
        return results
    return []


def evaluate_list(expr: SqlExpr | None, argv: list[SqlExpr], emitters: list[str]) -> list[tuple[str, bool, str | None]]:
    """Values of an ``ARRAY[...]`` (or a single value) expression."""
    if expr is None:
        return []
    if expr[0] == "arr":
        return [v for item in expr[1] for v in evaluate(item, argv, emitters)]
    if expr[0] == "s" and expr[1].startswith("{") and expr[1].endswith("}"):
        return [(p.strip().strip('"'), False, None) for p in expr[1][1:-1].split(",") if p.strip()]
    return evaluate(expr, argv, emitters)
