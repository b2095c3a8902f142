"""Backups written before any destructive step: ``<state_dir>/backups/<plan_id>.jsonl``.

One JSON object per line::

    {"time": "...", "plan_id": "...", "plan_sha256": "...", "step": 4, "kind": "stream_entry",
     "target": "stream:event:created-dlq 1700000000000-0", "data": {...}}

Kinds: ``stream_entry`` (key, id, fields as ordered pairs; exact bytes, base64 when not
UTF-8), ``pending`` (XPENDING facts), ``key`` (type, value, DUMP base64 and TTL: restorable
with ``RESTORE key ttl dump``), ``zset_member`` (key, member, score), ``sql_row`` (every
column of the row before the UPDATE), ``bull_job`` (the job hash and its failed score).

:meth:`BackupFile.write` appends, fsyncs, then reads the new lines back from disk and
compares them with what was meant to be written; only then may the caller delete
anything. A failed write or read-back raises :class:`BackupError`.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any
from uuid import UUID

from server.config import Settings
from server.errors import MeshError
from server.state_files import StateFileError, open_state_file, read_state_bytes


class BackupError(MeshError):
    """The backup could not be written or did not read back identical: nothing was deleted."""


def backup_path(settings: Settings, plan_id: str) -> Path:
    return settings.resolved_state_dir / "backups" / f"{plan_id}.jsonl"


def jsonable_value(value: Any) -> Any:
    """SQL values as JSON: datetimes in ISO 8601, UUIDs and decimals as text, bytes as hex."""
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, UUID | Decimal):
        return str(value)
    if isinstance(value, bytes | memoryview):
        return bytes(value).hex()
    if isinstance(value, dict):
        return {str(k): jsonable_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable_value(v) for v in value]
    return value


class BackupFile:
    """The append-only backup file of one plan."""

    def __init__(self, path: Path, plan_id: str, plan_sha256: str) -> None:
        self.path = path
        self.plan_id = plan_id
        self.plan_sha256 = plan_sha256

    def write(self, step: int, records: list[tuple[str, str, Any]]) -> int:
        """Append ``(kind, target, data)`` records for ``step``, fsync, read back, compare.

        Returns the number of records written; raises :class:`BackupError` on any mismatch.
        """
        if not records:
            return 0
        now = datetime.now(UTC).isoformat()
        objects = [
            {
                "time": now,
                "plan_id": self.plan_id,
                "plan_sha256": self.plan_sha256,
                "step": step,
                "kind": kind,
                "target": target,
                "data": jsonable_value(data),
            }
            for kind, target, data in records
        ]
        payload = b"".join(
            json.dumps(o, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n" for o in objects
        )
        try:
            fd = open_state_file(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)  # no symlinked folder or file
            try:
                start = os.fstat(fd).st_size
                written = os.write(fd, payload)
                os.fsync(fd)
            finally:
                os.close(fd)
        except (OSError, StateFileError) as exc:
            raise BackupError(f"could not write the backup {self.path}: {exc}; nothing was deleted") from None
        if written != len(payload):
            raise BackupError(f"short write to the backup {self.path}; nothing was deleted")
        self._read_back(start, objects)
        return len(objects)

    def _read_back(self, start: int, expected: list[dict[str, Any]]) -> None:
        try:
            lines = read_state_bytes(self.path)[start:].splitlines()
        except (OSError, StateFileError) as exc:
            raise BackupError(f"could not read the backup {self.path} back: {exc}; nothing was deleted") from None
        try:
            found = [json.loads(line) for line in lines]
        except ValueError:
            raise BackupError(f"the backup {self.path} does not read back as JSON; nothing was deleted") from None
        # other writers never append to a plan's backup file (a plan is applied once), so the
        # lines after ``start`` are exactly ours
        if found[: len(expected)] != expected:
            raise BackupError(f"the backup {self.path} did not read back identical; nothing was deleted")


def read_backup(path: Path) -> list[dict[str, Any]]:
    """Every record of a backup file (for restores and tests)."""
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]
