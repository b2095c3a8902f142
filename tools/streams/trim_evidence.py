"""Proof that MAXLEN trimming removed entries of a stream, or the lack of it.

A missing entry is ``trimmed`` only with evidence; otherwise it is just not found:

- Redis >= 7 (``XINFO STREAM`` has ``entries-added``): the stream has lost
  ``entries-added - length`` entries. None lost: nothing was trimmed (nor deleted). Some
  lost: the entry was trimmed when it is older than the first entry still there and
  ``max-deleted-entry-id`` (moved by XDEL only, never by trimming) is older than it; when
  an XDEL reached it, deleted and trimmed cannot be told apart and the answer says so.
- Redis 6.2 (no such field): the entry is older than the first entry *and* the stream is
  at the configured MAXLEN (``MAXLEN ~ n`` never trims below ``n``): a shorter stream has
  not been trimmed by the runner's XADD.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from tools.streams.ids import StreamId, try_parse
from tools.streams.values import as_int, text


class TrimEvidence(BaseModel):
    """What ``XINFO STREAM`` proves about entries older than ``before``."""

    trimmed: bool = Field(description="the entries before `before` were removed by trimming (with proof)")
    rule: str = Field(description="the evidence rule applied and the figures it used")
    length: int
    first_entry_id: str | None = None
    entries_added: int | None = Field(default=None, description="Redis >= 7: entries ever added")
    max_deleted_entry_id: str | None = Field(default=None, description="Redis >= 7")
    recorded_first_entry_id: str | None = Field(default=None, description="Redis >= 7")
    maxlen: int = Field(description="the configured MAXLEN of the runner's XADD")


def _first_id(sinfo: dict[str, Any]) -> str | None:
    first = sinfo.get("first-entry")
    if first:
        return text(first[0])
    return None


def trim_evidence(
    sinfo: dict[str, Any], maxlen: int, before: StreamId | None, tolerance_ms: int = 0
) -> TrimEvidence:
    """Whether entries older than ``before`` (None: any entry) were removed by trimming.

    ``before`` is a push time known within ``tolerance_ms`` (the row's times are the
    database's and the runner's clocks): "older than the first entry" and "reached by the
    deletions" are judged with that slack.
    """
    length = int(sinfo.get("length", 0) or 0)
    first = _first_id(sinfo)
    first_id = try_parse(first)
    if before is not None and tolerance_ms:
        before = StreamId(max(0, before.ms - tolerance_ms), 0)
    older = before is None or first_id is None or before < first_id
    base: dict[str, Any] = {"length": length, "first_entry_id": first, "maxlen": maxlen}
    if "entries-added" in sinfo:
        added = as_int(sinfo.get("entries-added")) or 0
        max_deleted = text(sinfo.get("max-deleted-entry-id")) or "0-0"
        recorded = text(sinfo.get("recorded-first-entry-id"))
        base.update(entries_added=added, max_deleted_entry_id=max_deleted, recorded_first_entry_id=recorded)
        lost = added - length
        if lost <= 0:
            return TrimEvidence(trimmed=False, rule=f"entries-added {added} = length {length}: the stream has "
                                "lost no entry (never trimmed nor deleted)", **base)
        if not older:
            return TrimEvidence(trimmed=False, rule=f"{lost} entries were removed, but the first entry {first} is "
                                "not newer than the push time: not trimmed", **base)
        deleted = try_parse(max_deleted) or StreamId(0, 0)
        if before is not None and deleted >= before:
            return TrimEvidence(trimmed=False, rule=f"{lost} entries were removed and max-deleted-entry-id "
                                f"{max_deleted} (moved by XDEL only) reaches the push time: deleted by XDEL or "
                                "trimmed, Redis cannot tell which", **base)
        return TrimEvidence(trimmed=True, rule=f"entries-added {added} > length {length}: {lost} entries were "
                            f"removed from the head (the first entry is now {first or '(none)'}), and "
                            f"max-deleted-entry-id {max_deleted} shows no XDEL reached them: trimmed", **base)
    if not older:
        return TrimEvidence(trimmed=False, rule=f"the first entry {first} is not newer than the push time: "
                            "not trimmed", **base)
    if length >= maxlen:
        return TrimEvidence(trimmed=True, rule=f"the first entry {first or '(none)'} is newer than the push time "
                            f"and the length {length} is at the configured MAXLEN {maxlen}: trimmed", **base)
    return TrimEvidence(trimmed=False, rule=f"the length {length} is under the configured MAXLEN {maxlen} "
                        "(MAXLEN ~ never trims below it): not trimmed by the runner (XDEL, or pushed elsewhere)",
                        **base)
