"""The workspace's own release tooling: package manager, changesets, scripts, the contracts' version.

Read from files only (``packageManager`` fields, lockfiles, ``.changeset/config.json``,
``package.json`` scripts); nothing is run.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from server import workspace_files

LOCKFILES = (
    ("yarn.lock", "yarn"),
    ("pnpm-lock.yaml", "pnpm"),
    ("package-lock.json", "npm"),
    ("bun.lockb", "bun"),
    ("bun.lock", "bun"),
)


def read_json(path: Path) -> dict:
    try:
        data = json.loads(workspace_files.read_regular_file(path).decode("utf-8"))
    except (OSError, ValueError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}


@dataclass
class Tooling:
    root: str  # folder (relative) the commands run in
    manager: str
    manager_version: str | None
    evidence: str  # what the manager was read from
    changesets: str | None  # the config file, when changesets is set up
    snapshot: dict = field(default_factory=dict)
    scripts: list[str] = field(default_factory=list)

    def run(self, script: str) -> str:
        if self.manager == "npm":
            return f"npm run {script}"
        return f"{self.manager} {script}"

    def exec(self, tool: str, *args: str) -> str:
        prefix = {"npm": "npx", "pnpm": "pnpm", "bun": "bunx"}.get(self.manager, "yarn")
        return " ".join([prefix, tool, *args])

    def upgrade(self, package: str, version: str) -> str:
        if self.manager == "yarn":
            berry = self.manager_version is not None and not self.manager_version.startswith("1.")
            return f"yarn up {package}@{version}" if berry else f"yarn upgrade {package}@{version}"
        if self.manager == "pnpm":
            return f"pnpm up {package}@{version}"
        if self.manager == "bun":
            return f"bun add {package}@{version}"
        return f"npm install {package}@{version}"


def tooling_of(workspace: Path, start: str, stop_at: str = "") -> Tooling:
    """The tooling of the package at ``start`` (relative): the nearest folder up to ``stop_at`` that says."""
    parts = [p for p in start.split("/") if p]
    manager = version = evidence = None
    root = start
    changesets: str | None = None
    snapshot: dict = {}
    scripts: list[str] = []
    for i in range(len(parts), -1, -1):
        rel = "/".join(parts[:i])
        folder = workspace / rel if rel else workspace
        pkg = read_json(folder / "package.json")
        if manager is None and isinstance(pkg.get("packageManager"), str):
            name, _, version = pkg["packageManager"].partition("@")
            manager, evidence, root = (
                name,
                f"{rel + '/' if rel else ''}package.json packageManager '{pkg['packageManager']}'",
                rel,
            )
            version = version.split("+")[0] or None
        if manager is None:
            for lock, name in LOCKFILES:
                if (folder / lock).is_file():
                    manager, evidence, root = name, f"{rel + '/' if rel else ''}{lock}", rel
                    break
        if changesets is None and (folder / ".changeset" / "config.json").is_file():
            changesets = f"{rel + '/' if rel else ''}.changeset/config.json"
            cfg = read_json(folder / ".changeset" / "config.json")
            snap = cfg.get("snapshot")
            snapshot = snap if isinstance(snap, dict) else {}
            root = rel
        if not scripts and isinstance(pkg.get("scripts"), dict) and ("workspaces" in pkg or i == 0 or changesets):
            scripts = sorted(k for k in pkg["scripts"] if isinstance(k, str))
        if manager and (rel == stop_at or changesets):
            break
    if manager is None:
        manager, evidence = "npm", "no packageManager field and no lockfile found (npm assumed)"
    return Tooling(root, manager, version, evidence or "", changesets, snapshot, scripts)


def package_info(workspace: Path, package_dir: str) -> tuple[str | None, str | None]:
    """(name, version) of the package.json in ``package_dir``."""
    pkg = read_json(workspace / package_dir / "package.json")
    name, version = pkg.get("name"), pkg.get("version")
    return (name if isinstance(name, str) else None, version if isinstance(version, str) else None)


def dependency_line(workspace: Path, package_dir: str, dep: str) -> tuple[int, str] | None:
    """(1-based line, text) of ``"dep": "..."`` in the package's package.json."""
    try:
        lines = workspace_files.read_text(workspace, f"{package_dir}/package.json".lstrip("/"),
                                          errors="strict").splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    for i, line in enumerate(lines, 1):
        if f'"{dep}"' in line and ":" in line.split(f'"{dep}"', 1)[1][:3]:
            return i, line.strip()
    return None
