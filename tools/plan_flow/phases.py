"""Phases every plan shares: the publish stop (read from the workspace's tooling) and the final verify."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tools.plan_flow.model import PlanPhase, PlanStep
from tools.plan_flow.tooling import dependency_line, package_info, tooling_of


def mark_fallback(phases: list[PlanPhase], domain: str, fallback: str) -> None:
    for phase in phases:
        for s in phase.steps:
            if s.action in (
                "add_member",
                "add_payload_interface",
                "add_registry_key",
                "emit",
                "create_handler",
                "route_in_worker",
                "provide_in_module",
                "consume",
            ):
                s.why = (
                    f"no sibling in domain '{domain}' (no convention there): follows closest domain "
                    f"'{fallback}'; " + s.why
                )


def in_repo(site: Any, emitter: str, index: Any) -> bool:
    pkg = index.package_dir_of(site.file)
    return emitter in (site.repo, pkg, pkg.rsplit("/", 1)[-1]) or (site.symbol and site.symbol.split(".")[0] == emitter)


def repo_of(steps: list[PlanStep]) -> str | None:
    files = [s.file for s in steps if s.file]
    return files[0].split("/")[0] if files else None


def services_of(index: Any, steps: list[PlanStep]) -> list[str]:
    out: list[str] = []
    for s in steps:
        if s.file:
            pkg = (
                index.package_dir_of(s.file)
                if (Path(index.workspace) / s.file).exists()
                else index.package_dir_of(s.file.rsplit("/", 1)[0] + "/x.ts")
            )
            if pkg not in out:
                out.append(pkg)
    return out


def publish_phase(index: Any, package: str, services: list[str]) -> PlanPhase:
    ws = Path(index.workspace)
    pkg_dir = package.rstrip("/")
    name, version = package_info(ws, pkg_dir)
    tools = tooling_of(ws, pkg_dir)
    cmds = [f"cd {tools.root or '.'}"]
    build = [tools.run(s) for s in ("build", "test") if s in tools.scripts]
    if build:
        cmds.append(" && ".join(build))
    if tools.changesets:
        cmds += [tools.exec("changeset", "add"), tools.exec("changeset", "version")]
        how = (
            f"changesets ({tools.changesets}"
            + (f", snapshot {json.dumps(tools.snapshot)}" if tools.snapshot else "")
            + ")"
        )
    else:
        how = "no changesets config: bump the version in package.json by hand"
    cmds.append(
        f"# STOP: push the branch; {name or pkg_dir} must be published (a snapshot of {version or '?'}) "
        "before any service uses the new member"
    )
    line = dependency_line(ws, pkg_dir, "version")
    steps = [
        PlanStep(
            action="publish_contracts",
            file=f"{pkg_dir}/package.json",
            mode="run",
            line=line[0] if line else None,
            anchor=line[1] if line else None,
            snippet="\n".join(cmds),
            why=f"{name or pkg_dir} {version or ''}: package manager {tools.manager} (from {tools.evidence}); {how}",
        )
    ]
    for svc in services:
        if svc.startswith(pkg_dir):
            continue
        svc_tools = tooling_of(ws, svc)
        dep = dependency_line(ws, svc, name) if name else None
        steps.append(
            PlanStep(
                action="bump_dependency",
                file=f"{svc}/package.json" if svc else "package.json",
                mode="run",
                line=dep[0] if dep else None,
                anchor=dep[1] if dep else None,
                snippet=f"cd {svc or '.'} && {svc_tools.upgrade(name or pkg_dir, '<snapshot version>')}",
                why=f"{svc or 'the service'} "
                + ("depends on " + dep[1].rstrip(",") if dep else f"does not list {name} yet")
                + f"; package manager {svc_tools.manager} (from {svc_tools.evidence})",
            )
        )
    return PlanPhase(name="publish", repo=pkg_dir, stop=True, steps=steps)


def verify_phase(name: str, qualified: str, checks: list[str]) -> PlanPhase:
    return PlanPhase(
        name="verify",
        steps=[
            PlanStep(
                action="verify",
                mode="run",
                snippet=f"mesh-mcp verify {name}",
                why=f"verify_flow {qualified}: expect {', '.join(checks)} to pass",
            )
        ],
    )
