"""Who may write which setting: the user's config file and ``MESH_*`` variables, or the workspace.

The workspace is untrusted input: an agent working in it (or the repository's authors) can
write any file there, ``mesh.toml`` included. So the settings are split by who may write them:

- the **user's config** decides everything: the file given with ``--config FILE`` (or
  ``$MESH_CONFIG``), else ``$XDG_CONFIG_HOME/mesh-mcp/mesh.toml`` (``~/.config/mesh-mcp/mesh.toml``)
  when it exists, then the ``MESH_*`` environment variables;
- the **workspace's** ``mesh.toml`` (``<workspace>/mesh.toml``) may hold only naming hints
  about the workspace's own code: ``[conventions]`` (:data:`WORKSPACE_KEYS`). Any other key
  there (connections, ``enable_remediation``, ``[approval]``, ``state_dir``, audit, limits,
  ``[http]``, ``workspace``) is refused with a :class:`~server.errors.ConfigError` naming the
  key and where it belongs; nothing of such a file takes effect. Within ``[conventions]`` only
  the names: numbers and thresholds (``stream_maxlen``, ``claim_*_ms``, TTLs, ...) and the BullMQ
  lock suffix decide what remediation does, so they are the user's
  (:func:`server.conventions.user_only_conventions`) and refused there the same way.

A config file named with ``--config`` / ``$MESH_CONFIG`` that lies inside the workspace
(as named or where a symlink leads) is the workspace's file all the same: an agent can edit
it. This module only decides and explains; :func:`server.config.load_settings` reads.
It imports nothing heavy (the ``index`` command's quick path uses :func:`user_config_path`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from server.errors import ConfigError

CONFIG_FILE_NAME = "mesh.toml"
WORKSPACE_KEYS = frozenset({"conventions"})
"""Top-level keys a workspace's ``mesh.toml`` may hold: naming hints about its own code, nothing else."""

_SECTION_ENV = {
    "services": "MESH_SERVICES__<NAME>__POSTGRES",
    "redis": "MESH_REDIS__URL (MESH_REDIS_URL), MESH_REDIS__INSTANCES__<NAME>__URL, ...",
    "workspace": "--workspace DIR or MESH_WORKSPACE",
    "state_dir": "MESH_STATE_DIR",
    "enable_remediation": "`mesh-mcp serve --enable-remediation` or MESH_ENABLE_REMEDIATION",
}
_WHY = {
    "services": "database connections",
    "redis": "Redis connections",
    "enable_remediation": "it turns on apply_remediation",
    "approval": "it decides who approves remediation plans",
    "state_dir": "plans, backups and the audit log live there",
    "limits": "caps and timeouts of every read",
    "http": "the HTTP transport's token and allowed hosts",
    "workspace": "which folder is the workspace",
    "config_file": "set by mesh-mcp itself",
}


def user_config_dir(environ: Mapping[str, str]) -> Path | None:
    """``$XDG_CONFIG_HOME/mesh-mcp`` or ``$HOME/.config/mesh-mcp`` (``%APPDATA%\\mesh-mcp`` on Windows),
    taken from ``environ`` only (``load_settings(environ={})`` reads no user file)."""
    if environ.get("XDG_CONFIG_HOME"):
        return Path(environ["XDG_CONFIG_HOME"]).expanduser() / "mesh-mcp"
    if os.name == "nt" and environ.get("APPDATA"):
        return Path(environ["APPDATA"]) / "mesh-mcp"
    if environ.get("HOME"):
        return Path(environ["HOME"]) / ".config" / "mesh-mcp"
    return None


def user_config_path(environ: Mapping[str, str]) -> Path | None:
    """The user's own ``mesh.toml`` (in :func:`user_config_dir`), whether it exists or not."""
    folder = user_config_dir(environ)
    return folder / CONFIG_FILE_NAME if folder is not None else None


