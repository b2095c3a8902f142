"""The remediation audit log: append-only JSON lines in ``<state_dir>/audit.log``.

Every proposal, approval, refusal, apply start, applied step and apply end is one line::

    {"time": "2026-11-30T02:10:33.123456+00:00", "event": "step", "plan_id": "...",
     "plan_sha256": "...", "approver": "alice", "step": 3, "action": "xdel_dlq",
     "result": "done", "detail": "...", "seq": 41, "prev": "<sha256 of the previous line>"}

Lines are written with one ``write`` on a file opened ``O_APPEND``, under an exclusive
portable lock (:func:`server.filelocks.exclusive`, so concurrent writers never interleave)
and fsynced before the call returns. ``prev`` chains each line to the one before it and
``seq`` numbers them from 1. The *head* of the log is the sha256 of its last line and its
record count (:class:`AuditHead`, printed as ``<count>:<sha256>``).

What :meth:`AuditLog.verify` detects, exactly:

- alone: an edited, removed, inserted or reordered line anywhere *before* the last one,
  and a last line cut in the middle (no newline, or not JSON);
- with an anchor (a head recorded earlier, ``--expect-head``): also lines dropped from
  the end and an edited last line, up to the anchored record;
- a full rewrite of the file (every line recomputed) only with an anchor held *outside*
  the reach of the server's OS user (a human's note, the copy file or syslog below).

The chain is tamper-*evident*, not tamper-proof: a process running as the same OS user can
rewrite the file (see docs/remediation.md, threat model). Each record can also be shipped
as it is written to an append-only copy file and/or syslog (``[approval] audit_copy_file``,
``audit_syslog``), which hold the anchor outside the file.

The records the apply-time guards depend on (``replayed``: "a replay is never delivered
twice") are also appended to their own index file, ``<state_dir>/audit-replayed.jsonl``
(:data:`INDEXED_EVENTS`, :meth:`AuditLog.events`): however many other records are written
(an agent can make every refused call write one), the guard still sees every replay.

Refusals of plan ids that name no plan are written through :mod:`server.approval.refusal_window`,
which bounds them (a few in full per window, the rest counted in one ``refusals_coalesced`` record).

Records never hold an approval token, the local HMAC secret, a passphrase or the code
shown by ``mesh-mcp approve``: :meth:`AuditLog.record` refuses such field names.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from server.filelocks import IS_POSIX, exclusive
from server.state_files import open_state_file

if TYPE_CHECKING:
    from server.config import Settings

log = logging.getLogger("mesh.audit")

AUDIT_FILE_NAME = "audit.log"
GENESIS = "0" * 64
"""``prev`` of the first line, and the head of an empty log."""

DETAIL_MAX_CHARS = 2000
_FORBIDDEN_FIELDS = frozenset({"token", "approval_token", "secret", "passphrase", "code", "mac", "signature"})
_TAIL_CHUNK = 64 * 1024
INDEXED_EVENTS = frozenset({"replayed"})
"""Events also kept in their own file (``audit-<event>.jsonl``), read whole by :meth:`AuditLog.events`."""
LEGACY_TAIL_BYTES = 8 * 1024 * 1024
""":meth:`AuditLog.events` also reads this much of the log's tail: records written before the index existed."""
_ANCHOR_RE = re.compile(r"^(?:(\d{1,12}):)?([0-9a-f]{64})$")


def audit_path(settings: Settings) -> Path:
    """``<state_dir>/audit.log``."""
    return settings.resolved_state_dir / AUDIT_FILE_NAME


def _line_hash(line: bytes) -> str:
    return hashlib.sha256(line.rstrip(b"\n")).hexdigest()


@dataclass(frozen=True)
class AuditHead:
    """The anchor of a log: sha256 of its last line and how many records it holds."""

    sha256: str
    count: int

    def __str__(self) -> str:
        return f"{self.count}:{self.sha256}"


@dataclass(frozen=True)
class ChainReport:
    """What :meth:`AuditLog.verify` found."""

    ok: bool
    records: int
    head: AuditHead
    detail: str
    anchor_checked: bool


def parse_anchor(text: str) -> tuple[int | None, str]:
    """``(count or None, sha256)`` of ``HASH`` or ``COUNT:HASH``; ValueError otherwise."""
    match = _ANCHOR_RE.match(text.strip().lower())
    if match is None:
        raise ValueError("an audit head is 64 hex characters, optionally preceded by the record count and ':' "
                         "(as printed by `mesh-mcp audit verify` or `mesh-mcp approve`)")
    return (int(match.group(1)) if match.group(1) else None), match.group(2)


