"""The command line's one table renderer: fits the terminal and never cuts a cell.

A cell that does not fit its column is wrapped over several lines (after a space, a ``/`` or a
``,``; a long token is split, never shortened), so ``file:line`` locations, ids and error texts
are always whole. When even the narrowest columns do not fit (many columns at ``COLUMNS=60``) the
table turns into one block per row (``header: value``, wrapped with a hanging indent). Standard
library only: importing it costs nothing measurable (bench/rich_startup.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

MIN_COLUMN = 12
"""A column is not made narrower than this (or than its widest cell, when that is shorter)."""
MAX_WORD = 24
"""A column is at least as wide as its longest word up to this (a verdict code, an id is not split)."""
GAP = "  "

_LOCATION = re.compile(r"[^\s/,]+:\d+(?:[-:]\d+)?")
"""A file name with its line (``x.repository.ts:42``): one token, never split, its column at least this wide."""
_TOKENS = re.compile(r"\s+|[^\s/,]+:\d+(?:[-:]\d+)?[,]?|[^\s/,.]+[/,.]?|[/,.]")
"""Break points: after a space, a ``/``, a ``,`` or a ``.`` (never inside a file name with its line)."""


def wrap_cell(text: str, width: int, indent: str = "") -> list[str]:
    """``text`` over lines of at most ``width`` characters, every character kept (spaces at a break dropped);
    lines after the first start with ``indent``."""
    width = max(1, width)
    if len(text) <= width:
        return [text]
    room = max(1, width - len(indent))
    lines: list[str] = []
    line = ""

    def cap() -> int:
        return width if not lines else room

    def close() -> None:
        lines.append(line.rstrip())

    for token in _TOKENS.findall(text):
        if token.isspace():
            if line and len(line) + len(token) <= cap():
                line += token
            elif line:
                close()
                line = ""
            continue
        if len(line) + len(token) <= cap():
            line += token
            continue
        if line.strip():
            close()
        line = ""
        while len(token) > cap():  # a token longer than the line: split it, keep every character
            line = token[: cap()]
            close()
            token = token[len(line):]
            line = ""
        line = token
    if line.strip() or not lines:
        close()
    return [lines[0], *(indent + rest for rest in lines[1:])]


def _cell(value: Any) -> str:
    text = "" if value is None else str(value)
    return " ".join(text.split("\n")) if "\n" in text else text


def _fit(natural: list[int], floor: list[int], total: int) -> list[int] | None:
    """Column widths within ``total`` (narrowing the widest first), or None when the minimums do not fit."""
    widths = list(natural)

    def span() -> int:
        return sum(widths) + len(GAP) * (len(widths) - 1)

    if sum(floor) + len(GAP) * (len(widths) - 1) > total:
        return None
    while span() > total:
        widest = max((i for i in range(len(widths)) if widths[i] > floor[i]), key=lambda i: widths[i])
        widths[widest] -= min(widths[widest] - floor[widest], span() - total, max(1, widths[widest] // 10))
    return widths


def render_table(
    headers: Sequence[str], rows: Sequence[Sequence[Any]], *, width: int | None = None,
    paint: Callable[[str], str] | None = None,
) -> str:
    """``headers`` and ``rows`` as text at most ``width`` columns wide (None: no limit), no cell cut.

    ``paint`` (optional) colours a padded cell (status words); it is applied after the layout.
    """
    body = [[_cell(v) for v in row] for row in rows]
    natural = [len(h) for h in headers]
    located = [0] * len(headers)
    worded = [min(len(h), MAX_WORD) for h in headers]
    for row in body:
        for i, value in enumerate(row):
            natural[i] = max(natural[i], len(value))
            located[i] = max([located[i], *(len(m) for m in _LOCATION.findall(value))])
            worded[i] = max([worded[i], *(min(len(w), MAX_WORD) for w in value.split())])
    floor = [max(min(w, MIN_COLUMN), loc, word) for w, loc, word in zip(natural, located, worded, strict=True)]
    widths = natural if width is None else _fit(natural, floor, width)
    if widths is None:
        return _blocks(headers, body, width or 80, paint)
    out = [GAP.join(h.ljust(widths[i]) for i, h in enumerate(headers)).rstrip(), GAP.join("-" * w for w in widths)]
    for row in body:
        cells = [wrap_cell(value, widths[i]) for i, value in enumerate(row)]
        for n in range(max(len(c) for c in cells)):
            parts = []
            for i, lines in enumerate(cells):
                text = (lines[n] if n < len(lines) else "").ljust(widths[i])
                parts.append(paint(text) if paint and n == 0 else text)
            out.append(GAP.join(parts).rstrip())
    return "\n".join(out)


def _blocks(headers: Sequence[str], body: list[list[str]], width: int, paint: Callable[[str], str] | None) -> str:
    """One block per row: ``header: value`` lines, the value wrapped under itself (or below a long header)."""
    label = min(max(len(h) for h in headers) + 2, width // 3)
    out: list[str] = []
    for row in body:
        if out:
            out.append("")
        for header, value in zip(headers, row, strict=False):
            head = f"{header}:"
            if len(head) + 1 > label:
                out.append(head)
                head = ""
            lines = wrap_cell(value, width - label) or [""]
            first = paint(lines[0]) if paint else lines[0]
            out.append((head.ljust(label) + first).rstrip())
            out.extend((" " * label + line).rstrip() for line in lines[1:])
    return "\n".join(out)


def legend(marks: dict[str, str]) -> str:
    """``legend: ok = healthy, BROKEN = ...`` for the marks a table uses."""
    return "legend: " + ", ".join(f"{mark} = {meaning}" for mark, meaning in marks.items())


def fit_lines(text: str, width: int | None) -> str:
    """Every line of ``text`` longer than ``width`` wrapped (continuations indented two more spaces), none cut."""
    if width is None:
        return text
    out: list[str] = []
    for line in text.splitlines():
        indent = " " * min(len(line) - len(line.lstrip()) + 2, width // 2)
        out.extend(wrap_cell(line, width, indent) if len(line) > width else [line])
    return "\n".join(out)
