"""Argument parsers of the runtime commands (``mesh-mcp trace job ID`` ... ``rows SERVICE TABLE``).

One ``add_parser`` call per command, so that each is one entry in server/commands.py and here.
"""

from __future__ import annotations

import argparse
from typing import Any

from server.cli_support import add_common_flags, add_detail_flag

EXIT_EPILOG = ("exit codes: 0 nothing wrong found, 1 a problem found, 2 usage or config error (or the name "
               "given does not exist), 3 a database or Redis unavailable (the answer is incomplete)")


def _positive(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {value!r}") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {number}")
    return number


def _new(sub: Any, name: str, help_text: str) -> argparse.ArgumentParser:
    p = sub.add_parser(name, help=help_text, description=help_text, epilog=EXIT_EPILOG)
    add_common_flags(p)
    return p


def add_parsers(sub: Any) -> None:
    """Add ``trace``, ``health``, ``stream``, ``dlq``, ``queue`` and ``rows`` to ``sub`` (argparse sub-parsers)."""
    p = _new(sub, "trace", "follow one job or event hop by hop and name the first broken link (trace_job/trace_event)")
    p.add_argument("kind", choices=["job", "event"], help="job: a jobs_outbox id; event: an event_queue id")
    p.add_argument("id", help="the row id (a job id is also the BullMQ job id)")
    p.add_argument("--service", help="the service whose database holds the row (default: every service)")
    add_detail_flag(p)

    p = _new(sub, "health", "per service and table: counts, oldest ages, failures and verdicts (outbox_health)")
    p.add_argument("--service", help="only this service")

    p = _new(sub, "stream", "a Redis stream: groups, consumers, pending, lag, dead letters, anomalies (inspect_stream)")
    p.add_argument("name", help="stream key, e.g. stream:event:created")
    add_detail_flag(p)

    p = _new(sub, "dlq", "dead letters of one stream or of every dead-letter stream, oldest first (dlq_list)")
    p.add_argument("--stream", help="source stream (or its dead-letter stream); default: every dead-letter stream")
    p.add_argument("--type", help="only this event type")
    p.add_argument("--contains", help="only errors containing this text (any case)")
    p.add_argument("--count", type=_positive, default=50, help="entries per page (default 50)")
    p.add_argument("--cursor", help="next_cursor printed by the previous page")

    p = _new(sub, "queue", "a BullMQ queue, or one job of it: counts, failures, anomalies (inspect_queue)")
    p.add_argument("name", help="BullMQ queue name, e.g. event-queue")
    p.add_argument("--job-id", help="show this job (= its jobs_outbox id) in detail")
    p.add_argument("--failures", type=int, default=5, help="newest failed jobs to show (default 5)")

    p = _new(sub, "rows", "rows of jobs_outbox, event_queue or job_audit, newest first (query_outbox)")
    p.add_argument("service", help="a service of [services.<name>] in mesh.toml")
    p.add_argument("table", choices=["jobs_outbox", "event_queue", "job_audit"])
    p.add_argument("--status", help="PENDING, PROCESSING, COMPLETED or FAILED")
    p.add_argument("--type", help="exact job or event type")
    p.add_argument("--id", help="row id (for job_audit also matches job_id)")
    p.add_argument("--older-than-s", type=float, help="only rows created more than this many seconds ago")
    p.add_argument("--limit", type=_positive, default=50, help="rows per page (default 50)")
    p.add_argument("--cursor", help="next_cursor printed by the previous page")
