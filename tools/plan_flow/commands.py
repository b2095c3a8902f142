"""``mesh-mcp plan-flow KIND NAME --domain D``: the edit plan for humans (``--json`` for machines)."""

from __future__ import annotations

import argparse

from server.cli_support import add_common_flags


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("plan-flow", help="the edit plan for a new job or event type (read-only)")
    add_common_flags(p)
    p.add_argument("kind", choices=["job", "event"])
    p.add_argument("name", help="the new member, UPPER_SNAKE_CASE")
    p.add_argument("--domain", required=True, help="its domain, e.g. event, user")
    p.add_argument("--queue", help="jobs: an existing queue or a new queue member (then a worker for it)")
    p.add_argument("--emitter", help="repository or package that writes it")
    p.add_argument("--consumer", help="events: post-processor class or repository that accepts it")


def cmd_plan_flow(args: argparse.Namespace) -> int:
    from server.cli_support import print_json
    from tools.mesh_index.commands import ProgressBar, make_service
    from tools.plan_flow.render import plan_text
    from tools.plan_flow.service import plan_flow

    index = make_service(args)
    try:
        index.refresh(ProgressBar())
        plan = plan_flow(index, args.kind, args.name, args.domain, args.queue, args.emitter, args.consumer)
        if args.json:
            print_json(plan)
        else:
            print(plan_text(plan, snippets=True))
        return 0
    finally:
        index.close()
