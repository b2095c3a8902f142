"""Promise: a backup record says when, for which plan and step, what it saved, restorably.

Checked on the file as written and read back (:func:`read_backup`), with every SQL value type
a row can hold (timestamps, UUIDs, decimals, bytes, JSON objects and arrays).
"""

from __future__ import annotations

import stat
import uuid
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

from tools.remediation.backups import BackupFile, jsonable_value, read_backup


def test_each_record_carries_its_time_plan_step_and_data(tmp_path: Path) -> None:
    path = tmp_path / "state" / "backups" / "p-1.jsonl"  # neither folder exists yet: both are made
    backup = BackupFile(path, "p-1", "ab" * 32)
    before = datetime.now(UTC)
    assert backup.write(3, [("key", "k:1", {"type": "string", "value": "v"}), ("zset_member", "z m", [1, 2])]) == 2
    assert backup.write(4, []) == 0  # nothing to save: nothing written
    records = read_backup(path)
    assert [(r["step"], r["kind"], r["target"], r["data"]) for r in records] == [
        (3, "key", "k:1", {"type": "string", "value": "v"}),
        (3, "zset_member", "z m", [1, 2]),
    ]
    for record in records:
        assert record["plan_id"] == "p-1" and record["plan_sha256"] == "ab" * 32
        when = datetime.fromisoformat(record["time"])
        assert when.utcoffset() == timedelta(0)  # UTC, explicit
        assert before - timedelta(seconds=1) <= when <= datetime.now(UTC) + timedelta(seconds=1)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


def test_sql_values_are_saved_as_restorable_json() -> None:
    row_id = uuid.uuid4()
    value = {
        "at": datetime(2026, 12, 1, 2, 3, 4, tzinfo=UTC),
        "day": date(2026, 12, 1),
        "id": row_id,
        "amount": Decimal("12.50"),
        "blob": b"\x00\xff",
        "view": memoryview(b"\x01\x02"),
        "nested": {1: [b"\x0a", (Decimal("1"), None)]},
        "plain": 7,
    }
    assert jsonable_value(value) == {
        "at": "2026-12-01T02:03:04+00:00",
        "day": "2026-12-01",
        "id": str(row_id),
        "amount": "12.50",
        "blob": "00ff",
        "view": "0102",
        "nested": {"1": ["0a", ["1", None]]},
        "plain": 7,
    }
