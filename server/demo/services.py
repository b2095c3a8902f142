"""The throwaway services of ``mesh-mcp demo``: where its data lives and how it goes away.

:func:`start_services` starts an embedded PostgreSQL and an embedded Redis (the ``demo``
extra) under the demo's directory, or uses the servers named by ``MESH_DEMO_POSTGRES_URL``
and ``MESH_DEMO_REDIS_URL`` (a scratch database is created there; the Redis logical
database must be empty). :meth:`DemoServices.close` removes all of it, with Ctrl-C and
SIGTERM ignored while it runs. :func:`new_root` makes the demo's directory, marked with
the process id so that :func:`sweep_stale_demos` can remove what a killed demo left.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import sys
import tempfile
import uuid
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import redis

from server.demo.embedded import EmbeddedServices
from server.errors import InvalidArgument, MeshError
from server.redaction import redact_dsn

log = logging.getLogger("mesh.demo")

DEMO_POSTGRES_ENV = "MESH_DEMO_POSTGRES_URL"
DEMO_REDIS_ENV = "MESH_DEMO_REDIS_URL"
EMBEDDED_DB_NAME = "mesh_demo_event"
ROOT_PREFIX = "mesh-demo-"
PID_FILE = "demo.pid"


def say(message: str) -> None:
    """A progress line on stderr."""
    print(f"mesh-mcp demo: {message}", file=sys.stderr, flush=True)


def _with_dbname(url: str, dbname: str) -> str:
    info = psycopg.conninfo.conninfo_to_dict(url)
    info["dbname"] = dbname
    return psycopg.conninfo.make_conninfo(**info)


@dataclass
class DemoServices:
    """Where the demo's data lives, and how to get rid of it."""

    root: Path
    service_dsn: str
    redis_url: str
    labels: dict[str, str]
    embedded: EmbeddedServices | None = None
    admin_url: str | None = None
    scratch_db: str | None = None
    redis_keys: list[str] = field(default_factory=list)

    def close(self) -> None:
        """Drop what the demo created (best effort, never raises).

        Runs with SIGINT and SIGTERM ignored, so that a second Ctrl-C, or the SIGTERM an
        MCP client sends a stdio server that does not exit at once, cannot cut the cleanup
        short. The demo's own files go first, then the services (the embedded PostgreSQL
        with an immediate shutdown: its data is thrown away), then the directory.
        """
        with _signals_ignored():
            for name in ("workspace", "state"):
                shutil.rmtree(self.root / name, ignore_errors=True)
            if self.embedded is None:
                self._clean_external()
            else:
                _stop_postgres_now(self.root / "services" / "pgdata")
                self.embedded.stop()
            shutil.rmtree(self.root, ignore_errors=True)

    def _clean_external(self) -> None:
        if self.redis_keys:
            try:
                client = redis.Redis.from_url(self.redis_url)
                try:
                    client.delete(*self.redis_keys)
                finally:
                    client.close()
            except redis.RedisError as exc:
                log.warning("could not delete the demo's Redis keys: %s", exc)
        if self.admin_url and self.scratch_db:
            try:
                with psycopg.connect(self.admin_url, autocommit=True) as conn:
                    conn.execute(
                        psycopg.sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                            psycopg.sql.Identifier(self.scratch_db)
                        )
                    )
            except psycopg.Error as exc:
                log.warning("could not drop the demo database %s: %s", self.scratch_db, exc)


@contextmanager
def _signals_ignored() -> Iterator[None]:
    saved: dict[int, Any] = {}
    try:
        for sig in (signal.SIGINT, signal.SIGTERM):
            saved[sig] = signal.signal(sig, signal.SIG_IGN)
    except ValueError:  # not the main thread: signals cannot be touched
        pass
    try:
        yield
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)


def _stop_postgres_now(pgdata: Path, timeout_s: float = 5.0) -> None:
    """Immediate shutdown (SIGQUIT) of the demo's own postmaster, found by its pid file.

    Only a process whose command line names this very data directory is signalled (read with
    psutil, which comes with the demo extra; without it nothing is signalled).
    """
    try:
        import psutil

        pid = int((pgdata / "postmaster.pid").read_text().splitlines()[0])
        process = psutil.Process(pid)
        if str(pgdata) not in " ".join(process.cmdline()):
            return
        process.send_signal(signal.SIGQUIT)
        process.wait(timeout_s)
    except Exception:  # best effort: the embedded server's own stop follows
        log.debug("immediate stop of the demo PostgreSQL failed", exc_info=True)


