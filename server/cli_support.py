"""Shared pieces of the command line: settings from flags, tables, JSON, logging."""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from server.text_safety import colour

if TYPE_CHECKING:  # settings (pydantic) are imported by the commands that read them, not by ``--help``
    from server.config import Settings


def setup_logging(verbose: bool = False) -> None:
    """Logs go to stderr, never stdout (stdout is the MCP channel on stdio)."""
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.WARNING,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


def settings_from_args(args: argparse.Namespace, **overrides: Any) -> Settings:
    """Settings from ``--workspace`` / ``--config`` / ``MESH_*``; raises ConfigError."""
    from server.config import load_settings

    extra: dict[str, Any] = dict(overrides)
    if getattr(args, "enable_remediation", False):
        extra["enable_remediation"] = True
    if getattr(args, "allow_unprotected_approvers", False):
        extra["approval"] = {**extra.get("approval", {}), "allow_unprotected_approvers": True}
    return load_settings(
        config_file=getattr(args, "config", None),
        workspace=getattr(args, "workspace", None),
        overrides=extra or None,
    )


def add_common_flags(parser: argparse.ArgumentParser, *, json_flag: bool = True) -> None:
    parser.add_argument("--workspace", type=Path, help="workspace root (folder of repositories)")
    parser.add_argument("--config", type=Path, help="mesh.toml to read (default: <workspace>/mesh.toml)")
    if json_flag:
        parser.add_argument("--json", action="store_true", help="print JSON for machines")


def add_detail_flag(parser: argparse.ArgumentParser) -> None:
    """``--detail summary|full`` of the commands whose MCP tool takes ``detail`` (it shapes ``--json``)."""
    parser.add_argument(
        "--detail", choices=["summary", "full"], default="full",
        help="with --json: full (default) prints the whole result; summary the compact shape MCP tools return "
        "by default (verdict, next step, ids, counts, first items, what was omitted)")


def print_json(value: Any) -> None:
    from pydantic import BaseModel

    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    json.dump(value, sys.stdout, indent=2, ensure_ascii=False, default=str)
    sys.stdout.write("\n")


SEVERITY_COLOURS = {
    "ok": "32", "pass": "32", "good": "32",
    "warn": "33", "warning": "33", "unknown": "33", "?": "33", "slow": "33", "info": "36",
    "fail": "31", "FAIL": "31", "error": "31", "unavailable": "31", "broken": "31",
}
"""ANSI colours of status words: green good, yellow doubtful, red broken."""


def use_colour(stream: Any = None) -> bool:
    """Colour only on a terminal, and never when ``NO_COLOR`` is set (https://no-color.org)."""
    stream = sys.stdout if stream is None else stream
    return not os.environ.get("NO_COLOR") and hasattr(stream, "isatty") and stream.isatty()


def colour_status(padded: str) -> str:
    """``padded`` (a table cell, spaces included) coloured by the status word it holds."""
    code = SEVERITY_COLOURS.get(padded.strip())
    return colour(code, padded) if code else padded  # shown as colour by the CLI's TerminalWriter only


def terminal_width() -> int | None:
    """``COLUMNS``, else the terminal's width; ``None`` (no limit) when stdout is a pipe or a file."""
    if not os.environ.get("COLUMNS") and not (hasattr(sys.stdout, "isatty") and sys.stdout.isatty()):
        return None
    return max(40, shutil.get_terminal_size((100, 24)).columns)


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(1, width - 1)] + "…"


def format_table(
    headers: Sequence[str], rows: Sequence[Sequence[Any]], *, max_width: int | None = None,
    width: int | None = None, colour: bool = False,
) -> str:
    """A plain-text table that fits ``width`` (by default the terminal's; unlimited into a pipe or a file).

    Cells are cut at ``max_width`` characters when it is given; then, while the table is wider
    than ``width``, the widest column is narrowed (down to 8 characters), its cells ending with
    an ellipsis. With ``colour``, status words (ok, FAIL, warning, ...) are coloured.
    """
    total = width or terminal_width() or 1_000_000

    def cell(value: Any) -> str:
        text = "" if value is None else str(value).replace("\n", " ")
        return _cut(text, max_width) if max_width else text

    body = [[cell(v) for v in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in body:
        for i, value in enumerate(row):
            widths[i] = max(widths[i], len(value))
    while sum(widths) + 2 * (len(widths) - 1) > total:
        widest = max(range(len(widths)), key=lambda i: widths[i])
        if widths[widest] <= 8:
            break
        widths[widest] -= 1

    def line(values: Sequence[str], paint: bool) -> str:
        cells = [_cut(v, widths[i]).ljust(widths[i]) for i, v in enumerate(values)]
        if paint:
            cells = [colour_status(c) for c in cells]
        return "  ".join(cells).rstrip()

    lines = [line(list(headers), False), "  ".join("-" * w for w in widths)]
    lines.extend(line(row, colour) for row in body)
    return "\n".join(lines)


def print_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], *, max_width: int | None = None) -> None:
    print(format_table(headers, rows, max_width=max_width, colour=use_colour()))


def fail(message: str, code: int = 2) -> int:
    """Print one line on stderr and return the exit status."""
    print(f"mesh-mcp: {message}", file=sys.stderr)
    return code
