"""``mesh-mcp index`` on a cold workspace: the workers parse while this process loads the rest.

A cold build spends most of its time parsing; this process meanwhile has the settings to load
(pydantic and every settings model: 0.15-0.2 s on a quiet machine, more where Python keeps no
bytecode), then the index service, its result models and the linker. Two starts, both forking
the workers (:func:`tools.mesh_index.indexer.start_early`), both collected by the service's own
refresh:

- :func:`start_before_settings`, before the settings are loaded, with the default extraction
  names (:mod:`tools.mesh_index.default_extract`), when nothing the command can see cheaply says
  the settings will differ: the workspace is named by ``--workspace`` or ``$MESH_WORKSPACE``, no
  ``MESH_CONVENTIONS__*`` or ``MESH_STATE_DIR``-like variable nor config file speaks of
  conventions or of a state folder, and the state folder those sources give holds no fact cache
  (or ``--full``);
- :func:`start_parsing_early`, once the settings are loaded: it keeps the parse started before
  when the settings give the same workspace, extraction names, skipped folders and a cold build,
  cancels it otherwise, and starts one with the settings' own names when none runs;
- the walk that listed the early parse's files is handed to the service
  (:func:`early_walk`), whose first refresh would otherwise walk the workspace again.

A wrong guess costs CPU, never an answer: a parse of other names or another root is cancelled
and the files are parsed again with the right ones.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from server import workspace_files
from server.state_paths import state_dir_before_settings

if TYPE_CHECKING:
    from tools.mesh_index.workspace import Discovery

CACHE_FILE = "static-index.sqlite"  # tools.mesh_index.cache.FILE_NAME (a test checks they agree)
MAX_CONFIG_BYTES = 1_000_000
# words in a config file, or MESH_* variable prefixes, that may change what the guess assumed
_SPOKEN_OF = (b"conventions", b"state_dir", b"state-dir", b"statedir")
_VARIABLES = ("MESH_CONVENTIONS", "MESH_STATE")

_STARTED: dict[str, Any] = {}  # root, skip, found: what start_before_settings assumed, and its walk
_WALK: dict[str, Any] = {}  # root, found: the walk of the parse start_parsing_early kept or started


def start_before_settings(args: Any, full: bool) -> bool:
    """Start the workers on every file with the default names, before the settings are loaded, when
    the settings will most likely agree (see the module's docstring). Returns whether it started."""
    raw = getattr(args, "workspace", None) or os.environ.get("MESH_WORKSPACE")
    if not raw or any(k.startswith(_VARIABLES) and k != "MESH_STATE_DIR" for k in os.environ):
        return False
    root = Path(raw).expanduser().resolve()
    if not root.is_dir() or _configs_speak(root, getattr(args, "config", None)):
        return False
    if not full and (state_dir_before_settings(root) / CACHE_FILE).exists():
        return False  # a warm or incremental refresh parses few files, if any
    from tools.mesh_index.default_extract import DEFAULT_EXTRACT, DEFAULT_SKIP_DIRS
    from tools.mesh_index.indexer import start_early
    from tools.mesh_index.workspace import discover

    found = discover(root, DEFAULT_SKIP_DIRS)
    if not start_early(str(root), [(f.rel, f.kind) for f in found.files], DEFAULT_EXTRACT):
        return False
    _STARTED.update(root=str(root), skip=tuple(DEFAULT_SKIP_DIRS), found=found)
    return True


def _configs_speak(root: Path, explicit: Any) -> bool:
    """Whether a config file the settings may read mentions conventions or a state folder (or cannot
    be read: then nothing is assumed)."""
    from server.config_sources import user_config_path

    for candidate in (explicit, os.environ.get("MESH_CONFIG"), user_config_path(os.environ)):
        if not candidate:
            continue
        try:  # a FIFO, a terminal or a huge file is refused without waiting (then nothing is assumed)
            data = workspace_files.read_user_file(Path(candidate).expanduser(), MAX_CONFIG_BYTES)
        except FileNotFoundError:
            continue
        except OSError:
            return True
        if any(word in data.lower() for word in _SPOKEN_OF):
            return True
    try:  # the workspace's own mesh.toml, through the guarded reader (no FIFO, capped)
        data = workspace_files.read_bytes(root, "mesh.toml", MAX_CONFIG_BYTES)
    except FileNotFoundError:
        return False
    except OSError:
        return True
    return b"conventions" in data.lower()


def start_parsing_early(settings: Any, full: bool) -> bool:
    """Once the settings are loaded: keep the parse :func:`start_before_settings` began when the
    settings agree with what it assumed and the build is cold, else cancel it; with none running,
    start one for a cold build (``--full``, or no fact cache yet). Returns whether a parse runs."""
    from server.config import Conventions
    from tools.mesh_index.indexer import cancel_early, pending_early, start_early
    from tools.mesh_index.ts_queries import extract_config

    conv = settings.conventions
    if settings.workspace is None or not isinstance(conv, Conventions):
        cancel_early()
        return False
    root = Path(settings.workspace).resolve()
    cold = root.is_dir() and (full or not (Path(settings.resolved_state_dir) / CACHE_FILE).exists())
    cfg = extract_config(conv)
    assumed = dict(_STARTED)
    _STARTED.clear()
    if pending_early() is not None:
        if cold and (assumed.get("root"), assumed.get("skip")) == (str(root), tuple(conv.static.skip_dirs)) \
                and pending_early() == (str(root), cfg):
            _WALK.update(root=str(root), found=assumed["found"])
            return True
        cancel_early()
    if not cold:
        return False
    from tools.mesh_index.workspace import discover

    found = discover(root, conv.static.skip_dirs)
    if not start_early(str(root), [(f.rel, f.kind) for f in found.files], cfg):
        return False
    _WALK.update(root=str(root), found=found)
    return True


def early_walk(root: Path) -> Discovery | None:
    """The walk of ``root`` the running early parse was given (once; then None): the service's first
    refresh takes it instead of walking the workspace a second time."""
    walk = dict(_WALK)
    _WALK.clear()
    return walk["found"] if walk.get("root") == str(Path(root).resolve()) else None
