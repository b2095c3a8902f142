"""Issue 18 (Windows part): the whole server imports, approves and audits without ``fcntl``.

A subprocess gets a ``sitecustomize`` whose import hook makes ``import fcntl`` raise
ImportError (as on Windows) in our packages and in filelock. It builds the server (every capability module), mints and
verifies a local token, consumes its nonce, and two such processes write the audit log at
the same time through the portable lock: the chain must hold every record.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.helpers import REPO_ROOT

SITECUSTOMIZE = '''
import builtins
import sys

# Packages that must run without fcntl: ours, and filelock (so that it takes its portable
# path). Third-party modules that guard `import fcntl` with `sys.platform != "win32"` (the MCP
# SDK's stdio transport does) keep it: on Windows they do not import it at all.
BLOCKED = ("server", "tools", "resources", "filelock")
_import = builtins.__import__


def _no_fcntl(name, globals=None, locals=None, fromlist=(), level=0):
    importer = (globals or {}).get("__name__") or ""
    if name == "fcntl" and importer.split(".")[0] in BLOCKED:
        raise ImportError(f"No module named 'fcntl' (made unavailable to {importer} by the test)")
    return _import(name, globals, locals, fromlist, level)


builtins.__import__ = _no_fcntl
'''

CHILD = '''
import json, sys
from datetime import datetime, timedelta, UTC
from pathlib import Path

state = Path(sys.argv[1])
role = sys.argv[2]

from server.config import load_settings
from server.app import build_server
from server.approval.tokens import TokenRefused, consume_nonce, mint_token, verify_token
from server.approval.audit import audit_log
from server.filelocks import lock_kind

settings = load_settings(environ={}, overrides={"state_dir": str(state),
                                                "approval": {"secret_file": str(state / "secret.key")}})
out = {"lock": lock_kind()}
if role == "approval":
    build_server(settings)  # imports every tool, resource and the remediation modules
    token, claims = mint_token(settings, plan_id="p-1", plan_sha256="a" * 64,
                               plan_expires_at=datetime.now(UTC) + timedelta(hours=1), approver="local:test")
    verify_token(settings, token, plan_id="p-1", plan_sha256="a" * 64)
    consume_nonce(settings, claims)
    try:
        consume_nonce(settings, claims)
        out["reuse"] = "accepted"
    except TokenRefused as exc:
        out["reuse"] = exc.reason
else:
    log = audit_log(settings)
    for i in range(40):
        log.record("step", plan_id=role, step=i, result="done")
ours = [m for name, m in list(sys.modules.items()) if name.split(".")[0] in ("server", "tools", "resources")]
out["modules"] = len(ours)
out["fcntl_users"] = sorted(m.__name__ for m in ours if "fcntl" in vars(m))
print(json.dumps(out))
'''


def _spawn(tmp_path: Path, role: str) -> subprocess.Popen:
    hook = tmp_path / "hook"
    hook.mkdir(exist_ok=True)
    (hook / "sitecustomize.py").write_text(SITECUSTOMIZE)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MESH_")}
    env["PYTHONPATH"] = os.pathsep.join([str(hook), str(REPO_ROOT)])
    return subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path / "state"), role], env=env, cwd=REPO_ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _result(proc: subprocess.Popen) -> dict:
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    return json.loads(stdout.strip().splitlines()[-1])


def test_server_runs_without_fcntl(tmp_path: Path) -> None:
    approval = _result(_spawn(tmp_path, "approval"))
    assert approval["modules"] > 50 and approval["fcntl_users"] == []  # the whole server, none with fcntl
    assert approval["lock"] == "SoftFileLock"  # filelock's portable fallback, not fcntl.flock
    assert approval["reuse"] == "reused"
    writers = [_spawn(tmp_path, name) for name in ("writer-a", "writer-b")]
    results = [_result(p) for p in writers]
    assert all(r["lock"] == "SoftFileLock" and r["fcntl_users"] == [] for r in results)
    from server.approval.audit import AuditLog

    log = AuditLog(tmp_path / "state" / "audit.log")
    report = log.verify()
    assert report.ok and report.records == 80, report.detail  # no record lost or interleaved
    assert sorted(r["seq"] for r in log.read()) == list(range(1, 81))
