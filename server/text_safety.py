"""Text from the workspace (or a database, or Redis) made safe for a terminal and for Markdown.

The workspace is untrusted: a TypeScript string literal, a file name or a SKILL.md title can
hold terminal escape sequences (``ESC [ 2 J``, an OSC 52 clipboard write, a hyperlink, a
carriage return that overwrites the line) or a newline followed by a Markdown fence that puts
the attacker's own `````mermaid`` block (with ``click ... javascript:``) ahead of ours.

- :func:`visible` writes every control character (C0, DEL, C1), the Unicode line and paragraph
  separators and the bidirectional overrides ("Trojan Source") as a visible ``\\u001b``; it keeps
  newlines and tabs. The form is a valid JSON string escape, so JSON output stays JSON.
- :func:`one_line` does the same to newlines and tabs too: a value that must stay on its line
  (a label, a title, a file name in a sentence).
- :func:`defuse_fences` escapes every line of a text that would open or close a Markdown code
  fence, so text placed before our own fence can never start one.
- :class:`TerminalWriter` wraps ``sys.stdout`` for the command line: everything written is
  passed through :func:`visible`. The CLI's own colours are written with :func:`colour`, which
  marks them with a nonce drawn once per process (and so does a progress bar's carriage return,
  :func:`carriage_return`): the writer turns only those marks into ``ESC [ 31 m`` ... ``ESC [ 0 m``
  or ``\r``; an escape sequence (or a forged mark) in workspace text is shown.
"""

from __future__ import annotations

import re
import secrets
from typing import Any

_UNSAFE = "\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c"
_UNSAFE_KEEP_LINES = re.compile(f"[{_UNSAFE}]")
_UNSAFE_ONE_LINE = re.compile(f"[{_UNSAFE}\n\t]")
_NONCE = secrets.token_hex(6)
_MARK = re.compile(f"\ue000{_NONCE}(0|3[1-6]|r)\ue001")
_FENCE = re.compile(r"^( {0,3})(`{3,}|~{3,})", re.MULTILINE)


def _code(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def visible(text: str) -> str:
    """``text`` with every control character but newline and tab written as ``\\uXXXX``."""
    return _UNSAFE_KEEP_LINES.sub(_code, text)


def one_line(text: Any) -> str:
    """``str(text)`` on one line: newlines, tabs and every control character written as ``\\uXXXX``."""
    return _UNSAFE_ONE_LINE.sub(_code, str(text))


def defuse_fences(text: str) -> str:
    """``text`` with a backslash before any run of three backticks or tildes opening a line (a Markdown
    renderer then shows it as text instead of starting or ending a code block)."""
    return _FENCE.sub(lambda m: f"{m.group(1)}\\{m.group(2)}", text)


def colour(code: str, text: str) -> str:
    """``text`` in the ANSI colour ``code`` (``31`` red ... ``36`` cyan) once written through a
    :class:`TerminalWriter`; workspace text cannot forge it (the mark holds a per-process nonce)."""
    return f"\ue000{_NONCE}{code}\ue001{text}\ue000{_NONCE}0\ue001"


def carriage_return() -> str:
    """A carriage return the :class:`TerminalWriter` passes (a progress bar redrawing its line); one in
    workspace text is shown as ``\\u000d``."""
    return f"\ue000{_NONCE}r\ue001"


def terminal(text: str) -> str:
    """:func:`visible`, then the marks of :func:`colour` and :func:`carriage_return` written as such."""
    return _MARK.sub(lambda m: "\r" if m.group(1) == "r" else f"\x1b[{m.group(1)}m", visible(text))


def plain(text: str) -> str:
    """``text`` without the marks of :func:`colour` (for a stream that is not a terminal writer)."""
    return _MARK.sub("", text)


class TerminalWriter:
    """A text stream that writes :func:`terminal` of what it is given to ``stream`` (``sys.stdout``)."""

    def __init__(self, stream: Any):
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(terminal(text))
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:  # flush, fileno, isatty, encoding, buffer...
        return getattr(self._stream, name)
