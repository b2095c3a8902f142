"""Promise: the audit log is append-only, chained line to line, private, and never holds a secret.

Checked through its public API (``record``, ``read``, ``verify_chain``) and the file on disk:
the chain starts at the genesis hash and links each line to the exact bytes of the one before
(also past the 64 KiB tail chunk the writer reads back), any edit, removal or reordering breaks
it at the right line, a long detail is cut, secret-named fields are refused, ``read(max_bytes)``
returns only whole lines of the tail.
"""

from __future__ import annotations

import hashlib
import json
import stat
from pathlib import Path

import pytest

from server.approval.audit import GENESIS, AuditLog

PLAN = "p-20261130-021033-0a1b2c3d"


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines()


def test_the_chain_starts_at_genesis_and_links_exact_line_bytes(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "state" / "audit.log")
    first = log.record("proposed", plan_id=PLAN, result="proposed", detail="one")
    second = log.record("step", plan_id=PLAN, step=1, action="export", result="done", approver="alice")
    assert first["prev"] == GENESIS == "0" * 64
    lines = _lines(log.path)
    assert second["prev"] == hashlib.sha256(lines[0]).hexdigest()
    written = [{k: v for k, v in e.items() if k != "head"} for e in (first, second)]  # head: returned, not stored
    assert [json.loads(x) for x in lines] == written == log.read()
    assert second["head"] == f"2:{hashlib.sha256(lines[1]).hexdigest()}"
    assert log.verify_chain() == (True, "2 records")
    mode = stat.S_IMODE(log.path.stat().st_mode)
    assert mode == 0o600 and stat.S_IMODE(log.path.parent.stat().st_mode) == 0o700


