"""The stat table of a built index: what a new process checks instead of walking and loading.

A warm ``mesh-mcp index`` (nothing changed) used to walk the workspace (20,000 ``stat`` calls
plus the listing of every folder), load every file's stat row from SQLite, hash the state and
load the whole linked snapshot, only to print counts. The manifest, stored in the cache next
to the snapshot, holds what proves the workspace did not change since that snapshot was built:

- every indexed file's size and mtime (one ``lstat`` each: an edit in place changes them);
- every folder the walk entered, with its mtime read before the folder was listed (adding,
  removing or renaming an entry changes it: a new file, a new folder, a new ``.git``, a new
  package.json are seen without listing anything);
- the package.json / tsconfig.json mtimes the build read, the files skipped for their size;
- the key of what else the build depended on (extraction signature, conventions, emitters,
  code version) and the digest of the snapshot it describes.

Mtimes that were less than :data:`RACY_NS` old when the manifest was written prove nothing
(a second write in the same tick of a coarse file-system clock keeps size and mtime): such
files are hashed and compared with the hash the build used (``racy``); such a folder makes
the check fail (the caller walks). A check that fails for any reason only sends the caller
to the ordinary path (walk, compare, rebuild what changed), with the racy files to hash.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import time
from dataclasses import dataclass
from typing import Any

from server import workspace_files

FORMAT = 1
RACY_NS = 2_000_000_000
"""Mtimes this close to the moment the manifest is written are not trusted (coarse clocks: up to 2 s),
as in :mod:`resources.workspace_skills`."""


@dataclass(slots=True)
class Manifest:
    """A manifest found fresh by :func:`check` (the fields the service needs to answer or to load)."""

    digest: str
    files: list[str]
    sizes: list[int]
    mtimes: list[int]
    dirs: dict[str, int]
    configs: dict[str, int]
    packages: list[str]
    tsconfigs: list[str]
    git_roots: list[str]
    skipped: list[str]
    errors: list[str]


def make(key: str, digest: str, files: dict[str, tuple[int, int, str]], dirs: dict[str, int],
         configs: dict[str, int], found: Any, errors: list[str], skipped_stats: dict[str, tuple[int, int]],
         now_ns: int | None = None) -> dict[str, Any]:
    """The manifest of a build as JSON-ready data (``found``: the walk's Discovery: packages, tsconfigs,
    git roots; ``skipped_stats``: size and mtime of the files skipped for their size)."""
    now = time.time_ns() if now_ns is None else now_ns
    limit = now - RACY_NS
    rels = sorted(files)
    return {
        "format": FORMAT, "key": key, "digest": digest, "written_ns": now,
        "files": rels, "sizes": [files[r][0] for r in rels], "mtimes": [files[r][1] for r in rels],
        "racy": {r: files[r][2] for r in rels if files[r][1] >= limit},
        "dirs": dirs, "dirs_racy": any(m >= limit for m in dirs.values()),
        "configs": configs, "packages": list(found.packages), "tsconfigs": list(found.tsconfigs),
        "git_roots": list(found.git_roots), "skipped": {r: list(v) for r, v in skipped_stats.items()},
        "errors": list(errors),
    }


def dumps(data: dict[str, Any]) -> str:
    return json.dumps(data, separators=(",", ":"))


def aged(data: dict[str, Any], now_ns: int | None = None) -> dict[str, Any] | None:
    """``data`` (a manifest :func:`check` just found fresh: its racy files were hashed and matched) with the
    racy files whose mtimes are now old enough dropped from ``racy``, or None when none is.

    A write that keeps a file's size and mtime must fall in the tick of that mtime; once the content was
    seen unchanged more than :data:`RACY_NS` after it, the stat alone vouches for it (without this, a
    manifest written right after a checkout would hash those files on every run)."""
    racy = data.get("racy") or {}
    if not racy:
        return None
    now = time.time_ns() if now_ns is None else now_ns
    mtime_of = {rel: data["mtimes"][i] for i, rel in enumerate(data["files"]) if rel in racy}
    kept = {rel: sha for rel, sha in racy.items() if mtime_of.get(rel, now) >= now - RACY_NS}
    if len(kept) == len(racy):
        return None
    return {**data, "racy": kept}


def racy_files(data: dict[str, Any] | None, key: str) -> set[str]:
    """The files a manifest (of this ``key``) could not vouch for: whoever walks must hash them."""
    if not isinstance(data, dict) or data.get("format") != FORMAT or data.get("key") != key:
        return set()
    racy = data.get("racy")
    return set(racy) if isinstance(racy, dict) else set()


def check(workspace: str, data: dict[str, Any] | None, key: str, snapshot_digest: str | None) -> Manifest | None:
    """The manifest when the workspace provably did not change since it was written, else None.

    ``snapshot_digest``: the digest of the snapshot now in the cache (the manifest must describe it)."""
    if not isinstance(data, dict) or data.get("format") != FORMAT or data.get("key") != key:
        return None
    try:
        if data["digest"] != snapshot_digest or data["dirs_racy"]:
            return None
        dirs: dict[str, int] = data["dirs"]
        root = workspace
        stat_ = os.stat
        lstat = os.lstat
        for rel, mtime in dirs.items():
            if stat_(root + "/" + rel if rel else root).st_mtime_ns != mtime:
                return None
        files: list[str] = data["files"]
        sizes: list[int] = data["sizes"]
        mtimes: list[int] = data["mtimes"]
        if not len(files) == len(sizes) == len(mtimes):
            return None
        isreg = stat.S_ISREG
        for rel, size, mtime in zip(files, sizes, mtimes, strict=True):
            st = lstat(root + "/" + rel)
            if st.st_mtime_ns != mtime or st.st_size != size or not isreg(st.st_mode):
                return None
        for rel, sha in data["racy"].items():
            if hashlib.sha1(workspace_files.read_bytes(root, rel), usedforsecurity=False).hexdigest() != sha:
                return None
        for rel, mtime in data["configs"].items():
            if stat_(root + "/" + rel).st_mtime_ns != mtime:
                return None
        for rel, (size, mtime) in data["skipped"].items():
            st = lstat(root + "/" + rel)
            if st.st_size != size or st.st_mtime_ns != mtime:
                return None
        return Manifest(data["digest"], files, sizes, mtimes, dirs, data["configs"], data["packages"],
                        data["tsconfigs"], data["git_roots"], list(data["skipped"]), data["errors"])
    except (OSError, KeyError, TypeError, ValueError, AttributeError):
        return None
