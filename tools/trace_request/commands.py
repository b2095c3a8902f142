"""``mesh-mcp trace-request``: the CLI of ``trace_request`` (parser set-up and command)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from server.cli_support import add_common_flags, add_detail_flag, print_json, print_text, settings_from_args

if TYPE_CHECKING:
    from tools.trace_request.model import RequestReport


def add_parser(sub: Any) -> None:
    """Add the ``trace-request`` sub-command to ``sub`` (argparse sub-parsers)."""
    p = sub.add_parser("trace-request", help="follow one request across every service")
    add_common_flags(p)
    way = p.add_mutually_exclusive_group(required=True)
    way.add_argument("--correlation-id", help="event_queue.correlation_id")
    way.add_argument("--trace-id", help="W3C trace id (32 hex) or old traceId uuid")
    way.add_argument("--entity-id", help="a business id inside payloads (heuristic)")
    way.add_argument("--start", metavar="SERVICE:TABLE:ID", help="any outbox row")
    p.add_argument("--since-s", type=float, default=86400, help="payload search window (default 86400)")
    p.add_argument("--service", action="append", dest="services", help="search only this service (repeatable)")
    add_detail_flag(p)


def cmd_trace_request(args: argparse.Namespace) -> int:
    """Print the report (or its JSON) with its related skills.

    Exit 1 when the verdict is not ok or the answer is inconclusive."""
    import anyio  # imported here: building the CLI parser stays cheap for every other command

    from server.runtime import Runtime
    from tools.outbox.mcp_tools import catalog_of
    from tools.skills.model import attach_related
    from tools.skills.trace_links import related_to_request
    from tools.trace_request.mcp_tools import index_of
    from tools.trace_request.service import trace_request

    settings = settings_from_args(args)

    async def go() -> tuple[RequestReport, str | None]:
        runtime = Runtime(settings)
        try:
            report = await trace_request(
                runtime.connections, settings, catalog_of(runtime), correlation_id=args.correlation_id,
                trace_id=args.trace_id, entity_id=args.entity_id, start=args.start, since_s=args.since_s,
                services=args.services, index=index_of(runtime),
            )
            # the same related_skills as the tool's (the skills of the request's types, tables, queues)
            return report, attach_related(report, await related_to_request(runtime, report))
        finally:
            await runtime.aclose()

    report, related = anyio.run(go)
    if args.json:
        from tools.detail import shaped
        from tools.trace_request.summary import summarise_request

        print_json(shaped(report, args.detail, summarise_request, settings.limits.summary_items))
    else:
        marks = "legend: ok = this item's link is healthy, broken = the request breaks at this item"
        print_text("\n".join(filter(None, [report.summary_text(), marks, related])))
    return 0 if report.verdict.code == "ok" and not report.inconclusive else 1
