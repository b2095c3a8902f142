"""``mesh-mcp index`` on an unchanged workspace, answered without loading the settings nor the index.

Loading the settings imports pydantic and builds every settings model (about 0.1 s, a third of
a warm run at 20,000 files); the index service imports the result models and the linker. Neither
is needed to prove that nothing changed, so :func:`quick_answer` runs first and, when it can,
answers alone from the cache's manifest (:mod:`tools.mesh_index.manifest`):

- the *inputs* of the settings are fingerprinted (:func:`inputs_fingerprint`): every ``MESH_*``
  variable (but the HTTP token), the current folder, the workspace and ``--config`` arguments,
  the bytes of each file that can be the config file (``--config``, ``$MESH_CONFIG``,
  ``<workspace>/mesh.toml``), and the size and mtime of the modules that define the settings and
  the index (``server/``, ``server/approval/``, ``tools/mesh_index/``: a changed default is seen);
- the ordinary path, having loaded the settings, records which manifest key (conventions,
  extraction signature, emitters, version) those inputs gave (:func:`record_inputs`);
- a later run with the same fingerprint finds that key, checks the manifest against the disk
  and prints the summary stored for the snapshot's digest. Anything missing or different
  (another fingerprint, a changed file, no stored summary, the workspace or the state folder
  named only in the config file) returns None: the ordinary path runs, with its checks.

What it does not re-check: settings that ``mesh-mcp index`` does not use (the approval gate's
trust file, read by ``serve`` and ``approve``) are not read, so a problem there is reported by
those commands, not by a warm ``index``.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from server import __version__, workspace_files
from server.config_sources import inside
from server.state_paths import state_dir_before_settings
from tools.mesh_index import manifest

CACHE_FILE = "static-index.sqlite"  # tools.mesh_index.cache.FILE_NAME (not imported: it imports logging, threads)
MAX_WORKSPACE_CONFIG_BYTES = 1_000_000
_CODE_DIRS = ("server", "server/approval", "tools/mesh_index")


def _workspace(args: Any) -> Path | None:
    raw = getattr(args, "workspace", None) or os.environ.get("MESH_WORKSPACE")
    return Path(raw).expanduser().resolve() if raw else None




def inputs_fingerprint(args: Any) -> str | None:
    """A digest of everything :func:`server.config.load_settings` reads for these arguments (None: no workspace)."""
    workspace = _workspace(args)
    if workspace is None:
        return None
    h = hashlib.sha1(usedforsecurity=False)
    explicit = getattr(args, "config", None)
    env = sorted((k, v) for k, v in os.environ.items() if k.startswith("MESH_") and k != "MESH_HTTP_TOKEN")
    h.update(json.dumps([manifest.FORMAT, __version__, os.getcwd(), str(workspace), str(explicit), env]).encode())
    from server.config_sources import user_config_path

    own = workspace / "mesh.toml"
    for candidate in (explicit, os.environ.get("MESH_CONFIG"), user_config_path(os.environ), own):
        if not candidate:
            continue
        try:
            if candidate is own:  # the workspace's own mesh.toml: the guarded reader (no FIFO, capped)
                data = workspace_files.read_bytes(workspace, "mesh.toml", MAX_WORKSPACE_CONFIG_BYTES)
            else:  # never waits on a FIFO or a terminal; capped
                data = workspace_files.read_user_file(Path(candidate).expanduser(), MAX_WORKSPACE_CONFIG_BYTES)
        except FileNotFoundError:
            data = b"\0absent"
        except OSError as exc:  # not a regular file, too large: a fingerprint no ordinary run records
            data = f"\0unreadable {type(exc).__name__}".encode()
        h.update(f"\n{candidate}\n".encode())
        h.update(data)
    root = Path(__file__).resolve().parent.parent.parent
    for rel in _CODE_DIRS:
        try:
            with os.scandir(root / rel) as it:
                stats = sorted((e.name, e.stat().st_size, e.stat().st_mtime_ns) for e in it if e.name.endswith(".py"))
        except OSError:
            return None
        h.update(json.dumps([rel, stats]).encode())
    return h.hexdigest()


def record_inputs(fingerprint: str | None, state_dir: Path, key: str) -> None:
    """Remember that settings from ``fingerprint``'s inputs give the manifest ``key`` (one row, replaced)."""
    path = state_dir / CACHE_FILE
    if fingerprint is None or not path.is_file():  # no cache (disabled, or another place): nothing to remember
        return
    try:
        conn = sqlite3.connect(path, timeout=10)
        try:
            conn.execute("PRAGMA synchronous=OFF")  # as the cache itself (see tools.mesh_index.cache)
            with conn:
                conn.execute("DELETE FROM meta WHERE key LIKE 'inputs:%'")
                conn.execute("INSERT INTO meta(key, value) VALUES (?, ?)", (f"inputs:{fingerprint}", key))
        finally:
            conn.close()
    except sqlite3.Error:
        pass  # the cache is unusable: the next run takes the ordinary path


