"""Redis key names of the diagnosed system, all built from ``settings.conventions``.

Patterns hold ``{group}`` / ``{message_id}`` placeholders (e.g. ``retry_key =
"retry:post-processor:{group}:{message_id}"``); they are filled by plain replacement, so
a brace in a group name cannot break formatting. Names given by a tool user go through
:func:`check_key_name` first.
"""

from __future__ import annotations

from server.config import Conventions
from server.errors import InvalidArgument

MAX_KEY_CHARS = 512


def check_key_name(value: str, what: str) -> str:
    """A stream, group, consumer or queue name given by a user, checked; ``InvalidArgument`` if unusable."""
    if not value or not value.strip():
        raise InvalidArgument(f"{what} is empty: give the exact name (list_streams / list_queues show them)")
    if len(value) > MAX_KEY_CHARS:
        raise InvalidArgument(f"{what} is longer than {MAX_KEY_CHARS} characters")
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in value):
        raise InvalidArgument(f"{what} {value!r} contains control characters: give the exact name")
    return value


def fill(pattern: str, *, group: str = "", message_id: str = "", job_id: str = "") -> str:
    return pattern.replace("{group}", group).replace("{message_id}", message_id).replace("{job_id}", job_id)


def dlq_key(conventions: Conventions, stream: str) -> str:
    """``<stream><dlq_suffix>``: the dead-letter stream of ``stream``."""
    return f"{stream}{conventions.dlq_suffix}"


def is_dlq(conventions: Conventions, key: str) -> bool:
    return bool(conventions.dlq_suffix) and key.endswith(conventions.dlq_suffix) and key != conventions.dlq_suffix


def is_bull_events(conventions: Conventions, key: str) -> bool:
    """BullMQ's own ``<bullmq_prefix>:<queue>:events`` stream (read with XREAD, never by a consumer group)."""
    return key.startswith(f"{conventions.bullmq_prefix}:") and key.endswith(":events")


def source_of_dlq(conventions: Conventions, dlq: str) -> str:
    """The source stream of a dead-letter stream (``dlq`` without the suffix)."""
    return dlq[: -len(conventions.dlq_suffix)] if is_dlq(conventions, dlq) else dlq


def retry_key(conventions: Conventions, group: str, message_id: str) -> str:
    return fill(conventions.retry_key, group=group, message_id=message_id)


def retry_attempt_key(conventions: Conventions, group: str, message_id: str) -> str:
    return retry_key(conventions, group, message_id) + conventions.retry_attempt_suffix


def retry_last_error_key(conventions: Conventions, group: str, message_id: str) -> str:
    return retry_key(conventions, group, message_id) + conventions.retry_last_error_suffix


def retry_queue_key(conventions: Conventions, group: str) -> str:
    return fill(conventions.retry_queue_key, group=group)


def idempotency_key(conventions: Conventions, group: str, message_id: str) -> str:
    return fill(conventions.idempotency_key, group=group, message_id=message_id)


def bull_key(conventions: Conventions, queue: str, suffix: str) -> str:
    """``<bullmq_prefix>:<queue>:<suffix>`` (a state structure, ``meta``, ``id``, or a job id)."""
    return f"{conventions.bullmq_prefix}:{queue}:{suffix}"


def glob_escape(text: str) -> str:
    """``text`` with the SCAN MATCH glob characters (``* ? [ ] \\``) escaped."""
    out = []
    for ch in text:
        if ch in "*?[]\\":
            out.append("\\")
        out.append(ch)
    return "".join(out)
