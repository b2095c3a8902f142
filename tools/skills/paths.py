"""Globs and paths as runbooks write them, matched against the files and folders of the workspace.

``**`` spans folders, ``*`` and ``?`` stay inside one; placeholders such as ``<domain>`` or
``{domain}`` count as ``*`` (``ms-<d>/src/migrations`` means any ``ms-*`` repository).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

PLACEHOLDER = re.compile(r"<[^<>/]*>|\{[^{}/]*\}")


def normalise(pattern: str) -> str:
    """``pattern`` with placeholders as ``*``, no leading ``./``, no trailing ``/``."""
    out = PLACEHOLDER.sub("*", pattern.strip())
    while out.startswith("./"):
        out = out[2:]
    return out.rstrip("/")


@functools.lru_cache(maxsize=2048)
def glob_regex(pattern: str) -> re.Pattern[str]:
    """The regex of a normalised glob; ``a/**`` also matches ``a`` itself."""
    parts: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            parts.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            parts.append(".*")
            i += 2
        elif pattern[i] == "*":
            parts.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            parts.append("[^/]")
            i += 1
        else:
            parts.append(re.escape(pattern[i]))
            i += 1
    body = "".join(parts)
    if body.endswith("/.*"):
        body = body[:-3] + "(?:/.*)?"
    return re.compile(f"^{body}$")


def has_wildcard(segment: str) -> bool:
    return any(c in segment for c in "*?[")


def matches_any(pattern: str, paths: Iterable[str]) -> str | None:
    """The first of ``paths`` matched by ``pattern`` (normalised), else None."""
    norm = normalise(pattern)
    if not norm:
        return None
    if not has_wildcard(norm):
        return norm if norm in paths else None  # type: ignore[operator]
    regex = glob_regex(norm)
    return next((p for p in paths if regex.match(p)), None)


def literal_head(pattern: str) -> str | None:
    """The first folder of ``pattern`` when it is literal (a repository name), else None."""
    head = normalise(pattern).split("/", 1)[0]
    return head if head and not has_wildcard(head) else None


def last_literal(pattern: str) -> str | None:
    """The last literal segment (the folder or file a moved path would still be called)."""
    for segment in reversed(normalise(pattern).split("/")):
        if segment and not has_wildcard(segment):
            return segment
    return None