def quick_answer(args: Any, fingerprint: str | None) -> dict[str, Any] | None:
    """``{"index": ..., "counts": ..., "orphans": ...}`` as the ordinary path would print it, or None."""
    started = time.perf_counter()
    workspace = _workspace(args)
    if fingerprint is None or workspace is None or not workspace.is_dir():
        return None
    state = state_dir_before_settings(workspace)
    if inside(state, workspace):  # the settings refuse a state folder inside the workspace: so does this path
        return None
    path = state / CACHE_FILE
    if not path.is_file():
        return None
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
    except sqlite3.Error:
        return None
    try:
        def meta(key: str) -> str | None:
            row = conn.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
            return row[0] if row else None

        conn.execute("BEGIN")  # one read transaction: the rows below are of one state of the cache
        key = meta(f"inputs:{fingerprint}")
        text = meta("manifest") if key else None
        snapshot_digest = meta("snapshot_digest") if text else None
        data = json.loads(text) if text else None
        found = manifest.check(str(workspace), data, key, snapshot_digest) if key else None
        summary = meta("derived:summary") if found is not None else None
    except (sqlite3.Error, ValueError):
        return None
    finally:
        conn.close()
    if found is None or summary is None:
        return None
    fresher = manifest.aged(data) if data is not None and text is not None else None
    if fresher is not None:  # its racy files matched long enough after their mtimes: stop hashing them
        _replace_manifest(path, text, manifest.dumps(fresher))
    try:
        stored_key, (counts, orphans) = json.loads(summary)
    except (ValueError, TypeError):
        return None
    if stored_key != f"{found.digest}:{__version__}":
        return None
    info = {  # the fields of tools.mesh_index.model.IndexInfo, in its order
        "workspace": str(workspace), "files": len(found.files), "parse_errors": len(found.errors),
        "parse_error_files": found.errors[:50], "indexed_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "stale_files": [], "reparsed": 0, "duration_s": round(time.perf_counter() - started, 3), "cache": str(path),
        "skipped_files": found.skipped[:50],
    }
    return {"index": info, "counts": dict(counts), "orphans": int(orphans)}


def _replace_manifest(path: Path, old: str, new: str) -> None:
    """Store ``new`` only if the manifest is still ``old`` (see FactCache.replace_manifest)."""
    try:
        conn = sqlite3.connect(path, timeout=10)
        try:
            conn.execute("PRAGMA synchronous=OFF")  # as the cache itself (see tools.mesh_index.cache)
            with conn:
                conn.execute("UPDATE meta SET value=? WHERE key='manifest' AND value=?", (new, old))
        finally:
            conn.close()
    except sqlite3.Error:
        pass  # the next run hashes those files again


def print_answer(answer: dict[str, Any], as_json: bool) -> None:
    """What ``cmd_index`` prints for this answer (the same table, or the same JSON)."""
    if as_json:
        json.dump(answer, sys.stdout, indent=2, ensure_ascii=False, default=str)
        sys.stdout.write("\n")
        return
    from server.cli_support import print_table

    info = answer["index"]
    rows = [["workspace", info["workspace"]], ["files", info["files"]], ["re-parsed", info["reparsed"]],
            ["parse errors", info["parse_errors"]], ["duration", f"{info['duration_s']:.2f} s"],
            ["cache", info["cache"] or "(none)"]]
    rows += [[f"{kind}s", n] for kind, n in sorted(answer["counts"].items())]
    rows.append(["orphans", answer["orphans"]])
    print_table(["index", "value"], rows, max_width=100)
    for rel in info["parse_error_files"][:10]:
        print(f"parse error: {rel}")
