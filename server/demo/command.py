"""``mesh-mcp demo``: zero-setup tour on throwaway services and a seeded broken system.

1. Services (:mod:`server.demo.services`): an embedded PostgreSQL and an embedded Redis
   (the ``demo`` extra), in a temporary directory, on free ports, stopped on exit (Ctrl-C
   and SIGTERM included). The demo never touches the services of your ``mesh.toml`` or
   ``MESH_*`` settings. To run it on servers of your own instead, set
   ``MESH_DEMO_POSTGRES_URL`` (a server where it may create and drop a scratch database)
   and ``MESH_DEMO_REDIS_URL`` (an *empty* logical database; only the keys the demo wrote
   are deleted afterwards).
2. A copy of the bundled sample workspace, and a service database ``event`` with the
   outbox schema, seeded by :mod:`server.demo.seed` with seven faults.
3. A diagnosis through a real MCP client session (:mod:`server.demo.report`), printed
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
import os
import shutil
import signal
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import resources as importlib_resources
from pathlib import Path
from typing import Any

import anyio
import redis

from server.cli_support import fail, print_json
from server.config import Settings
from server.demo.report import DemoReport, diagnose, render_text
from server.demo.seed import DEMO_STREAM_MAXLEN, SERVICE, Scenario, seed
from server.demo.services import DemoServices, new_root, say, start_services


def sample_workspace_dir() -> Path:
    """The sample workspace shipped with the package."""
    return Path(str(importlib_resources.files("resources") / "sample_workspace"))


def demo_settings(services: DemoServices, workspace: Path, *, remediation: bool) -> Settings:
    """The demo's own settings, validated directly: no config file, no ``MESH_*`` variable
    (not even ``MESH_CONFIG``) is read, so the demo can never reach a configured service."""
    return Settings.model_validate({
        "workspace": str(workspace),
        "state_dir": str(services.root / "state"),
        "services": {SERVICE: {"postgres": services.service_dsn, "emitter": "ms-event"}},
        "redis": {"url": services.redis_url},
        "conventions": {"stream_maxlen": DEMO_STREAM_MAXLEN},
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
        "[conventions]",
        f"stream_maxlen = {settings.conventions.stream_maxlen}",
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
    config = write_config(settings, services.root / "mesh.toml")
    say(f"serving the seeded data with remediation enabled; config: {config}")
    say(f"approve a plan from another terminal: mesh-mcp approve PLAN_ID --config {config}")
    if host_port is None:
        from server.app import build_server

        say("MCP over stdio on this process's stdin/stdout; close stdin or press Ctrl-C to stop")
        build_server(settings).run("stdio")
    else:
        from server.serve import build_http_server, run_http

        host, port = host_port
        server, authenticated = build_http_server(settings, host, port)
        auth = "send the MESH_HTTP_TOKEN bearer token" if authenticated else "no token (loopback only)"
        say(f"MCP over streamable HTTP at http://{host}:{port}/mcp ({auth}); press Ctrl-C to stop")
        run_http(server, settings, host, port)