def _last_line(fh: Any) -> bytes | None:
    """The last line of the binary file ``fh`` (without its newline), or None when empty."""
    size = fh.seek(0, os.SEEK_END)
    if size == 0:
        return None
    end = size
    buffer = b""
    while end > 0:
        start = max(0, end - _TAIL_CHUNK)
        fh.seek(start)
        buffer = fh.read(end - start) + buffer
        end = start
        body = buffer.rstrip(b"\n")
        cut = body.rfind(b"\n")
        if cut >= 0:
            return body[cut + 1 :]
    body = buffer.rstrip(b"\n")
    return body or None


def _count_lines(fh: Any) -> int:
    fh.seek(0)
    return sum(1 for raw in fh if raw.strip())


class AuditLog:
    """Append-only JSON-lines log at ``path`` (directory created 0700 on first write).

    ``copy_file``: every line is also appended to this file (e.g. one made append-only
    with ``chattr +a``, or on another mount). ``syslog``: every line is also sent to
    syslog (journald on systemd hosts), facility AUTHPRIV. A failing sink is logged on
    stderr and never loses the record in the main log.
    """

    def __init__(self, path: Path, *, copy_file: Path | None = None, syslog: bool = False) -> None:
        self.path = path
        self.copy_file = copy_file
        self.syslog = syslog

    def record(
        self,
        event: str,
        *,
        plan_id: str | None = None,
        plan_sha256: str | None = None,
        approver: str | None = None,
        step: int | None = None,
        action: str | None = None,
        result: str | None = None,
        detail: str | None = None,
        **extra: Any,
    ) -> dict[str, Any]:
        """Append one record and return it (with its ``time``, ``seq`` and ``prev``)."""
        bad = _FORBIDDEN_FIELDS.intersection(extra)
        if bad:
            raise ValueError(f"audit records never hold secrets: field(s) {sorted(bad)} refused")
        entry: dict[str, Any] = {
            "time": datetime.now(UTC).isoformat(),
            "event": event,
            "plan_id": plan_id,
            "plan_sha256": plan_sha256,
            "approver": approver,
            "step": step,
            "action": action,
            "result": result,
            "detail": detail[:DETAIL_MAX_CHARS] if detail else detail,
        }
        entry.update(extra)
        with exclusive(self.path, "audit log"):
            fd = open_state_file(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT)
            with os.fdopen(fd, "r+b", buffering=0) as fh:
                last = _last_line(fh)
                entry["seq"] = 1 if last is None else self._seq_after(last, fh)
                entry["prev"] = GENESIS if last is None else _line_hash(last)
                line = json.dumps(entry, ensure_ascii=False, separators=(",", ":"), default=str).encode("utf-8")
                fh.write(line + b"\n")
                os.fsync(fh.fileno())
            if event in INDEXED_EVENTS:  # after the log: a crash in between leaves it in the log's tail
                self._index(event, line)
        entry["head"] = str(AuditHead(_line_hash(line), entry["seq"]))
        self._ship(line)
        return entry

    @staticmethod
    def _seq_after(last: bytes, fh: Any) -> int:
        try:
            seq = json.loads(last).get("seq")
        except (ValueError, AttributeError):
            seq = None
        if isinstance(seq, int) and seq > 0:
            return seq + 1
        return _count_lines(fh) + 1  # a log written before records were numbered: count once

    def index_path(self, event: str) -> Path:
        """The index file of ``event`` (one of :data:`INDEXED_EVENTS`), next to the log."""
        return self.path.with_name(f"audit-{event}.jsonl")

    def _index(self, event: str, line: bytes) -> None:
        fd = open_state_file(self.index_path(event), os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            os.write(fd, line + b"\n")
            os.fsync(fd)
        finally:
            os.close(fd)

    def events(self, event: str) -> list[dict[str, Any]]:
        """Every ``event`` record (an indexed one), oldest first: its whole index file, plus those in the
        log's last :data:`LEGACY_TAIL_BYTES` that the index lacks (written before it existed)."""
        if event not in INDEXED_EVENTS:
            raise ValueError(f"audit event {event!r} is not indexed (indexed: {sorted(INDEXED_EVENTS)})")
        indexed = AuditLog(self.index_path(event)).read()
        seen = {(r.get("seq"), r.get("prev")) for r in indexed}
        tail = [r for r in self.read(max_bytes=LEGACY_TAIL_BYTES)
                if r.get("event") == event and (r.get("seq"), r.get("prev")) not in seen]
        found = [r for r in indexed if r.get("event") == event] + tail
        return sorted(found, key=lambda r: r.get("seq") if isinstance(r.get("seq"), int) else 0)

    def _ship(self, line: bytes) -> None:
        if self.copy_file is not None:
            try:
                fd = os.open(self.copy_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
                try:
                    os.write(fd, line + b"\n")
                    os.fsync(fd)
                finally:
                    os.close(fd)
            except OSError as exc:
                log.warning("audit copy to %s failed (the record is in %s): %s", self.copy_file, self.path, exc)
        if self.syslog:
            if not IS_POSIX:
                log.warning("audit_syslog is POSIX-only; the record is in %s", self.path)
                return
            import syslog

            syslog.openlog("mesh-mcp", syslog.LOG_PID, syslog.LOG_AUTHPRIV)
            syslog.syslog(syslog.LOG_INFO, "audit " + line.decode("utf-8", "replace"))

    def read(self, *, max_bytes: int | None = None) -> list[dict[str, Any]]:
        """Parsed records, oldest first; with ``max_bytes`` only the lines of the file's tail."""
        if not self.path.exists():
            return []
        with open(self.path, "rb") as fh:
            if max_bytes is not None:
                size = fh.seek(0, os.SEEK_END)
                start = max(0, size - max_bytes)
                fh.seek(start)
                data = fh.read()
                if start > 0:
                    data = data.split(b"\n", 1)[1] if b"\n" in data else b""
            else:
                data = fh.read()
        out: list[dict[str, Any]] = []
        for raw in data.splitlines():
            if not raw.strip():
                continue
            try:
                out.append(json.loads(raw))
            except ValueError:
                out.append({"event": "unreadable_line", "raw": raw[:200].decode("utf-8", "replace")})
        return out

    def head(self) -> AuditHead:
        """The current head (last line's sha256 and the record count); GENESIS/0 for an empty log."""
        if not self.path.exists():
            return AuditHead(GENESIS, 0)
        with open(self.path, "rb") as fh:
            last = _last_line(fh)
            if last is None:
                return AuditHead(GENESIS, 0)
            try:
                seq = json.loads(last).get("seq")
            except (ValueError, AttributeError):
                seq = None
            count = seq if isinstance(seq, int) and seq > 0 else _count_lines(fh)
        return AuditHead(_line_hash(last), count)

    def verify(self, expect_head: str | None = None) -> ChainReport:
        """Walk the whole chain; with ``expect_head`` (``HASH`` or ``COUNT:HASH``) also check the anchor.

        The anchor holds when the log still contains, at line ``COUNT`` (or at any line when
        only the hash is given), a line whose sha256 is ``HASH``: the log may have grown
        since, never shrunk nor changed up to there.
        """
        anchor = parse_anchor(expect_head) if expect_head else None
        prev, count, found_at = GENESIS, 0, None

        def report(ok: bool, detail: str) -> ChainReport:
            return ChainReport(ok, count, AuditHead(prev, count), detail, anchor is not None)

        if self.path.exists():
            with open(self.path, "rb") as fh:
                for number, raw in enumerate(fh, start=1):
                    if not raw.endswith(b"\n"):
                        return report(False, f"line {number} (the last) is incomplete: the log was cut mid-write "
                                      "or its end was edited")
                    line = raw.rstrip(b"\n")
                    try:
                        entry = json.loads(line)
                    except ValueError:
                        return report(False, f"line {number} is not JSON")
                    if not isinstance(entry, dict) or entry.get("prev") != prev:
                        return report(False, f"line {number}: chain broken (a line before it was edited, removed "
                                      "or reordered)")
                    seq = entry.get("seq")
                    if seq is not None and seq != number:
                        return report(False, f"line {number}: numbered {seq} (lines were removed or inserted)")
                    prev = _line_hash(line)
                    count += 1
                    if anchor is not None and found_at is None and prev == anchor[1]:
                        found_at = number
        if anchor is None:
            return report(True, f"{count} records, chain intact (without an anchor, lines dropped from the end or an "
                          "edited last line cannot be seen: pass --expect-head)")
        want_count, want_hash = anchor
        if found_at is None or (want_count is not None and found_at != want_count):
            if want_count is not None and count < want_count:
                return report(False, f"the anchor expects at least {want_count} records but the log holds {count}: "
                              "its end was truncated")
            where = f"at line {want_count}" if want_count is not None else "anywhere"
            return report(False, f"the anchored record {want_hash[:16]}... is not in the log {where}: the log was "
                          "truncated, its anchored line edited, or it was rewritten")
        return report(True, f"{count} records, chain intact up to the anchor at record {found_at}"
                      + (f" and {count - found_at} record(s) after it" if count > found_at else ""))

    def verify_chain(self) -> tuple[bool, str]:
        """``(True, "n records")`` when every ``prev`` matches the line before; else where it breaks.

        Without an anchor this cannot see lines dropped from the end: use :meth:`verify`
        with ``expect_head`` for that.
        """
        result = self.verify()
        return result.ok, (f"{result.records} records" if result.ok else result.detail)


def audit_log(settings: Settings) -> AuditLog:
    """The audit log of ``settings``' state directory, with its configured sinks."""
    approval = settings.approval
    copy = getattr(approval, "audit_copy_file", None)
    return AuditLog(audit_path(settings), copy_file=Path(copy).expanduser() if copy else None,
                    syslog=bool(getattr(approval, "audit_syslog", False)))
