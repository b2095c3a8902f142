"""The arguments of ``trace_request``: exactly one way in, checked before any database is read."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from server.errors import InvalidArgument
from tools.arg_bounds import MAX_SINCE_S
from tools.outbox.query_outbox import validate_text
from tools.outbox.schema_discovery import TABLE_KINDS

Way = Literal["correlation_id", "trace_id", "entity_id", "start"]

TRACE_ID_RE = re.compile(r"^[0-9a-f]{32}$")


@dataclass(frozen=True)
class Start:
    service: str
    table: str
    """logical table kind: jobs_outbox, event_queue or job_audit"""
    id: str


@dataclass(frozen=True)
class RequestInput:
    way: Way
    value: str
    start: Start | None
    since_s: float
    services: list[str]


def normalise_trace_id(value: str) -> str:
    """A W3C trace id (32 lower-case hex), accepted with dashes (the old uuid ``traceId``) or upper case."""
    text = value.strip().lower().replace("-", "")
    if not TRACE_ID_RE.match(text) or text == "0" * 32:
        raise InvalidArgument(
            f"trace_id {value!r} is not a W3C trace id: give the 32 hex digits of the traceparent "
            "(00-<trace-id>-<span-id>-<flags>) or the uuid of the old traceId column"
        )
    return text


def parse_start(value: str, table_names: dict[str, str]) -> Start:
    """``service:table:id``; ``table`` is a logical kind or its configured real name."""
    parts = value.split(":")
    if len(parts) != 3 or not all(parts):
        raise InvalidArgument(f"start {value!r} must be SERVICE:TABLE:ID, e.g. event:event_queue:<uuid>")
    service, table, row_id = parts
    by_real = {real: kind for kind, real in table_names.items()}
    kind = table if table in TABLE_KINDS else by_real.get(table)
    if kind is None:
        known = ", ".join(sorted({*TABLE_KINDS, *by_real}))
        raise InvalidArgument(f"start table {table!r} is not an outbox table: use one of {known}")
    return Start(service=service, table=kind, id=row_id)


def validate(
    *,
    correlation_id: str | None,
    trace_id: str | None,
    entity_id: str | None,
    start: str | None,
    since_s: float,
    services: list[str] | None,
    configured: list[str],
    table_names: dict[str, str],
) -> RequestInput:
    """Check the arguments; raises InvalidArgument saying what was wrong and what to do."""
    given = {k: v for k, v in (("correlation_id", correlation_id), ("trace_id", trace_id),
                               ("entity_id", entity_id), ("start", start)) if v is not None}
    if len(given) != 1:
        named = ", ".join(given) or "none"
        raise InvalidArgument(
            "give exactly one of correlation_id, trace_id, entity_id or start "
            f"(got {named})"
        )
    way, raw = next(iter(given.items()))
    value = validate_text(way, raw, 200) or ""
    if not (0 < since_s <= MAX_SINCE_S):
        raise InvalidArgument(f"since_s must be in (0, {MAX_SINCE_S}] seconds (got {since_s})")
    if not configured:
        raise InvalidArgument("no service is configured: add [services.<name>] postgres = \"...\" to mesh.toml")
    chosen = list(configured)
    if services is not None:
        if not services:
            raise InvalidArgument("services must name at least one service, or be omitted for every service")
        unknown = [s for s in services if s not in configured]
        if unknown:
            raise InvalidArgument(
                f"unknown service(s) {', '.join(unknown)}: configured services are {', '.join(configured)}"
            )
        chosen = sorted(set(services))
    parsed_start = None
    if way == "trace_id":
        value = normalise_trace_id(value)
    elif way == "start":
        parsed_start = parse_start(value, table_names)
        if parsed_start.service not in configured:
            raise InvalidArgument(
                f"start service {parsed_start.service!r} is not configured: configured services are "
                f"{', '.join(configured)}"
            )
        if parsed_start.service not in chosen:
            chosen = sorted({*chosen, parsed_start.service})
    return RequestInput(way=way, value=value, start=parsed_start, since_s=float(since_s), services=chosen)  # type: ignore[arg-type]
