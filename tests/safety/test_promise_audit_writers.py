"""Promise: concurrent writers never interleave nor fork the audit chain.

Two processes (two servers, or a server and ``mesh-mcp approve``) append to the same audit
log at once. Each record reads the last line to chain to it, so without the exclusive lock
two records would chain to the same predecessor (and share a ``seq``): the chain must stay
one line after another, every record present once.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from server.approval.audit import AuditLog

ROOT = Path(__file__).resolve().parents[2]
PER_WRITER = 150

WRITER = """
import sys
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from server.approval.audit import AuditLog
log = AuditLog(Path(sys.argv[2]))
sys.stdout.write("ready\\n"); sys.stdout.flush()
sys.stdin.readline()  # both writers start together
for n in range(int(sys.argv[4])):
    log.record("step", plan_id=sys.argv[3], step=n)
"""


def test_two_processes_writing_at_once_keep_one_chain(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    AuditLog(path).record("first")
    writers = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(ROOT), str(path), name, str(PER_WRITER)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        for name in ("writer-a", "writer-b")
    ]
    try:
        for w in writers:
            assert w.stdout.readline().strip() == "ready"
        for w in writers:
            w.stdin.write("go\n")
            w.stdin.flush()
        for w in writers:
            assert w.wait(60) == 0
    finally:
        for w in writers:
            if w.poll() is None:
                w.kill()
    log = AuditLog(path)
    report = log.verify()
    assert report.ok, report.detail
    assert report.records == 1 + 2 * PER_WRITER
    records = log.read()
    assert [r["seq"] for r in records] == list(range(1, 2 + 2 * PER_WRITER))
    for name in ("writer-a", "writer-b"):
        assert [r["step"] for r in records if r["plan_id"] == name] == list(range(PER_WRITER))