def _create_database(admin_url: str, name: str) -> None:
    try:
        with psycopg.connect(admin_url, autocommit=True, connect_timeout=5) as conn:
            conn.execute(psycopg.sql.SQL("CREATE DATABASE {}").format(psycopg.sql.Identifier(name)))
    except psycopg.Error as exc:
        raise MeshError(f"could not create the demo database {name}: {str(exc).strip().splitlines()[0]}") from None


def start_services(root: Path, environ: dict[str, str]) -> DemoServices:
    """Embedded services, or the servers named by ``MESH_DEMO_*`` (both must be set)."""
    pg_url, redis_url = environ.get(DEMO_POSTGRES_ENV), environ.get(DEMO_REDIS_ENV)
    if bool(pg_url) != bool(redis_url):
        raise InvalidArgument(f"set both {DEMO_POSTGRES_ENV} and {DEMO_REDIS_ENV}, or neither (embedded services)")
    if pg_url and redis_url:
        client = redis.Redis.from_url(redis_url, socket_connect_timeout=3)
        try:
            size = client.dbsize()
        except redis.RedisError as exc:
            raise MeshError(f"{DEMO_REDIS_ENV}: Redis at {redact_dsn(redis_url)} is unavailable: {exc}") from None
        finally:
            client.close()
        if size:
            raise InvalidArgument(
                f"{DEMO_REDIS_ENV}: logical database of {redact_dsn(redis_url)} holds {size} keys; the demo needs an "
                "empty one (e.g. redis://127.0.0.1:6379/9)"
            )
        scratch = f"mesh_demo_{uuid.uuid4().hex[:10]}"
        _create_database(pg_url, scratch)
        return DemoServices(
            root=root, service_dsn=_with_dbname(pg_url, scratch), redis_url=redis_url, admin_url=pg_url,
            scratch_db=scratch,
            labels={"postgres": f"{redact_dsn(pg_url)} (scratch database {scratch})", "redis": redact_dsn(redis_url)},
        )
    embedded = EmbeddedServices(root=root / "services")
    try:
        say("starting an embedded PostgreSQL and an embedded Redis (throwaway, free ports)")
        with warnings.catch_warnings():  # platformdirs' notice on machines without a session runtime dir
            warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
            admin = embedded.start_postgres()
        redis_url = embedded.start_redis()
        _create_database(admin, EMBEDDED_DB_NAME)
    except BaseException:
        embedded.stop()
        raise
    return DemoServices(
        root=root, service_dsn=_with_dbname(admin, EMBEDDED_DB_NAME), redis_url=redis_url, embedded=embedded,
        labels={"postgres": f"embedded, database {EMBEDDED_DB_NAME} ({redact_dsn(admin)})",
                "redis": f"embedded ({redis_url})"},
    )


def new_root() -> Path:
    """A fresh demo directory, marked with this process's id (see :func:`sweep_stale_demos`)."""
    sweep_stale_demos()
    root = Path(tempfile.mkdtemp(prefix=ROOT_PREFIX))
    (root / PID_FILE).write_text(str(os.getpid()), encoding="ascii")
    return root


def sweep_stale_demos(base: Path | None = None) -> list[Path]:
    """Remove the directories of earlier demos whose process is gone (killed before cleaning up).

    A demo killed with SIGKILL (an MCP client gives a stdio server a few seconds to exit)
    cannot clean up after itself. Only directories named ``mesh-demo-*`` holding the pid
    file of a process that no longer exists are touched; a PostgreSQL still running on
    such a directory's data is stopped first. Returns the directories removed.
    """
    removed = []
    for root in sorted(Path(base or tempfile.gettempdir()).glob(f"{ROOT_PREFIX}*")):
        try:
            pid = int((root / PID_FILE).read_text(encoding="ascii").strip())
        except (OSError, ValueError):
            continue
        if _process_exists(pid):
            continue
        _stop_postgres_now(root / "services" / "pgdata")
        shutil.rmtree(root, ignore_errors=True)
        removed.append(root)
    return removed


def _process_exists(pid: int) -> bool:
    """True when a process with this id exists (without psutil, which only the demo extra brings)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, owned by another user
        return True
    return True
