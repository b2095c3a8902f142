"""Refusals of unknown plan ids, audited within a bound: a few in full per minute, the rest counted.

Every refused ``apply_remediation`` and ``mesh-mcp approve`` is an audit record. A refusal of a
plan id that names no plan (``NotFound``: an agent looping on invented ids) costs its caller nothing
and, recorded one by one, would grow the log without bound. So those, and only those, are bounded
per *window* of ``[approval] refusal_window_s`` seconds (default 60), shared by every process using
the same state folder:

- the first ``[approval] refusal_full_records`` (default 5) of a window are recorded as every refusal
  is (their own ``apply_refused`` / ``approval_refused`` record), with ``unknown_plan: true``,
  ``window_start`` and ``window_n`` (1 .. ``refusal_full_records``);
- the rest of the window are counted, never dropped: the count, the first and last time, the count
  per event and the first :data:`SAMPLE_IDS` plan ids are kept in ``<state_dir>/audit-refusals.json``
  (fsynced at each refusal, under its own lock), and written as one ``refusals_coalesced`` record
  (``count``, ``first``, ``last``, ``by_event``, ``sample_plan_ids``, ``window_start``) as soon as
  the window is over and the next refusal, apply or approval happens (:func:`flush_due`), in
  whichever process that is. A crash loses nothing: the count is on disk until it is written.

So a flood writes at most ``refusal_full_records + 1`` records per window. Both bounds are
settings of the user's config (:class:`RefusalBound`, read from :class:`server.config.ApprovalSettings`),
never of the workspace's ``mesh.toml``; a process decides whether the window on disk is over with
its own ``refusal_window_s``. Refusals of plans that exist
(bad, reused or expired tokens, a wrong code, an edited plan) are never coalesced: each is its own
record, as before. A counter file that cannot be read (damaged, not a regular file) is reported in
the next ``refusals_coalesced`` record and started afresh; the refusal itself is still recorded.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from server.approval.audit import AuditLog
from server.errors import MeshError
from server.filelocks import exclusive
from server.state_files import open_state_file

if TYPE_CHECKING:
    from server.config import Settings

log = logging.getLogger("mesh.audit")

SAMPLE_IDS = 5
"""Plan ids kept (the first ones) in a ``refusals_coalesced`` record."""
COUNTER_FILE = "audit-refusals.json"


@dataclass(frozen=True)
class RefusalBound:
    """The bound: ``full_records`` refusals of unknown plans in full per window of ``window_s`` seconds."""

    window_s: int
    """Length of a window, in seconds (``[approval] refusal_window_s``)."""
    full_records: int
    """Refusals recorded in full per window; the rest are counted (``[approval] refusal_full_records``)."""

    @classmethod
    def of(cls, settings: Settings) -> RefusalBound:
        """The bound of ``settings`` (validated there: 1..3600 s, 1..100 records)."""
        return cls(settings.approval.refusal_window_s, settings.approval.refusal_full_records)


def counter_path(audit: AuditLog) -> Path:
    """``audit-refusals.json`` next to the audit log."""
    return audit.path.with_name(COUNTER_FILE)


def _now() -> datetime:
    return datetime.now(UTC)


def _load(path: Path, now: datetime) -> tuple[dict[str, Any] | None, str | None]:
    """``(state, problem)``: the window on disk (None when there is none), or why it could not be used."""
    if not os.path.lexists(path):
        return None, None
    try:
        fd = open_state_file(path, os.O_RDONLY)
        with os.fdopen(fd, "rb") as fh:
            state = json.loads(fh.read(64 * 1024) or b"null")
        start = datetime.fromisoformat(state["window_start"])
        if not (isinstance(state["recorded"], int) and isinstance(state["count"], int)
                and isinstance(state["by_event"], dict) and isinstance(state["sample_plan_ids"], list)):
            raise ValueError("bad field types")
        if (start - now).total_seconds() > 1:
            raise ValueError("a window that starts in the future")
        return state, None
    except Exception as exc:  # damaged, edited, not a file: start afresh, and say so in the log
        return None, f"the refusal counter {path} could not be used ({type(exc).__name__}: {exc}); started afresh"


def _save(path: Path, state: dict[str, Any]) -> None:
    fd = open_state_file(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    with os.fdopen(fd, "wb") as fh:
        fh.write(json.dumps(state, separators=(",", ":")).encode("utf-8"))
        fh.flush()
        os.fsync(fh.fileno())


def _fresh(now: datetime, problem: str | None) -> dict[str, Any]:
    state: dict[str, Any] = {"window_start": now.isoformat(), "recorded": 0, "count": 0, "first": None,
                             "last": None, "by_event": {}, "sample_plan_ids": []}
    if problem:
        state["problem"] = problem
    return state


def _over(state: dict[str, Any], now: datetime, bound: RefusalBound) -> bool:
    return (now - datetime.fromisoformat(state["window_start"])).total_seconds() >= bound.window_s


def _write_summary(audit: AuditLog, state: dict[str, Any], bound: RefusalBound) -> None:
    count = int(state["count"])
    if count == 0 and not state.get("problem"):
        return
    parts = []
    if count:
        parts.append(f"{count} more refusal(s) of unknown plan ids between {state['first']} and {state['last']} "
                     f"were counted, not recorded one by one ({state['recorded']} recorded in full in the window of "
                     f"{bound.window_s} s from {state['window_start']})")
    if state.get("problem"):
        parts.append(state["problem"])
    audit.record("refusals_coalesced", result="coalesced", detail="; ".join(parts), count=count,
                 window_start=state["window_start"], first=state["first"], last=state["last"],
                 by_event=state["by_event"], sample_plan_ids=state["sample_plan_ids"])


def _current(audit: AuditLog, path: Path, now: datetime, bound: RefusalBound) -> dict[str, Any] | None:
    """The window ``now`` falls in, or None when a new one starts (an ended one is first written out as its
    summary, an unreadable counter reported)."""
    state, problem = _load(path, now)
    if state is not None and not _over(state, now, bound):
        return state
    _write_summary(audit, state if state is not None else _fresh(now, problem), bound)
    if problem is not None:  # an unusable counter (damaged, a planted symlink) is removed, never followed
        os.unlink(path)
    return None


def flush_due(audit: AuditLog, bound: RefusalBound) -> None:
    """Write the summary of an ended window, if any (called before an apply or an approval records anything).

    Best effort: a counter that cannot be locked or removed is logged on stderr and kept for the next time.
    """
    path = counter_path(audit)
    if not os.path.lexists(path):
        return
    try:
        with exclusive(path, "audit refusal counter"):
            if _current(audit, path, _now(), bound) is None:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)  # a symlink planted there is removed, never followed
    except (OSError, MeshError) as exc:
        log.warning("the refusal counter %s could not be written out: %s", path, exc)


def record_unknown_plan_refusal(audit: AuditLog, bound: RefusalBound, event: str, *, plan_id: str,
                                **fields: Any) -> dict[str, Any]:
    """Audit the refusal of ``plan_id`` (a plan that does not exist) within the bound; returns its entry.

    The entry has the log's ``head``; a counted refusal's entry has ``coalesced: True`` and the head as it
    is (no record was written for it). When the counter cannot be used (its file or lock is a symlink, the
    disk refuses it), the refusal is recorded in full, with ``counter_problem``: never silently dropped.
    """
    path = counter_path(audit)
    try:
        with exclusive(path, "audit refusal counter"):
            now = _now()
            state = _current(audit, path, now, bound) or _fresh(now, None)
            full = state["recorded"] < bound.full_records
            if full:
                state["recorded"] += 1
            else:
                stamp = now.isoformat()
                state["count"] += 1
                state["first"] = state["first"] or stamp
                state["last"] = stamp
                state["by_event"][event] = int(state["by_event"].get(event, 0)) + 1
                if len(state["sample_plan_ids"]) < SAMPLE_IDS:
                    state["sample_plan_ids"].append(plan_id)
            _save(path, state)
            if full:
                return audit.record(event, plan_id=plan_id, unknown_plan=True, window_start=state["window_start"],
                                    window_n=state["recorded"], **fields)
    except (OSError, MeshError) as exc:
        if isinstance(exc, MeshError) and audit.path.is_symlink():
            raise  # the audit log itself is refused: nothing to fall back to
        log.warning("the refusal counter %s cannot be used (%s): this refusal is recorded in full", path, exc)
        return audit.record(event, plan_id=plan_id, unknown_plan=True,
                            counter_problem=f"{type(exc).__name__}: {exc}"[:300], **fields)
    if state["count"] == 1:
        log.warning("more than %d refusals of unknown plan ids within %d s: the rest of this window are counted in "
                    "%s and recorded as one refusals_coalesced record", bound.full_records, bound.window_s, path)
    return {"event": event, "plan_id": plan_id, "coalesced": True, "head": str(audit.head())}
