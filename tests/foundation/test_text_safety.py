"""Workspace text made safe for a terminal and for Markdown (server/text_safety.py)."""

from __future__ import annotations

import io
import json

from server import text_safety as ts


def test_control_characters_are_shown_not_obeyed() -> None:
    evil = "a\x1b]0;title\x07b\x1b[2J\rc\u202ed\x9b6n\u2028e"
    shown = ts.visible(evil + "\nnext\tcell")
    assert shown == "a\\u001b]0;title\\u0007b\\u001b[2J\\u000dc\\u202ed\\u009b6n\\u2028e\nnext\tcell"
    assert ts.one_line("x\ny\tz") == "x\\u000ay\\u0009z"
    assert json.loads(f'"{ts.visible(evil)}"') == evil, "the escapes are JSON's: JSON output stays JSON"


def test_no_line_can_open_a_markdown_fence() -> None:
    text = "head\n```mermaid\n  ~~~~js\n    ```indented code is no fence\nplain ``` inside"
    assert ts.defuse_fences(text) == ("head\n\\```mermaid\n  \\~~~~js\n    ```indented code is no fence\n"
                                      "plain ``` inside")


def test_only_the_clis_own_colours_and_carriage_returns_reach_the_terminal() -> None:
    out = io.StringIO()
    writer = ts.TerminalWriter(out)
    forged = "\ue000" + "0" * 12 + "31\ue001"  # a mark without the process's nonce
    writer.write(ts.colour("31", "FAIL") + " \x1b[31mfake" + forged + ts.carriage_return() + "\r")
    assert out.getvalue() == "\x1b[31mFAIL\x1b[0m \\u001b[31mfake" + forged + "\r\\u000d"
    assert ts.plain(ts.colour("32", "ok")) == "ok"
