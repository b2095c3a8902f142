"""``mesh-mcp doctor``: is the configuration usable, and does everything answer?

Core checks live here (config, PostgreSQL of each service, Redis). Capabilities add
their own (schema and indexes, Redis stream features) through an async
``checks(runtime) -> list[Check]`` function listed in :data:`CAPABILITY_CHECKS`.
Exit status is non-zero when any check fails.
"""

from __future__ import annotations

import argparse
import importlib

import anyio
from pydantic import BaseModel

from server.checks import Check
from server.cli_support import print_json, print_table, settings_from_args
from server.errors import MeshError
from server.redaction import redact_text
from server.runtime import Runtime

CAPABILITY_CHECKS: tuple[str, ...] = (
    "tools.outbox.doctor",
    "tools.streams.doctor",
    "server.approval.audit_cli",
    "tools.trace_request.doctor",
    "server.topology_doctor",
)


class DoctorReport(BaseModel):
    ok: bool
    checks: list[Check]


async def core_checks(runtime: Runtime) -> list[Check]:
    settings = runtime.settings
    checks = [
        Check(
            name="config",
            status="ok",
            detail=(f"loaded from {settings.config_file}" if settings.config_file else "defaults (no config file)")
            + (f"; [conventions] from the workspace's {settings.workspace_config_file}"
               if settings.workspace_config_file else ""),
        )
    ]
    if settings.workspace is None:
        checks.append(
            Check(name="workspace", status="warn", detail="no workspace: static tools unavailable",
                  fix="pass --workspace DIR or set workspace in your mesh.toml")
        )
    else:
        checks.append(Check(name="workspace", status="ok", detail=str(settings.workspace)))
    if not settings.services:
        checks.append(
            Check(name="services", status="warn", detail="no service configured: runtime SQL tools unavailable",
                  fix='add [services.<name>] postgres = "postgresql://..." to mesh.toml')
        )
    for name in sorted(settings.services):
        try:
            result = await runtime.connections.read(name, "SELECT current_setting('server_version') AS v")
            checks.append(Check(name=f"postgres:{name}", status="ok",
                                detail=f"PostgreSQL {result.rows[0]['v']}"))
        except MeshError as exc:
            checks.append(Check(name=f"postgres:{name}", status="fail", detail=redact_text(str(exc)),
                                fix="check the DSN in [services." + name + "] and that the server is up"))
    from server.topology_doctor import redis_checks  # each instance, through its topology

    checks.extend(await redis_checks(runtime))
    return checks


async def run_doctor(runtime: Runtime) -> DoctorReport:
    checks = await core_checks(runtime)
    for module_name in CAPABILITY_CHECKS:
        module = importlib.import_module(module_name)
        checks.extend(await module.checks(runtime))
    return DoctorReport(ok=all(c.status != "fail" for c in checks), checks=checks)


def cmd_doctor(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)

    async def go() -> DoctorReport:
        runtime = Runtime(settings)
        try:
            return await run_doctor(runtime)
        finally:
            await runtime.aclose()

    report = anyio.run(go)
    if args.json:
        print_json(report)
    else:
        print_table(["check", "status", "detail"], [[c.name, c.status, c.detail] for c in report.checks])
        problems = [c for c in report.checks if c.status != "ok"]
        for check in problems:  # the whole cause, never cut by the table
            print(f"\n{check.name}: {check.status}\n  {check.detail}")
            if check.fix:
                print(f"  fix: {check.fix}")
        print("\nall good" if report.ok else "\nproblems found")
    return 0 if report.ok else 1
