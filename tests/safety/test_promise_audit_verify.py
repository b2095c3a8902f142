"""Promise: ``mesh-mcp audit verify`` says exactly what it found, and the head it prints is right.

Each outcome of :meth:`AuditLog.verify` is checked with its whole sentence (the operator
reads it to decide whether the log was tampered with), its ``ok`` flag, its record count
and its head; the head and the numbering also hold for a log written before records were
numbered (no ``seq``: counted once), and the settings' sinks are honoured.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from server.approval.audit import GENESIS, AuditHead, AuditLog, audit_log, parse_anchor
from server.config import load_settings


def _log(tmp_path: Path, n: int = 4) -> AuditLog:
    log = AuditLog(tmp_path / "audit.log")
    for i in range(n):
        log.record("step", plan_id="p", step=i, result="done")
    return log


def _lines(log: AuditLog) -> list[str]:
    return log.path.read_text(encoding="utf-8").splitlines()


def _write(log: AuditLog, lines: list[str]) -> None:
    log.path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")


# -- verify: every sentence, flag, count and head --------------------------------------------


def test_an_intact_log_without_an_anchor(tmp_path: Path) -> None:
    log = _log(tmp_path)
    result = log.verify()
    assert result.ok is True and result.records == 4 and result.anchor_checked is False
    assert result.head == log.head()
    assert result.detail == (
        "4 records, chain intact (without an anchor, lines dropped from the end or an edited "
        "last line cannot be seen: pass --expect-head)"
    )
    assert log.verify_chain() == (True, "4 records")


def test_an_empty_or_missing_log_verifies_with_the_genesis_head(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit.log")
    assert log.head() == AuditHead(GENESIS, 0)
    result = log.verify()
    assert result.ok and result.records == 0 and result.head == AuditHead(GENESIS, 0)
    log.path.write_bytes(b"")
    assert log.head() == AuditHead(GENESIS, 0)
    assert str(log.head()) == f"0:{GENESIS}"


def test_a_cut_last_line_is_reported_as_such(tmp_path: Path) -> None:
    log = _log(tmp_path)
    log.path.write_bytes(log.path.read_bytes()[:-1])  # only the final newline lost
    result = log.verify()
    assert result.ok is False and result.records == 3
    assert result.detail == "line 4 (the last) is incomplete: the log was cut mid-write or its end was edited"
    assert log.verify_chain() == (False, result.detail)


def test_a_line_that_is_not_json(tmp_path: Path) -> None:
    log = _log(tmp_path)
    lines = _lines(log)
    _write(log, [lines[0], "{not json", *lines[1:]])
    result = log.verify()
    assert result.ok is False and result.records == 1 and result.detail == "line 2 is not JSON"


def test_a_broken_chain_names_its_line(tmp_path: Path) -> None:
    log = _log(tmp_path)
    lines = _lines(log)
    _write(log, [lines[0], lines[2], lines[1], lines[3]])
    result = log.verify()
    assert result.ok is False and result.records == 1
    assert result.detail == "line 2: chain broken (a line before it was edited, removed or reordered)"
    _write(log, [lines[0], "[1, 2]", *lines[1:]])  # JSON, but not a record
    assert log.verify().detail == "line 2: chain broken (a line before it was edited, removed or reordered)"


def test_a_renumbered_line_is_seen_even_when_it_chains(tmp_path: Path) -> None:
    """A line rewritten with the right ``prev`` but a wrong ``seq`` (a line inserted and re-chained)."""
    log = _log(tmp_path, 2)
    lines = _lines(log)
    second = json.loads(lines[1])
    second["seq"] = 3
    _write(log, [lines[0], json.dumps(second, separators=(",", ":"))])
    result = log.verify()
    assert result.ok is False and result.records == 1
    assert result.detail == "line 2: numbered 3 (lines were removed or inserted)"


def test_a_log_without_numbers_still_verifies(tmp_path: Path) -> None:
    """Records written before ``seq`` existed: no number is not a wrong number."""
    log = _log(tmp_path, 3)
    legacy = []
    prev = GENESIS

    for line in _lines(log):
        entry = json.loads(line)
        entry.pop("seq")
        entry["prev"] = prev
        text = json.dumps(entry, separators=(",", ":"))
        prev = hashlib.sha256(text.encode()).hexdigest()
        legacy.append(text)
    _write(log, legacy)
    result = log.verify()
    assert result.ok is True and result.records == 3
    assert log.head() == AuditHead(prev, 3)  # counted, since the last line carries no number
    entry = log.record("apply_finished", plan_id="p")
    assert entry["seq"] == 4  # numbering continues from the counted lines
    assert log.verify().ok and log.head().count == 4


def test_the_head_counts_lines_when_the_last_number_is_not_usable(tmp_path: Path) -> None:
    log = _log(tmp_path, 3)
    lines = _lines(log)
    for bad in ("0", "-2", '"3"', "null"):
        last = json.loads(lines[-1])
        last["seq"] = json.loads(bad)
        _write(log, [*lines[:-1], json.dumps(last, separators=(",", ":"))])
        assert log.head().count == 3, bad
        assert log.record("x")["seq"] == 4, bad
    _write(log, [*lines[:-1], "[3]"])  # a last line that is JSON but not an object
    assert log.head().count == 3
    assert log.record("x")["seq"] == 4


def test_an_anchor_held_and_the_records_after_it(tmp_path: Path) -> None:
    log = _log(tmp_path, 3)
    anchor = str(log.head())
    same = log.verify(anchor)
    assert same.ok is True and same.anchor_checked is True and same.records == 3
    assert same.detail == "3 records, chain intact up to the anchor at record 3"
    log.record("x")
    log.record("y")
    grown = log.verify(anchor)
    assert grown.ok is True and grown.records == 5 and grown.head == log.head()
    assert grown.detail == "5 records, chain intact up to the anchor at record 3 and 2 record(s) after it"
    by_hash = log.verify(anchor.split(":")[1])
    assert by_hash.ok and by_hash.detail == grown.detail


def test_a_truncated_log_against_its_anchor(tmp_path: Path) -> None:
    log = _log(tmp_path, 4)
    anchor = str(log.head())
    _write(log, _lines(log)[:-2])
    result = log.verify(anchor)
    assert result.ok is False and result.records == 2 and result.anchor_checked is True
    assert result.detail == "the anchor expects at least 4 records but the log holds 2: its end was truncated"
    by_hash = log.verify(anchor.split(":")[1])
    assert by_hash.ok is False
    assert by_hash.detail == (
        f"the anchored record {anchor.split(':')[1][:16]}... is not in the log anywhere: the "
        "log was truncated, its anchored line edited, or it was rewritten"
    )


def test_an_anchor_at_the_wrong_line(tmp_path: Path) -> None:
    """The anchored line is in the log, but not at the count the anchor names (lines removed before it)."""
    log = _log(tmp_path, 3)
    last = log.head().sha256
    result = log.verify(f"2:{last}")  # the last line's hash, claimed to be record 2
    assert result.ok is False and result.records == 3
    assert result.detail == (
        f"the anchored record {last[:16]}... is not in the log at line 2: the log was "
        "truncated, its anchored line edited, or it was rewritten"
    )


def test_anchor_parsing(tmp_path: Path) -> None:
    h = "ab" * 32
    assert parse_anchor(h) == (None, h)
    assert parse_anchor(f"  7:{h.upper()} ") == (7, h)
    for bad in ("xyz", h[:-1], f"{h}0", f"x:{h}", f"1234567890123:{h}", ""):
        with pytest.raises(ValueError) as info:
            parse_anchor(bad)
        assert str(info.value) == (
            "an audit head is 64 hex characters, optionally preceded by the record count "
            "and ':' (as printed by `mesh-mcp audit verify` or `mesh-mcp approve`)"
        )


# -- the settings' sinks --------------------------------------------------------------------


def test_the_audit_log_of_the_settings_honours_its_sinks(tmp_path: Path) -> None:
    plain = audit_log(load_settings(environ={}, overrides={"state_dir": str(tmp_path / "a")}))
    assert plain.copy_file is None and plain.syslog is False
    assert plain.path == tmp_path / "a" / "audit.log"
    copy = tmp_path / "copy.log"
    shipped = audit_log(
        load_settings(
            environ={},
            overrides={
                "state_dir": str(tmp_path / "b"),
                "approval": {"audit_copy_file": str(copy), "audit_syslog": True},
            },
        )
    )
    assert shipped.copy_file == copy and shipped.syslog is True
    shipped.syslog = False  # do not write to the host's syslog from a test
    shipped.record("x")
    assert copy.read_bytes() == shipped.path.read_bytes()


def test_the_copy_file_is_private_and_a_failing_copy_is_logged_not_lost(tmp_path: Path, caplog) -> None:
    import logging
    import stat

    copy = tmp_path / "copy.log"
    log = AuditLog(tmp_path / "state" / "audit.log", copy_file=copy)
    log.record("x")
    assert stat.S_IMODE(copy.stat().st_mode) == 0o600
    missing = tmp_path / "no-such-dir" / "copy.log"
    broken = AuditLog(tmp_path / "state" / "audit.log", copy_file=missing)
    with caplog.at_level(logging.WARNING, logger="mesh.audit"):
        entry = broken.record("y")
    assert entry["seq"] == 2 and broken.verify().ok  # the record is in the main log
    messages = [r.getMessage() for r in caplog.records if r.name == "mesh.audit"]
    assert len(messages) == 1
    assert messages[0].startswith(f"audit copy to {missing} failed (the record is in {broken.path}): ")
    assert "No such file or directory" in messages[0]


def test_a_lock_held_elsewhere_names_the_audit_log(tmp_path: Path, monkeypatch) -> None:
    import subprocess
    import sys
    import time

    from server import filelocks
    from server.errors import MeshError

    log = AuditLog(tmp_path / "audit.log")
    log.record("x")
    lock = f"{log.path}.lock"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time, filelock; l = filelock.FileLock(sys.argv[1]); l.acquire(); "
            "print('held', flush=True); time.sleep(30)",
            lock,
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        monkeypatch.setattr(filelocks.exclusive.__wrapped__, "__kwdefaults__", {"timeout": 0.3})
        started = time.monotonic()
        with pytest.raises(MeshError) as info:
            log.record("y")
        assert time.monotonic() - started < 5
        assert str(info.value).startswith(f"could not lock the audit log ({lock}) within 0 s")
    finally:
        holder.kill()
        holder.wait()
    assert log.head().count == 1  # nothing was written without the lock


def test_a_blank_first_line_does_not_change_the_head(tmp_path: Path) -> None:
    """The head is the hash of the last line's own bytes, whatever precedes it."""
    log = _log(tmp_path, 1)
    line = log.path.read_bytes()
    expected = log.head()
    log.path.write_bytes(b"\n" + line)
    assert log.head() == expected
    assert log.record("z")["prev"] == expected.sha256


