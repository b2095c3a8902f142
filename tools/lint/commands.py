"""``mesh-mcp lint``: the workspace's flow defects for humans and CI.

Exit status: 1 when a finding at or above ``--fail-on`` (default ``error``) is not accepted by
the baseline, else 0; 2 on a usage or configuration error. ``--sarif FILE`` also writes SARIF
2.1.0, ``--write-baseline FILE`` records today's findings so later runs with ``--baseline FILE``
fail only on new ones.
"""

from __future__ import annotations

import argparse

from server.cli_support import print_json, print_text
from tools.lint import baseline as baselines
from tools.lint.engine import lint, narrow
from tools.lint.model import severity_rank
from tools.lint.sarif import write_sarif
from tools.mesh_index.commands import ProgressBar, make_service


def cmd_lint(args: argparse.Namespace) -> int:
    codes = args.codes.split(",") if args.codes else None
    base = baselines.Baseline.load(args.baseline) if args.baseline else None
    index = make_service(args)
    try:
        index.refresh(ProgressBar())
        report = lint(index, codes, "info", base)
        if args.write_baseline:
            baselines.write(args.write_baseline, report.findings)
            print(f"baseline {args.write_baseline}: {len(report.findings)} finding(s) recorded")
            return 0
        failing = [f for f in report.findings if severity_rank(f.severity) >= severity_rank(args.fail_on)]
        shown = narrow(report, args.min_severity)
        if args.sarif:
            write_sarif(args.sarif, shown.findings, index.workspace)
        if args.json:
            print_json(shown)
        else:
            print_text(shown.summary_text())
        return 1 if failing else 0
    finally:
        index.close()