def inside(path: Path, folder: Path) -> bool:
    """True when ``path`` is inside ``folder`` as named or where it leads; True when either cannot be
    resolved (fail closed: a file that cannot be told apart from the workspace's is the workspace's)."""
    try:
        roots = (Path(folder).resolve(), Path(os.path.abspath(folder)))
        places = (Path(path).resolve(), Path(os.path.abspath(path)))
        return any(place.is_relative_to(root) for place in places for root in roots)
    except (OSError, RuntimeError):
        return True


def where_it_belongs(key: str, environ: Mapping[str, str] | None = None) -> str:
    """Where the top-level ``key`` may be set instead of the workspace's mesh.toml."""
    own = user_config_path(os.environ if environ is None else environ)
    files = f"--config FILE, $MESH_CONFIG or {own}" if own else "--config FILE or $MESH_CONFIG"
    env = _SECTION_ENV.get(key, f"MESH_{key.upper()}__<KEY>")
    return f"your own config file ({files}) or {env}"


def _dotted(data: Any, prefix: str) -> list[str]:
    if isinstance(data, dict) and data:
        return [name for key, value in data.items() for name in _dotted(value, f"{prefix}.{key}")]
    return [prefix]


def _user_only(data: dict[str, Any]) -> list[str]:
    """The dotted ``conventions.*`` keys of ``data`` that only the user's config may set."""
    conventions = data.get("conventions")
    if not isinstance(conventions, dict):
        return []
    from server.conventions import user_only_conventions  # pydantic: only when a workspace file is read

    banned = user_only_conventions()
    names = [name.removeprefix(".") for name in _dotted(conventions, "")]
    return [f"conventions.{name}" for name in names if name in banned]


def _refuse_conventions(keys: list[str], path: Path, place: str, named: bool,
                        environ: Mapping[str, str] | None) -> None:
    shown = ", ".join(keys[:8]) + (f" (and {len(keys) - 8} more)" if len(keys) > 8 else "")
    first = keys[0]
    own = user_config_path(os.environ if environ is None else environ)
    files = f"--config FILE, $MESH_CONFIG or {own}" if own else "--config FILE or $MESH_CONFIG"
    env = "MESH_" + "__".join(part.upper() for part in first.split("."))
    raise ConfigError(
        f"{path}: {shown} refused: this file {place}, so its [conventions] may hold only names (tables, "
        f"streams, queues, types, prefixes, key patterns). '{first}' (numbers, thresholds and the BullMQ lock "
        f"suffix decide what remediation trims, requeues or closes) belongs in your own config file ({files}) "
        f"or {env}" + ("; move the file out of the workspace" if named else "")
        + ". Nothing of this file was applied (see docs/threat-model.md)"
    )


def refuse_workspace_keys(data: dict[str, Any], path: Path, *, named: bool = False,
                          environ: Mapping[str, str] | None = None) -> None:
    """Raise :class:`ConfigError` when the workspace's config file ``path`` holds a key other than
    :data:`WORKSPACE_KEYS`, or a ``[conventions]`` key that is not a name (a number, a threshold, the
    lock suffix), naming every such key and where it belongs. ``named``: the file was given
    with ``--config`` / ``$MESH_CONFIG`` (it lies inside the workspace, so it counts as the workspace's)."""
    place = ("lies inside the workspace, which an agent working there can edit" if named
             else "is the workspace's own file, which an agent working there can edit")
    bad = [key for key in data if key not in WORKSPACE_KEYS]
    if not bad:
        user_only = _user_only(data)
        if user_only:
            _refuse_conventions(user_only, path, place, named, environ)
        return
    keys = [name for key in bad for name in _dotted(data[key], key)]
    shown = ", ".join(keys[:8]) + (f" (and {len(keys) - 8} more)" if len(keys) > 8 else "")
    first = bad[0]
    why = f" ({_WHY[first]})" if first in _WHY else ""
    raise ConfigError(
        f"{path}: {shown} refused: this file {place}, so it may hold only [conventions]. "
        f"'{first}'{why} belongs in {where_it_belongs(first, environ)}"
        + ("; move the file out of the workspace" if named else "")
        + ". Nothing of this file was applied (see docs/threat-model.md)"
    )