def test_each_record_is_on_disk_when_fsync_runs(tmp_path: Path, monkeypatch) -> None:
    """Fsynced before the call returns: the line must have left Python's buffers when fsync is called."""
    import os

    log = AuditLog(tmp_path / "audit.log")
    seen: list[bytes] = []
    real = os.fsync

    def watching(fd: int) -> None:
        seen.append(log.path.read_bytes())
        real(fd)

    monkeypatch.setattr(os, "fsync", watching)
    log.record("x")
    log.record("y")
    assert len(seen) == 2
    assert seen[0].count(b"\n") == 1 and seen[1].count(b"\n") == 2
    assert seen[1] == log.path.read_bytes()


def test_a_line_edited_with_trailing_blanks_breaks_the_chain(tmp_path: Path) -> None:
    """The hash covers every byte of a line but its newline: blanks added at its end are an edit."""
    log = _log(tmp_path, 3)
    anchor = str(log.head())
    lines = _lines(log)
    _write(log, [lines[0], lines[1] + " \t", lines[2]])
    result = log.verify()
    assert result.ok is False and result.detail.startswith("line 3: chain broken")
    _write(log, [lines[0], lines[1], lines[2] + " "])  # the last line: only the anchor can see it
    assert log.verify().ok is True
    assert log.head() != AuditHead(anchor.split(":")[1], 3)
    assert log.verify(anchor).ok is False


