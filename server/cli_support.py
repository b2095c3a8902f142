"""Shared pieces of the command line: settings from flags, tables, JSON, logging."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from server.config import Settings, load_settings


def setup_logging(verbose: bool = False) -> None:
    """Logs go to stderr, never stdout (stdout is the MCP channel on stdio)."""
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.WARNING,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


def settings_from_args(args: argparse.Namespace, **overrides: Any) -> Settings:
    """Settings from ``--workspace`` / ``--config`` / ``MESH_*``; raises ConfigError."""
    extra: dict[str, Any] = dict(overrides)
    if getattr(args, "enable_remediation", False):
        extra["enable_remediation"] = True
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


def print_json(value: Any) -> None:
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    json.dump(value, sys.stdout, indent=2, ensure_ascii=False, default=str)
    sys.stdout.write("\n")


def format_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], *, max_width: int = 60) -> str:
    """A plain-text table; cells are cut at ``max_width`` characters."""

    def cell(value: Any) -> str:
        text = "" if value is None else str(value)
        text = text.replace("\n", " ")
        return text if len(text) <= max_width else text[: max_width - 1] + "…"

    body = [[cell(v) for v in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in body:
        for i, value in enumerate(row):
            widths[i] = max(widths[i], len(value))
    lines = ["  ".join(h.ljust(widths[i]) for i, h in enumerate(headers)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines.extend("  ".join(v.ljust(widths[i]) for i, v in enumerate(row)).rstrip() for row in body)
    return "\n".join(lines)


def print_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], *, max_width: int = 60) -> None:
    print(format_table(headers, rows, max_width=max_width))


def fail(message: str, code: int = 2) -> int:
    """Print one line on stderr and return the exit status."""
    print(f"mesh-mcp: {message}", file=sys.stderr)
    return code
