"""``mesh-mcp doctor``: is the configuration usable, and does everything answer?

Core checks live here (config, PostgreSQL of each service, Redis). Capabilities add
their own (schema and indexes, Redis stream features) through an async
``checks(runtime) -> list[Check]`` function listed in :data:`CAPABILITY_CHECKS`.
Exit status is non-zero when any check fails.
"""

from __future__ import annotations

import argparse
import importlib
from typing import TYPE_CHECKING

import anyio
from pydantic import BaseModel

from server.checks import Check
from server.cli_support import print_json, print_table, print_text, settings_from_args
from server.errors import MeshError
from server.redaction import redact_text
from server.runtime import Runtime

if TYPE_CHECKING:
    from server.config import Settings

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
    assumed = assumed_defaults(settings)
    loaded = (f"loaded from {settings.config_file}" if settings.config_file else "defaults (no config file)") + (
        f"; [conventions] from the workspace's {settings.workspace_config_file}"
        if settings.workspace_config_file else "")
    detail = loaded + (f"; assumed: {'; '.join(assumed)}" if assumed else "")
    checks = [Check(name="config", status="ok", detail=detail)]
    from server.config import unknown_env_variables

    unknown = unknown_env_variables()
    if unknown:
        checks.append(Check(name="environment", status="warn",
                            detail=f"unknown environment variable(s) {', '.join(unknown)}: ignored (they name no "
                            "setting)",
                            fix="check the spelling (MESH_SECTION__KEY, see docs/configuration.md) or unset them"))
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


def assumed_defaults(settings: Settings) -> list[str]:
    """What doctor checks without it being configured: said, never silently assumed."""
    out = []
    if "url" not in settings.redis.model_fields_set:
        from urllib.parse import urlsplit

        url = urlsplit(settings.redis.url)
        db = url.path.strip("/") or "0"
        out.append(f"Redis at {url.hostname}:{url.port or 6379} db {db} (the default: no [redis] url)")
    if settings.state_dir is None:
        out.append(f"state folder {settings.resolved_state_dir} (no state_dir)")
    return out


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
        # each check once; the table wraps long causes, never cuts them (server/tables.py)
        print_table(["check", "status", "detail"],
                    [[c.name, c.status, c.detail + (f" — fix: {c.fix}" if c.fix else "")] for c in report.checks])
        print_text("\n" + summary_line(report.checks))
    return 0 if report.ok else 1


def summary_line(checks: list[Check]) -> str:
    """The last line of doctor: counts that match the table; "all good" only when nothing warned or failed."""
    counts = {status: sum(c.status == status for c in checks) for status in ("ok", "warn", "fail")}
    tally = f"{counts['ok']} ok, {counts['warn']} warning(s), {counts['fail']} failure(s)"
    if counts["fail"]:
        return f"problems found: {tally} (exit status 1)"
    if counts["warn"]:
        return f"usable, with warnings: {tally} (exit status 0: only a failure fails doctor)"
    return f"all good: {tally}"
