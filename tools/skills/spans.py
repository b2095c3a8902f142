"""The code a runbook names: inline code spans and fenced blocks of a markdown body, with lines.

Runbooks name tables, streams, job types, classes, paths and commands inside backticks or in
fenced blocks; prose around them is never read as a name (precision over recall).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

FENCE = re.compile(r"^\s*(```+|~~~+)\s*([\w+-]*)")
INLINE = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")


@dataclass(frozen=True)
class Span:
    """One piece of code in the body: its text, the fenced block's language, and its line."""

    text: str
    line: int
    lang: str | None = None
    """The fence's language (``sql``, ``bash``...), ``None`` for an inline span."""


def code_spans(body: str, first_line: int = 1) -> list[Span]:
    """Inline spans (one each) and fenced blocks (one span per non-empty line), in file order."""
    spans: list[Span] = []
    fence: str | None = None
    lang: str | None = None
    for offset, line in enumerate(body.splitlines()):
        number = first_line + offset
        opened = FENCE.match(line)
        if fence is None and opened:
            fence, lang = opened.group(1), (opened.group(2) or "").lower()
            continue
        if fence is not None:
            if line.strip().startswith(fence[:3]) and line.strip().strip(fence[0]) == "":
                fence, lang = None, None
            elif line.strip():
                spans.append(Span(line.strip(), number, lang or ""))
            continue
        for match in INLINE.finditer(line):
            spans.append(Span(match.group(1).strip(), number, None))
    return spans
