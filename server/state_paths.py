"""Where a workspace's state lives when the settings name no ``state_dir``.

A module of its own, light enough for the paths that answer before the settings are loaded
(:mod:`tools.mesh_index.quick_index`, :mod:`tools.mesh_index.early_parse`): it imports neither
pydantic nor the settings models.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


def default_state_dir(workspace: Path, environ: dict[str, str] | None = None) -> Path:
    """``$XDG_STATE_HOME/mesh-mcp/<name>-<hash of the resolved workspace>`` (else ``~/.local/state/...``):
    the user's, never the workspace's, so a cloned repo cannot plant symlinks in it."""
    env = os.environ if environ is None else environ
    base = Path(env["XDG_STATE_HOME"]) if env.get("XDG_STATE_HOME") else Path.home() / ".local" / "state"
    resolved = str(Path(workspace).expanduser().resolve())
    digest = hashlib.sha256(resolved.encode("utf-8", "surrogateescape")).hexdigest()[:16]
    return base / "mesh-mcp" / f"{Path(resolved).name or 'root'}-{digest}"


def state_dir_before_settings(workspace: Path, environ: dict[str, str] | None = None) -> Path:
    """The state folder as the settings will give it when no config file names one: ``$MESH_STATE_DIR``,
    else :func:`default_state_dir`. A caller must not trust it when a config file may set ``state_dir``."""
    env = os.environ if environ is None else environ
    raw = env.get("MESH_STATE_DIR")
    return Path(raw) if raw else default_state_dir(workspace, env)  # as the settings read it: not expanded
