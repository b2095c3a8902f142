"""The arguments of ``mesh-mcp lint`` (kept light: ``mesh-mcp --help`` imports only this)."""

from __future__ import annotations

import argparse
from pathlib import Path

from server.cli_support import add_common_flags
from tools.lint.rules import CODES, SEVERITIES


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("lint", help="workspace-wide flow defects (SARIF for CI, baselines)")
    add_common_flags(p)
    p.add_argument("--sarif", type=Path, metavar="FILE", help="also write the shown findings as SARIF 2.1.0")
    p.add_argument("--baseline", type=Path, metavar="FILE", help="accept the findings recorded in FILE")
    p.add_argument("--write-baseline", type=Path, metavar="FILE",
                   help="record today's findings (every severity) in FILE, then exit 0")
    p.add_argument("--fail-on", choices=SEVERITIES, default="error",
                   help="exit 1 on a finding at or above this severity not accepted by the baseline (default error)")
    p.add_argument("--min-severity", choices=SEVERITIES, default="warning",
                   help="show findings at or above this (default warning; info adds the catalogue orphans)")
    p.add_argument("--codes", help="comma-separated codes to check (default all): " + ", ".join(CODES))
