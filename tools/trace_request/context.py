"""W3C trace context of outbox rows, and the ``trace_context_broken`` findings.

A traceparent is ``00-<trace-id 32 hex>-<span-id 16 hex>-<flags 2 hex>``. A row written by
code (``createJob`` / ``createEvent`` / ``createFollowUp``) carries the context that was
active; a row written by an SQL trigger (the job-outcome events of the audit trigger) has
NULL by design and is never a finding. For a code-written row whose causal parent has a
context, the row is broken when its traceparent is NULL, belongs to another trace, or
carries the very span of its parent (a copied context, not a child span). A traceparent
holds no parent span id, so "not a child" can only be seen as that copy.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

TRACEPARENT_RE = re.compile(r"^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")


@dataclass(frozen=True)
class TraceContext:
    trace_id: str
    span_id: str


def parse_traceparent(value: object) -> TraceContext | None:
    """The trace and span ids of a traceparent; None for NULL, '' or a malformed value."""
    if not isinstance(value, str):
        return None
    match = TRACEPARENT_RE.match(value.strip().lower())
    if not match:
        return None
    return TraceContext(trace_id=match.group(2), span_id=match.group(3))


def uuid_trace_id(value: object) -> str | None:
    """The old ``traceId`` uuid column as 32 hex digits."""
    if value is None:
        return None
    text = str(value).replace("-", "").lower()
    return text if re.fullmatch(r"[0-9a-f]{32}", text) else None


def context_problem(child: TraceContext | None, parent: TraceContext | None, has_column: bool) -> str | None:
    """Why a code-written row's context is broken with respect to its parent, or None."""
    if parent is None or not has_column:
        return None
    if child is None:
        return "its traceparent is NULL while its parent's is set: the trace is cut here"
    if child.trace_id != parent.trace_id:
        return f"its traceparent belongs to trace {child.trace_id}, not to its parent's trace {parent.trace_id}"
    if child.span_id == parent.span_id:
        return (f"it carries its parent's span {parent.span_id}: the context was copied, the hop is not a "
                "child span of its parent")
    return None
