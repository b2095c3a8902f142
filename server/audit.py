"""The remediation audit log: append-only JSON lines in ``<state_dir>/audit.log``.

Every proposal, approval, refusal, apply start, applied step and apply end is one line::

    {"time": "2026-11-30T02:10:33.123456+00:00", "event": "step", "plan_id": "...",
     "plan_sha256": "...", "approver": "alice", "step": 3, "action": "xdel_dlq",
     "result": "done", "detail": "...", "prev": "<sha256 of the previous line>"}

Lines are written with one ``write`` on a file opened ``O_APPEND``, under an exclusive
``flock`` (so concurrent writers never interleave) and fsynced before the call returns.
``prev`` chains each line to the one before it: :meth:`AuditLog.verify_chain` detects a
truncated, reordered or edited log. The chain is tamper-*evident* against accidents and
careless edits only; a process running as the same OS user can rewrite the whole file
(see docs/remediation.md, threat model).

Records never hold an approval token, the local HMAC secret, a passphrase or the code
shown by ``mesh-mcp approve``: :meth:`AuditLog.record` refuses such field names.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from server.config import Settings

AUDIT_FILE_NAME = "audit.log"
GENESIS = "0" * 64
"""``prev`` of the first line."""

DETAIL_MAX_CHARS = 2000
_FORBIDDEN_FIELDS = frozenset({"token", "approval_token", "secret", "passphrase", "code", "mac", "signature"})
_TAIL_CHUNK = 64 * 1024


def audit_path(settings: Settings) -> Path:
    """``<state_dir>/audit.log``."""
    return settings.resolved_state_dir / AUDIT_FILE_NAME


def _line_hash(line: bytes) -> str:
    return hashlib.sha256(line.rstrip(b"\n")).hexdigest()


def _last_line(fd: int) -> bytes | None:
    """The last complete line of the open file ``fd`` (without its newline), or None when empty."""
    size = os.fstat(fd).st_size
    if size == 0:
        return None
    end = size
    buffer = b""
    while end > 0:
        start = max(0, end - _TAIL_CHUNK)
        buffer = os.pread(fd, end - start, start) + buffer
        end = start
        body = buffer.rstrip(b"\n")
        cut = body.rfind(b"\n")
        if cut >= 0:
            return body[cut + 1 :]
    body = buffer.rstrip(b"\n")
    return body or None


class AuditLog:
    """Append-only JSON-lines log at ``path`` (directory created 0700 on first write)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @contextlib.contextmanager
    def _locked(self) -> Iterator[int]:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield fd
        finally:
            os.close(fd)  # closing releases the lock

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
        """Append one record and return it (with its ``time`` and ``prev``)."""
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
        with self._locked() as fd:
            last = _last_line(fd)
            entry["prev"] = GENESIS if last is None else _line_hash(last)
            line = json.dumps(entry, ensure_ascii=False, separators=(",", ":"), default=str).encode("utf-8")
            os.write(fd, line + b"\n")
            os.fsync(fd)
        return entry

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

    def verify_chain(self) -> tuple[bool, str]:
        """``(True, "n records")`` when every ``prev`` matches the line before; else where it breaks."""
        if not self.path.exists():
            return True, "0 records"
        prev = GENESIS
        count = 0
        with open(self.path, "rb") as fh:
            for number, raw in enumerate(fh, start=1):
                line = raw.rstrip(b"\n")
                try:
                    entry = json.loads(line)
                except ValueError:
                    return False, f"line {number} is not JSON"
                if entry.get("prev") != prev:
                    return False, f"line {number}: chain broken (a line before it was edited, removed or reordered)"
                prev = _line_hash(line)
                count += 1
        return True, f"{count} records"


def audit_log(settings: Settings) -> AuditLog:
    """The audit log of ``settings``' state directory."""
    return AuditLog(audit_path(settings))
