"""``mesh-mcp skills check [NAME] [--json]``: the workspace's skills checked against the code.

Exit status: 0 when no finding is an error, 1 when one is, 2 on a usage or configuration error.
"""

from __future__ import annotations

import argparse

from server.cli_support import add_common_flags, print_json, settings_from_args


def add_parser(sub: argparse._SubParsersAction) -> None:
    """The ``skills`` subcommand's arguments."""
    p = sub.add_parser("skills", help="the workspace's own SKILL.md runbooks checked against the code")
    add_common_flags(p)
    p.add_argument("action", choices=["check"], help="check: report stale names, paths, sources and commands")
    p.add_argument("name", nargs="?", help="one skill (front-matter name, folder slug or URI); default: all")


def cmd_skills(args: argparse.Namespace) -> int:
    from tools.skills.check import check_skills

    report = check_skills(settings_from_args(args), args.name)
    if args.json:
        print_json(report)
    else:
        print(report.summary_text())
    return 1 if report.errors else 0
