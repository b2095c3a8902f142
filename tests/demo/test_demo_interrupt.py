"""Ctrl-C on ``mesh-mcp demo --serve``: the services stop and the demo's directory is removed."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

from server.demo.embedded import free_port, port_answers
from tests.demo.test_demo import clean_env
from tests.helpers import REPO_ROOT

SERVING = "MCP over streamable HTTP"


def test_ctrl_c_while_serving_stops_the_services_and_removes_the_data() -> None:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "server.cli", "demo", "--serve", "--http", f"127.0.0.1:{port}"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=clean_env(), cwd=str(REPO_ROOT),
        start_new_session=True,  # its own process group, like a terminal's foreground job
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stderr.readline, "")), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 120
        while not any(SERVING in line for line in lines):
            assert proc.poll() is None, "".join(lines)
            assert time.monotonic() < deadline, "".join(lines)
            time.sleep(0.1)
        config = Path(next(re.search(r"config: (\S+)", line).group(1) for line in lines if "config: " in line))
        root = config.parent
        assert root.name.startswith("mesh-demo-") and config.is_file()
        postmaster = int((root / "services" / "pgdata" / "postmaster.pid").read_text().splitlines()[0])
        assert psutil.pid_exists(postmaster)
        # the "serving" line is printed just before uvicorn binds: wait for the port
        while not port_answers("127.0.0.1", port, 0.2):
            assert proc.poll() is None and time.monotonic() < deadline, "".join(lines)
            time.sleep(0.1)

        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does: the whole process group
        proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    reader.join(5)
    report = proc.stdout.read()
    assert "7 seeded faults, 7 found by mesh-mcp" in report
    redis_port = int(re.search(r"redis\s+embedded \(redis://127\.0\.0\.1:(\d+)/0\)", report).group(1))
    assert "stopping and removing the demo services and data" in "".join(lines)
    assert not root.exists()
    assert not psutil.pid_exists(postmaster) or psutil.Process(postmaster).status() == psutil.STATUS_ZOMBIE
    assert not port_answers("127.0.0.1", port) and not port_answers("127.0.0.1", redis_port)
