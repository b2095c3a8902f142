"""What the agent-view tests check a result for (the seeded demo is the ``demo_run`` fixture, conftest.py).

:func:`must_show` collects, from a tool's structured content, every identifier (keys ``id``,
``*_id``, ``*_ids``, ``ids``), every verdict / finding / anomaly code and every next-step
sentence: the things a client that passes only the text content must still see.
"""

from __future__ import annotations

from typing import Any

RAW = frozenset({"columns", "fields", "data", "params", "checks", "operation", "config", "stacktrace", "payload"})
"""Raw data copied from a row, an entry or a plan's operations: values, not identifiers the agent calls with."""


POSITIONS = frozenset({"last_delivered_id", "first_entry_id", "last_generated_id", "max_deleted_entry_id",
                       "first_id", "last_id", "min_id", "max_id", "newest_id", "oldest_undelivered_id"})
"""Stream positions (where a group or the stream stands), not ids of things a tool is called with;
the trace texts still show the ones that explain a verdict (trimmed: the first entry)."""


def _is_id_key(key: str) -> bool:
    return key not in POSITIONS and (key in ("id", "ids") or key.endswith(("_id", "_ids")))


def must_show(structured: Any) -> set[tuple[str, str]]:
    """(kind, value) pairs the text must contain: ('id', ...), ('code', ...), ('next_step', ...)."""
    found: set[tuple[str, str]] = set()

    def walk(value: Any, key: str = "") -> None:
        if isinstance(value, dict):
            if key in RAW:
                return
            code = value.get("code")
            if isinstance(code, str) and any(k in value for k in ("severity", "sentence", "message")):
                found.add(("code", code))
            for k, v in value.items():
                walk(v, k)
        elif isinstance(value, list):
            if key in RAW:
                return
            for item in value:
                walk(item, key)
        elif isinstance(value, str) and value:
            if _is_id_key(key):
                found.add(("id", value))
            elif key == "next_step":
                found.add(("next_step", value))

    walk(structured)
    return found


def text_of(result: Any) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)