def test_the_chain_holds_past_the_tail_chunk(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit.log")
    log.record("step", detail="x" * 1999)
    for i in range(80):  # > 64 KiB before the last line: the writer reads its tail in chunks
        log.record("step", step=i, detail=f"{i}" + "y" * 1990)
    log.record("step", detail="z" * 70_000)  # a single line longer than the chunk (detail is cut)
    log.record("apply_finished", result="completed")
    assert log.path.stat().st_size > 2 * 64 * 1024
    assert log.verify_chain() == (True, "83 records")
    lines = _lines(log.path)
    assert json.loads(lines[-1])["prev"] == hashlib.sha256(lines[-2]).hexdigest()


def test_a_long_detail_is_cut_to_2000_characters(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit.log")
    assert log.record("step", detail="d" * 2000)["detail"] == "d" * 2000
    assert log.record("step", detail="d" * 2001)["detail"] == "d" * 2000
    assert log.record("step", detail="")["detail"] == ""
    assert log.record("step")["detail"] is None


@pytest.mark.parametrize("field", ["token", "approval_token", "secret", "passphrase", "code", "mac", "signature"])
def test_secret_fields_are_refused_and_nothing_is_written(tmp_path: Path, field: str) -> None:
    log = AuditLog(tmp_path / "audit.log")
    log.record("proposed", plan_id=PLAN)
    with pytest.raises(ValueError, match="never hold secrets"):
        log.record("approved", plan_id=PLAN, **{field: "s3cr3t-value"})
    assert b"s3cr3t-value" not in log.path.read_bytes()
    assert len(log.read()) == 1
    assert log.record("approved", plan_id=PLAN, approver="alice", nonce_expires=1)["approver"] == "alice"


@pytest.mark.parametrize("edit", ["change", "remove", "swap", "insert", "not_json"])
def test_any_edit_breaks_the_chain_at_the_right_line(tmp_path: Path, edit: str) -> None:
    log = AuditLog(tmp_path / "audit.log")
    for i in range(4):
        log.record("step", plan_id=PLAN, step=i, result="done")
    lines = _lines(log.path)
    if edit == "change":
        lines[1] = lines[1].replace(b'"done"', b'"failed"')
        where = "line 3"
    elif edit == "remove":
        del lines[1]
        where = "line 2"
    elif edit == "swap":
        lines[1], lines[2] = lines[2], lines[1]
        where = "line 2"
    elif edit == "insert":
        lines.insert(0, lines[0])
        where = "line 2"
    else:
        lines[2] = b"{not json"
        where = "line 3 is not JSON"
    log.path.write_bytes(b"\n".join(lines) + b"\n")
    ok, message = log.verify_chain()
    assert ok is False and message.startswith(where), message


def test_reading_an_empty_or_missing_log(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "none" / "audit.log")
    assert log.read() == [] and log.read(max_bytes=10) == []
    assert log.verify_chain() == (True, "0 records")


def test_read_with_max_bytes_returns_whole_lines_of_the_tail(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit.log")
    for i in range(10):
        log.record("step", step=i)
    lines = _lines(log.path)
    last_two = len(lines[-1]) + len(lines[-2]) + 2
    assert [r["step"] for r in log.read(max_bytes=last_two + 5)] == [8, 9]  # the cut line before is dropped
    assert [r["step"] for r in log.read(max_bytes=last_two - 5)] == [9]
    assert [r["step"] for r in log.read(max_bytes=10**9)] == list(range(10))
    assert log.read(max_bytes=3) == []


def test_an_unreadable_line_is_reported_not_fatal(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit.log")
    log.record("step", step=1)
    with log.path.open("ab") as fh:
        fh.write(b"\n{broken line\n")
    records = log.read()
    assert records[0]["step"] == 1
    assert records[1] == {"event": "unreadable_line", "raw": "{broken line"}
    assert len(records) == 2


def test_a_record_is_one_compact_utf8_line_with_the_documented_fields(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit.log")
    entry = log.record("step", plan_id=PLAN, plan_sha256="ab" * 32, approver="alice", step=3, action="xdel_dlq",
                       result="done", detail="déjà vu ✓", where=Path("/var/x"))
    assert list(entry) == ["time", "event", "plan_id", "plan_sha256", "approver", "step", "action", "result",
                           "detail", "where", "seq", "prev", "head"]
    entry = {k: v for k, v in entry.items() if k != "head"}  # the chain head is returned, not written
    assert entry["time"].endswith("+00:00")  # UTC, with its offset
    assert (entry["event"], entry["plan_id"], entry["plan_sha256"], entry["action"], entry["result"]) == (
        "step", PLAN, "ab" * 32, "xdel_dlq", "done")
    expected = json.dumps({**entry, "where": "/var/x"}, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    assert log.path.read_bytes() == expected + b"\n"  # non-ASCII kept as UTF-8, other types as str
    assert "déjà vu ✓".encode() in log.path.read_bytes()


def test_the_chain_holds_after_a_line_longer_than_two_tail_chunks(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit.log")
    log.record("step", detail="a")
    log.record("replayed", payload="p" * 150_000)  # extra fields are not cut: longer than two 64 KiB chunks
    log.record("step", detail="b")
    assert log.verify_chain() == (True, "3 records")


def test_audit_path_is_in_the_state_directory(tmp_path: Path) -> None:
    from server.approval.audit import audit_log, audit_path
    from server.config import load_settings

    settings = load_settings(environ={}, overrides={"state_dir": str(tmp_path / "st")})
    assert audit_path(settings) == tmp_path / "st" / "audit.log"
    audit_log(settings).record("proposed", plan_id=PLAN)
    assert (tmp_path / "st" / "audit.log").exists()


def test_tail_reads_at_the_file_size_edges(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit.log")
    for i in range(3):
        log.record("step", step=i)
    size = log.path.stat().st_size
    assert [r["step"] for r in log.read(max_bytes=size)] == [0, 1, 2]
    assert [r["step"] for r in log.read(max_bytes=size + 1)] == [0, 1, 2]
    assert [r["step"] for r in log.read(max_bytes=size - 1)] == [1, 2]  # the cut first line is dropped
    assert log.read(max_bytes=0) == []


def test_an_unreadable_line_with_invalid_utf8_is_shown_replaced_and_cut(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit.log")
    log.record("step", step=1)
    with log.path.open("ab") as fh:
        fh.write(b"\xff\xfe" + b"z" * 300 + b"\n")
    bad = log.read()[1]
    assert bad["event"] == "unreadable_line"
    assert bad["raw"] == "\ufffd\ufffd" + "z" * 198