def test_the_head_names_the_last_record_not_the_line_count(tmp_path: Path) -> None:
    """A log whose first lines were removed still names its last record by its number (no recount)."""
    log = _log(tmp_path, 4)
    _write(log, _lines(log)[2:])
    assert log.head().count == 4
    assert log.record("z")["seq"] == 5
    assert log.verify().ok is False  # and the removal itself is seen


SYSLOG_CHILD = r"""
import socket, sys
from pathlib import Path
from server.approval.audit import AuditLog
rx = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
rx.bind("/dev/log")
rx.settimeout(5)
AuditLog(Path(sys.argv[1] + ".plain")).record("not-shipped")  # syslog is off unless asked for
log = AuditLog(Path(sys.argv[1]), syslog=True)
log.record("approved", plan_id="p-1", detail="caf\u00e9")
sys.stdout.write(rx.recv(65536).decode("utf-8", "replace"))
"""


def test_records_are_shipped_to_syslog(tmp_path: Path) -> None:
    """A real ``syslog(3)`` datagram, received on ``/dev/log`` in a private mount namespace.

    The child process (``unshare -m``, a tmpfs over ``/dev``) binds ``/dev/log`` itself, so the
    host's syslog is never touched; skipped where unprivileged namespaces are not available.
    """
    import os
    import shutil
    import subprocess
    import sys

    from tests.helpers import REPO_ROOT

    AuditLog(tmp_path / "in-process.log").record("x")  # the same code, in this process too
    if shutil.which("unshare") is None:
        pytest.skip("unshare(1) is not installed")
    probe = subprocess.run(["unshare", "-m", "sh", "-c", "mount -t tmpfs none /mnt"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"no private mount namespace here: {probe.stderr.decode(errors='replace').strip()}")
    mutmut_env = {k: v for k, v in os.environ.items() if k.startswith(("MUTANT", "MUTMUT"))}  # bench/mutation.py
    script = f'mount -t tmpfs none /dev && exec {sys.executable} -c "$0" "$1"'
    done = subprocess.run(
        ["unshare", "-m", "sh", "-c", script, SYSLOG_CHILD, str(tmp_path / "audit.log")],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO_ROOT), **mutmut_env},
    )
    assert done.returncode == 0, done.stderr
    line = (tmp_path / "audit.log").read_text(encoding="utf-8").rstrip("\n")
    # <PRI>: facility AUTHPRIV (10) * 8 + severity INFO (6) = 86; tag mesh-mcp with the pid
    assert done.stdout.startswith("<86>"), done.stdout
    tag, _, message = done.stdout.partition(": ")
    assert tag.split()[-1].startswith("mesh-mcp[") and tag.endswith("]"), tag
    assert message.rstrip("\x00\n") == "audit " + line
    assert "café" in message


def test_the_head_of_a_single_line_one_byte_past_a_tail_chunk(tmp_path: Path) -> None:
    """The tail is read backwards in 64 KiB chunks: a lone line of 64 KiB + 1 bytes is read to its first byte."""
    log = AuditLog(tmp_path / "audit.log")
    entry = log.record("x", blob="")
    line_len = len(log.path.read_bytes()) - 1  # the same record with an empty blob
    log.path.unlink()
    log.record("x", blob="a" * (64 * 1024 - line_len))  # the file: 65536 bytes of line + its newline
    data = log.path.read_bytes()
    assert len(data) == 64 * 1024 + 1
    assert log.head() == AuditHead(hashlib.sha256(data[:-1]).hexdigest(), 1)
    assert log.record("y")["prev"] == hashlib.sha256(data[:-1]).hexdigest()
    assert entry["seq"] == 1


def test_the_head_of_a_lone_line_covers_its_trailing_blanks(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit.log")
    log.record("x")
    edited = log.path.read_bytes().rstrip(b"\n") + b" \n"
    log.path.write_bytes(edited)
    assert log.head().sha256 == hashlib.sha256(edited[:-1]).hexdigest()
