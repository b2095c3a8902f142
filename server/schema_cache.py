"""The tools' output schemas, kept in the state folder so that a server start does not regenerate them.

Registering a tool, the MCP SDK has pydantic generate the JSON schema of its output model, and
:func:`tools.detail.with_summary` generates the ``anyOf`` of the full and the summary model for
seven tools: about 0.1-0.2 s of a ``mesh-mcp serve`` start, for schemas that only change with the
code. :func:`server.app.build_server` writes them, as they stand once every tool is registered,
to ``<state dir>/tool-schemas/<key>.json`` and reads them back at the next start; the output
models themselves are still the ones the tools declare (each result is validated against them), and
the input schemas and argument models are still built from the signatures (cheap). One file
per key, the :data:`KEEP` most recently written kept, so that servers of different settings
(read-only and remediation) on one state folder do not overwrite each other's.

The file is used only when its key matches: a digest of this package's version, the versions of
the MCP SDK, pydantic, pydantic-core and Python, every ``.py`` file of ``server``, ``tools`` and
``resources`` (a change to any of them, even a comment, regenerates) and the effective settings
(bounds read from them go into the schemas). A digest of its own content is checked too: a
truncated or edited file is ignored and rewritten. Nothing is cached without a configured
workspace or state folder (no per-user state folder is made for the current folder), and a folder that
cannot be written costs nothing but the cache.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import stat
import sys
from pathlib import Path
from typing import Any

import pydantic
import pydantic_core

from server import __version__
from server.config import Settings
from server.state_files import StateFileError, open_state_file, state_folder

log = logging.getLogger("mesh.serve")

FOLDER = "tool-schemas"
FORMAT = 1
KEEP = 4
"""Cache files kept in the folder (the most recently written; older ones are deleted)."""
PACKAGES = ("server", "tools", "resources")
"""The packages whose source decides the schemas (``skills`` holds only Markdown)."""

_ROOT = Path(__file__).resolve().parent.parent


def _sdk_version() -> str:
    from importlib.metadata import version

    return version("mcp")


def source_digest(root: Path = _ROOT) -> str:
    """sha256 of every ``.py`` file (path and bytes) of :data:`PACKAGES` under ``root``."""
    digest = hashlib.sha256()
    for package in PACKAGES:
        for folder, dirs, files in os.walk(root / package):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(files):
                if name.endswith(".py"):
                    path = os.path.join(folder, name)
                    digest.update(os.path.relpath(path, root).encode() + b"\0")
                    with open(path, "rb") as fh:
                        digest.update(fh.read())
                    digest.update(b"\0")
    return digest.hexdigest()


def cache_key(settings: Settings) -> str:
    """What the cached schemas were generated from (see the module docstring)."""
    parts = {
        "format": FORMAT,
        "mesh": __version__,
        "mcp": _sdk_version(),
        "pydantic": pydantic.VERSION,
        "pydantic_core": pydantic_core.__version__,
        "python": sys.version,
        "source": source_digest(),
        "settings": hashlib.sha256(settings.model_dump_json().encode()).hexdigest(),
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def _content_digest(schemas: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(schemas, sort_keys=True).encode()).hexdigest()


class SchemaCache:
    """The output schemas of one server's tools: read at start, written when anything was generated."""

    def __init__(self, path: Path | None, key: str | None, schemas: dict[str, Any]) -> None:
        self.path = path
        self.key = key
        self.schemas = schemas
        self.used: set[str] = set()

    @classmethod
    def disabled(cls) -> SchemaCache:
        return cls(None, None, {})

    @classmethod
    def for_settings(cls, settings: Settings) -> SchemaCache:
        """The cache of ``settings``' state folder (empty when missing, stale or damaged)."""
        if settings.workspace is None and settings.state_dir is None:
            return cls.disabled()
        key = cache_key(settings)
        path = settings.resolved_state_dir / FOLDER / f"{key[:32]}.json"
        return cls(path, key, _read(path, key))

    def output_schema(self, tool: str) -> dict[str, Any] | None:
        """The cached output schema of ``tool`` (None: generate it). Marks it used."""
        schema = self.schemas.get(tool)
        if isinstance(schema, dict):
            self.used.add(tool)
            return schema
        return None

    def is_cached(self, tool: str) -> bool:
        """Whether ``tool``'s output schema came from this cache (so nothing may regenerate it)."""
        return tool in self.used

    def store(self, schemas: dict[str, dict[str, Any]]) -> None:
        """Write ``schemas`` (tool name -> output schema) unless they are exactly what was read."""
        if self.path is None or schemas == self.schemas:
            return
        body = {"key": self.key, "digest": _content_digest(schemas), "schemas": schemas}
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        try:
            fd = open_state_file(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)  # a symlinked folder is refused
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(json.dumps(body, separators=(",", ":")))
            os.replace(tmp, self.path)
            _prune(self.path.parent)
        except (OSError, StateFileError) as exc:
            log.debug("tool schema cache not written to %s: %s", self.path, exc)
            tmp.unlink(missing_ok=True)


def _prune(folder: Path) -> None:
    """Delete all but the :data:`KEEP` most recently written cache files of ``folder`` (a real folder,
    never one reached through a symlink; only regular files, never what a symlink in it names)."""
    state_folder(folder)
    stats = [(p, p.lstat()) for p in folder.glob("*.json")]
    files = sorted((item for item in stats if stat.S_ISREG(item[1].st_mode)),
                   key=lambda item: item[1].st_mtime_ns, reverse=True)
    for old, _st in files[KEEP:]:
        old.unlink(missing_ok=True)


def _read(path: Path, key: str) -> dict[str, Any]:
    try:
        body = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(body, dict) or body.get("key") != key:
        return {}
    schemas = body.get("schemas")
    if not isinstance(schemas, dict) or body.get("digest") != _content_digest(schemas):
        log.warning("ignoring the damaged tool schema cache %s (it is rewritten)", path)
        return {}
    return schemas
