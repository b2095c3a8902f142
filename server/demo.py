"""``mesh-mcp demo``: zero-setup tour on throwaway services and a seeded broken system.

1. Services: an embedded PostgreSQL and an embedded Redis (the ``demo`` extra), in a
   temporary directory, on free ports, stopped on exit (Ctrl-C and SIGTERM included).
   The demo never touches the services of your ``mesh.toml`` or ``MESH_*`` settings. To
   run it on servers of your own instead, set ``MESH_DEMO_POSTGRES_URL`` (a server where
   it may create and drop a scratch database) and ``MESH_DEMO_REDIS_URL`` (an *empty*
   logical database; only the keys the demo wrote are deleted afterwards).
2. A copy of the bundled sample workspace, and a service database ``event`` with the
   outbox schema, seeded by :mod:`server.demo_seed` with seven faults.
3. A diagnosis through a real MCP client session (:mod:`server.demo_report`), printed
   as a report (stdout) or as JSON (``--json``).
4. ``--serve``: the server stays up on the seeded data (stdio, or streamable HTTP with
   ``--http HOST:PORT``) with remediation enabled, and its ``mesh.toml`` is written
   next to the data so that ``mesh-mcp approve PLAN_ID --config ...`` works. In stdio
   mode the report goes to stderr, since stdout is the MCP channel.

Progress messages go to stderr; the exit status is 0 when every seeded fault was found.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import signal
import sys
import tempfile
import time
import uuid
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import resources as importlib_resources
from pathlib import Path
from typing import Any

import anyio
import psycopg
import redis

from server.cli_support import fail, print_json
from server.config import Settings
from server.demo_report import DemoReport, diagnose, render_text
from server.demo_seed import SERVICE, Scenario, seed
from server.embedded import EmbeddedServices
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


def sample_workspace_dir() -> Path:
    """The sample workspace shipped with the package."""
    return Path(str(importlib_resources.files("resources") / "sample_workspace"))


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


def demo_settings(services: DemoServices, workspace: Path, *, remediation: bool) -> Settings:
    """The demo's own settings, validated directly: no config file, no ``MESH_*`` variable
    (not even ``MESH_CONFIG``) is read, so the demo can never reach a configured service."""
    return Settings.model_validate({
        "workspace": str(workspace),
        "state_dir": str(services.root / "state"),
        "services": {SERVICE: {"postgres": services.service_dsn, "emitter": "ms-event"}},
        "redis": {"url": services.redis_url},
        "approval": {"mode": "local", "secret_file": str(services.root / "approval.key")},
        "enable_remediation": remediation,
    })


def write_config(settings: Settings, path: Path) -> Path:
    """A mesh.toml equivalent to ``settings`` (for ``mesh-mcp approve --config``)."""

    def q(value: Any) -> str:
        return json.dumps(str(value))

    lines = [
        "# written by `mesh-mcp demo --serve`; removed when the demo stops",
        f"workspace = {q(settings.workspace)}",
        f"state_dir = {q(settings.state_dir)}",
        f"enable_remediation = {'true' if settings.enable_remediation else 'false'}",
        "",
        f"[services.{SERVICE}]",
        f"postgres = {q(settings.services[SERVICE].postgres)}",
        f"emitter = {q(settings.services[SERVICE].emitter)}",
        "",
        "[redis]",
        f"url = {q(settings.redis.url)}",
        "",
        "[approval]",
        'mode = "local"',
        f"secret_file = {q(settings.approval.secret_file)}",
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM raises KeyboardInterrupt, so cleanup runs as on Ctrl-C."""

    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


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


@dataclass
class DemoRun:
    """A prepared demo: services up, workspace copied, scenario seeded."""

    services: DemoServices
    settings: Settings
    scenario: Scenario
    timings: dict[str, float]


def prepare(root: Path, environ: dict[str, str], *, remediation: bool) -> DemoRun:
    """Start services, copy the workspace, seed the scenario; the caller closes ``run.services``."""
    started = time.perf_counter()
    try:
        services = start_services(root, environ)
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise
    try:
        timings = {"services": time.perf_counter() - started}
        workspace = root / "workspace"
        shutil.copytree(sample_workspace_dir(), workspace)
        settings = demo_settings(services, workspace, remediation=remediation)
        say("seeding a broken scenario (7 faults) into the service database and Redis")
        started = time.perf_counter()
        client = redis.Redis.from_url(services.redis_url)
        try:
            scenario = seed(services.service_dsn, client, settings.conventions, services.redis_keys)
        finally:
            client.close()
        timings["seed"] = time.perf_counter() - started
    except BaseException:
        services.close()
        raise
    return DemoRun(services=services, settings=settings, scenario=scenario, timings=timings)


def diagnose_run(run: DemoRun) -> DemoReport:
    """The diagnosis of a prepared demo, with timings."""
    say("diagnosing through an MCP client session (analyze_impact, outbox_health, trace_job, inspect_stream, ...)")
    started = time.perf_counter()
    report = anyio.run(diagnose, run.settings, run.scenario, dict(run.services.labels))
    timings = {**run.timings, "diagnosis": time.perf_counter() - started}
    report.seconds = {k: round(v, 2) for k, v in timings.items()}
    return report


def run_demo(environ: dict[str, str] | None = None) -> DemoReport:
    """The whole demo without serving: start, seed, diagnose, clean up; returns the report."""
    env = dict(os.environ if environ is None else environ)
    run = prepare(new_root(), env, remediation=False)
    try:
        return diagnose_run(run)
    finally:
        run.services.close()


def cmd_demo(args: argparse.Namespace) -> int:
    if args.http and not args.serve:
        return fail("--http only applies with --serve (mesh-mcp demo --serve --http 127.0.0.1:8765)")
    host_port = None
    if args.http:
        from server.serve import parse_host_port

        host_port = parse_host_port(args.http)
    with _sigterm_as_interrupt():
        run = prepare(new_root(), dict(os.environ), remediation=bool(args.serve))
        try:
            report = diagnose_run(run)
            to_stderr = bool(args.serve and not args.http)
            if args.json:
                if to_stderr:
                    print(report.model_dump_json(indent=2), file=sys.stderr)
                else:
                    print_json(report)
            else:
                print(render_text(report), file=sys.stderr if to_stderr else sys.stdout, flush=True)
            if args.serve:
                _serve(run.settings, run.services, host_port)
        finally:
            say("stopping and removing the demo services and data")
            run.services.close()
    return 0 if report.ok else 1


def _serve(settings: Settings, services: DemoServices, host_port: tuple[str, int] | None) -> None:
    from server.app import build_server

    config = write_config(settings, services.root / "mesh.toml")
    say(f"serving the seeded data with remediation enabled; config: {config}")
    say(f"approve a plan from another terminal: mesh-mcp approve PLAN_ID --config {config}")
    server = build_server(settings)
    if host_port is None:
        say("MCP over stdio on this process's stdin/stdout; close stdin or press Ctrl-C to stop")
        server.run("stdio")
    else:
        host, port = host_port
        say(f"MCP over streamable HTTP at http://{host}:{port}/mcp; press Ctrl-C to stop")
        server.run("streamable-http", host=host, port=port, streamable_http_path="/mcp")
