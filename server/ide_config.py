"""``mesh-mcp init [--write-ide-config]``: register the server as ``mesh-mcp`` with the MCP clients.

Without ``--write-ide-config`` it prints the configuration it would write. With it, it merges the
``mesh-mcp`` entry into Claude Code's ``.mcp.json`` (key ``mcpServers``), Cursor's
``.cursor/mcp.json`` (``mcpServers``) and VS Code's ``.vscode/mcp.json`` (``servers``) in the target
folder (the workspace by default): every other server and key is kept; a file that is not valid
JSON, not an object, or a symlink is left untouched and reported (never overwritten). When a folder
between the target folder and a file (``.cursor``, ``.vscode``) is a symlink, dangling or not, or
resolves outside the target folder, nothing at all is written and the command exits 1 naming it
(the workspace is untrusted: ``.cursor -> ~/.cursor`` would otherwise redirect the write to the
user's global configuration). An error of the file system is one line, never a traceback. Writes are
atomic and exclusive (:mod:`server.exclusive_write`): a new file is a temporary file hard-linked to its
name, which fails if a file or symlink appeared there since the check (never overwritten nor followed);
an existing file is replaced only if it is still the file that was read. The tools then appear to Claude Code as
``mcp__mesh-mcp__<tool>``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from server.cli_support import add_common_flags
from server.exclusive_write import Changed, Folder

SERVER_NAME = "mesh-mcp"
CLIENTS: tuple[tuple[str, str, str, bool], ...] = (
    # (client, file, servers key, with "type")
    ("Claude Code", ".mcp.json", "mcpServers", True),
    ("Cursor", ".cursor/mcp.json", "mcpServers", False),
    ("VS Code", ".vscode/mcp.json", "servers", True),
)
MAX_CONFIG_BYTES = 1024 * 1024


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("init", help="register the server as 'mesh-mcp' with Claude Code, Cursor and VS Code")
    add_common_flags(p)
    p.add_argument("--write-ide-config", action="store_true",
                   help="merge the entry into .mcp.json, .cursor/mcp.json and .vscode/mcp.json (others kept)")
    p.add_argument("--dir", type=Path, help="folder to write the files in (default: the workspace)")
    p.add_argument("--command", dest="server_command", help="command that starts the server (default: mesh-mcp)")


def server_entry(workspace: Path, command: str | None, with_type: bool) -> dict[str, Any]:
    entry: dict[str, Any] = {"type": "stdio"} if with_type else {}
    entry["command"] = command or ("mesh-mcp" if shutil.which("mesh-mcp") else sys.argv[0] or "mesh-mcp")
    entry["args"] = ["serve", "--workspace", str(workspace)]
    return entry


def unsafe_folder(folder: Path, path: Path) -> str | None:
    """Why a file ``path`` under ``folder`` must not be written (a folder on the way is a symlink or resolves
    outside ``folder``), or None. ``folder`` itself is the user's choice and is taken as resolved."""
    rel = path.parent.relative_to(folder)
    here = folder
    for part in rel.parts:
        here = here / part
        if here.is_symlink():
            target = os.readlink(here)
            return (f"refused {path}: its folder {here} is a symlink (to {target}); nothing written: "
                    "remove the link or add the entry by hand")
    real = os.path.realpath(path.parent)
    if real != str(folder) and not real.startswith(str(folder).rstrip("/") + "/"):
        return f"refused {path}: its folder resolves outside {folder} (to {real}); nothing written"
    return None


def merge_file(path: Path, key: str, entry: dict[str, Any]) -> str:
    """Merge ``entry`` as ``<key>.mesh-mcp`` into the JSON file ``path``; returns what was done.

    Read and written through :class:`server.exclusive_write.Folder`: a symlink is never read nor
    followed, and a file or symlink that appears (or a file that changes) between the read and the
    write is never overwritten: the file is then skipped, nothing written.
    """
    if path.is_symlink():
        return f"skipped {path}: a symlink (not followed); add the entry by hand"
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.parent.is_symlink():  # swapped in since the check
        return f"skipped {path}: its folder became a symlink (not followed); nothing written"
    try:
        with Folder(path.parent) as folder:
            return _merge_in(folder, path, key, entry)
    except Changed as exc:
        return f"skipped {path}: {exc}; nothing written"


def _merge_in(folder: Folder, path: Path, key: str, entry: dict[str, Any]) -> str:
    seen = folder.read_file(path.name, MAX_CONFIG_BYTES)
    data: Any = {}
    if seen.data is not None:
        try:
            data = json.loads(seen.data.decode("utf-8") or "{}")
        except ValueError as exc:
            return f"skipped {path}: not valid JSON ({exc}); fix it or add the entry by hand (nothing written)"
        if not isinstance(data, dict) or not isinstance(data.get(key, {}), dict):
            return f"skipped {path}: its top level or '{key}' is not a JSON object (nothing written)"
    servers = data.setdefault(key, {})
    before = servers.get(SERVER_NAME)
    servers[SERVER_NAME] = entry
    if before == entry:
        return f"unchanged {path}"
    folder.write_file(path.name, (json.dumps(data, indent=2) + "\n").encode("utf-8"), seen)
    others = sorted(k for k in servers if k != SERVER_NAME)
    return (f"{'updated' if before else 'added'} '{SERVER_NAME}' in {path}"
            + (f" (kept {', '.join(others)})" if others else ""))


def cmd_init(args: argparse.Namespace) -> int:
    from server.cli_support import settings_from_args
    from server.errors import MeshError

    settings = settings_from_args(args)
    if settings.workspace is None:
        raise MeshError("no workspace: pass --workspace DIR (a folder of repositories) or set workspace in mesh.toml")
    workspace = Path(settings.workspace).resolve()
    folder = (args.dir or workspace).resolve()
    plans = [(client, folder / rel, key, server_entry(workspace, args.server_command, typed))
             for client, rel, key, typed in CLIENTS]
    if not args.write_ide_config:
        out = {str(path): {key: {SERVER_NAME: entry}} for _c, path, key, entry in plans}
        if args.json:
            print(json.dumps(out, indent=2))
        else:
            for client, path, key, entry in plans:
                print(f"# {client}: {path}\n{json.dumps({key: {SERVER_NAME: entry}}, indent=2)}")
            print("\nmesh-mcp init --write-ide-config merges these entries (other servers are kept). "
                  "Claude Code then lists the tools as mcp__mesh-mcp__<tool>.")
        return 0
    try:
        refused = [r for r in (unsafe_folder(folder, path) for _c, path, _k, _e in plans) if r]
        results = refused or [_merge_or_error(path, key, entry) for _c, path, key, entry in plans]
    except OSError as exc:
        results = [f"skipped: {exc.strerror or exc} ({exc.filename}); nothing written"]
    if args.json:
        print(json.dumps({"results": results}, indent=2))
    else:
        print("\n".join(results))
    return 1 if any(r.startswith(("refused", "skipped")) for r in results) else 0


def _merge_or_error(path: Path, key: str, entry: dict[str, Any]) -> str:
    try:
        return merge_file(path, key, entry)
    except OSError as exc:
        return f"skipped {path}: {exc.strerror or exc}; nothing written there"
