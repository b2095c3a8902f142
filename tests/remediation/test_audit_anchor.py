"""Issue 23, route 3: what the audit chain detects, alone and against an anchor."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from server.approval.audit import GENESIS, AuditLog, parse_anchor
from server.config import load_settings
from tests.helpers import REPO_ROOT


def _log(tmp_path: Path, n: int = 5) -> AuditLog:
    log = AuditLog(tmp_path / "state" / "audit.log")
    for i in range(n):
        log.record("step", plan_id="p", step=i, result="done")
    return log


def _lines(log: AuditLog) -> list[str]:
    return log.path.read_text().splitlines()


def _write(log: AuditLog, lines: list[str]) -> None:
    log.path.write_text("".join(f"{line}\n" for line in lines))


def test_head_is_count_and_hash_and_each_record_carries_it(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit.log")
    assert str(log.head()) == f"0:{GENESIS}"
    entry = log.record("proposed", plan_id="p")
    assert entry["seq"] == 1 and entry["head"] == str(log.head())
    assert log.head().count == 1 and len(log.head().sha256) == 64
    assert parse_anchor(entry["head"]) == (1, log.head().sha256)
    with pytest.raises(ValueError):
        parse_anchor("not-a-hash")


def test_tail_truncation_is_seen_only_against_an_anchor(tmp_path: Path) -> None:
    log = _log(tmp_path)
    anchor = str(log.head())
    _write(log, _lines(log)[:-2])  # the last two records dropped: the rest still chains
    alone = log.verify()
    assert alone.ok and not alone.anchor_checked and "cannot be seen" in alone.detail  # said plainly
    for expect in (anchor, anchor.split(":")[1]):  # COUNT:HASH and HASH alone
        result = log.verify(expect)
        assert not result.ok and result.anchor_checked
    assert "truncated" in log.verify(anchor).detail


def test_an_edited_last_line_is_seen_against_an_anchor(tmp_path: Path) -> None:
    log = _log(tmp_path)
    anchor = str(log.head())
    lines = _lines(log)
    last = json.loads(lines[-1])
    last["result"] = "failed"
    lines[-1] = json.dumps(last, separators=(",", ":"))
    _write(log, lines)
    assert log.verify().ok  # nothing after it chains to the last line
    result = log.verify(anchor)
    assert not result.ok and "not in the log" in result.detail


def test_middle_edits_deletions_and_cut_lines_are_seen_without_an_anchor(tmp_path: Path) -> None:
    log = _log(tmp_path)
    lines = _lines(log)
    _write(log, lines[:1] + lines[2:])
    assert not log.verify().ok
    _write(log, [lines[0], lines[1].replace('"done"', '"undone"'), *lines[2:]])
    assert "line 3" in log.verify().detail
    _write(log, lines)
    log.path.write_bytes(log.path.read_bytes()[:-10])  # cut mid-line
    assert "incomplete" in log.verify().detail


def test_a_grown_log_still_holds_its_anchor(tmp_path: Path) -> None:
    log = _log(tmp_path, 3)
    anchor = str(log.head())
    log.record("apply_finished", plan_id="p")
    result = log.verify(anchor)
    assert result.ok and "1 record(s) after it" in result.detail


def test_records_are_shipped_to_the_copy_file(tmp_path: Path) -> None:
    copy = tmp_path / "copy" / "audit.copy"
    copy.parent.mkdir()
    settings = load_settings(environ={}, overrides={"state_dir": str(tmp_path / "state"),
                                                    "approval": {"audit_copy_file": str(copy)}})
    from server.approval.audit import audit_log

    log = audit_log(settings)
    for i in range(3):
        log.record("step", step=i)
    assert copy.read_text() == log.path.read_text()  # the copy holds the anchor outside the log
    _write(log, _lines(log)[:-1])
    copied_head = AuditLog(copy).head()
    assert not log.verify(str(copied_head)).ok


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MESH_")}
    env["PYTHONPATH"] = str(REPO_ROOT)
    return subprocess.run([sys.executable, "-m", "server.cli", *args], capture_output=True, text=True, env=env,
                          cwd=REPO_ROOT, timeout=60)


def test_audit_verify_command(tmp_path: Path, mesh_config) -> None:
    config = mesh_config({"state_dir": str(tmp_path / "state")})
    log = _log(tmp_path)
    anchor = str(log.head())
    ok = _cli("audit", "verify", "--config", str(config), "--expect-head", anchor)
    assert ok.returncode == 0 and ok.stdout.startswith("ok:") and f"head {anchor}" in ok.stdout
    _write(log, _lines(log)[:-1])
    cut = _cli("audit", "verify", "--config", str(config), "--expect-head", anchor, "--json")
    assert cut.returncode == 1 and json.loads(cut.stdout)["ok"] is False
    bad = _cli("audit", "verify", "--config", str(config), "--expect-head", "xyz")
    assert bad.returncode == 2 and "--expect-head" in bad.stderr
    doctor = _cli("doctor", "--config", str(config), "--json")
    checks = {c["name"]: c for c in json.loads(doctor.stdout)["checks"]}
    assert checks["audit_log"]["status"] == "ok" and "4 records" in checks["audit_log"]["detail"]
    _write(log, _lines(log)[1:])
    doctor = _cli("doctor", "--config", str(config), "--json")
    checks = {c["name"]: c for c in json.loads(doctor.stdout)["checks"]}
    assert doctor.returncode == 1 and checks["audit_log"]["status"] == "fail"
