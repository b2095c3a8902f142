"""Reading files of a git revision of an untrusted repository, running nothing the repository chose.

Only two plumbing commands run, ``git rev-parse --verify`` and ``git cat-file blob`` (plus ``ls-tree``
to list the revision's ``.proto`` files): none applies textconv, filters, hooks or the fsmonitor, and
each runs with the system and global config ignored (``GIT_CONFIG_NOSYSTEM=1``,
``GIT_CONFIG_GLOBAL=/dev/null``) and the repository's own settings that could start a program
overridden on the command line (``core.fsmonitor``, ``core.hooksPath``, ``core.sshCommand``,
``core.gitProxy``, ``core.pager``, ``credential.helper``, ``protocol.allow=never`` and
``protocol.ext.allow`` / ``protocol.file.allow=never``, which a repository's own ``protocol.ext.allow``
cannot undo), with ``GIT_ALLOW_PROTOCOL=none`` (no transport at all) and ``GIT_NO_LAZY_FETCH=1``.

The repository is opened by :func:`open_repository`, which refuses (:class:`RefusedRepository`):
a ``.git`` that is a file (``gitdir: /elsewhere``) or a symlink, or that resolves outside the workspace;
a git folder whose ``commondir`` or ``objects/info/alternates`` points elsewhere; a config (read through
the guarded reader, never by asking git) that makes a partial clone (``extensions.partialClone``, a
``remote.*.promisor`` or ``partialclonefilter``: a lazy fetch would run the remote's transport, and
``GIT_NO_LAZY_FETCH`` is honoured only from git 2.44) or includes another file. git then runs with
``--git-dir`` given explicitly (no discovery, no work tree) and ``GIT_CEILING_DIRECTORIES`` set.
The revision is checked (no leading ``-``, a small character set) and passed after
``--end-of-options``. Time and output are capped.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path

from server import workspace_files
from server.errors import InvalidArgument

REV = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_./~^@{}+-]{0,199}$")
TIMEOUT_S = 10
MAX_BLOB = 1024 * 1024
SAFE_CONFIG = (
    "core.fsmonitor=", "core.hooksPath=/dev/null", "core.sshCommand=false", "core.gitProxy=",
    "core.pager=cat", "core.askPass=", "credential.helper=", "protocol.allow=never", "protocol.ext.allow=never",
    "protocol.file.allow=never",
    "core.untrackedCache=false", "core.alternateRefsCommand=", "diff.external=", "uploadpack.packObjectsHook=",
)


def check_rev(rev: str) -> str:
    rev = (rev or "").strip()
    if not REV.match(rev) or ".." in rev:
        raise InvalidArgument(f"base {rev[:60]!r} is not a git revision name (letters, digits, / . ~ ^ @ {{}} - _; "
                              "no leading '-', no range): give a branch, tag or commit, e.g. main or HEAD~3")
    return rev


class RefusedRepository(Exception):
    """A workspace repository git is not run on; the message says why."""


@dataclass(frozen=True)
class Repository:
    """A workspace repository checked by :func:`open_repository`: its git folder and the folder holding it."""

    git_dir: str
    top: str


MAX_CONFIG = 1024 * 1024
_SECTION = re.compile(r'^\s*\[\s*([A-Za-z0-9.-]+)(?:\s+"[^"]*")?\s*\]\s*(.*)$')
_KEY = re.compile(r"^\s*([A-Za-z][A-Za-z0-9-]*)\s*(?:=|$)")


def open_repository(workspace: Path | str, root: str) -> Repository:
    """The repository at workspace-relative folder ``root`` ("" for the workspace itself), when git may be run
    on it; else :class:`RefusedRepository` naming the reason (see the module docstring)."""
    where = root or "."
    try:
        top = workspace_files.resolved_inside(workspace, root or ".")
        git_dir = workspace_files.resolved_inside(workspace, os.path.join(root, ".git"))
        st = os.lstat(os.path.join(workspace_files.confine(workspace, root or "."), ".git"))
    except workspace_files.UnsafeWorkspaceFile as exc:
        raise RefusedRepository(f"{where}: its .git is {exc.reason}") from None
    except OSError:
        raise RefusedRepository(f"{where}: no .git folder") from None
    if stat.S_ISREG(st.st_mode):
        raise RefusedRepository(f"{where}: .git is a file (gitdir: ...), not followed")
    if not stat.S_ISDIR(st.st_mode):
        raise RefusedRepository(f"{where}: .git is not a folder (a symlink?), not followed")
    for name, why in (("commondir", "a commondir file (objects and config from another place)"),
                      ("objects/info/alternates", "alternates (objects from another place)")):
        if os.path.lexists(os.path.join(git_dir, name)):
            raise RefusedRepository(f"{where}: the git folder has {why}")
    for name in ("config", "config.worktree"):
        rel = os.path.join(root, ".git", name)
        try:
            text = workspace_files.read_text(workspace, rel, MAX_CONFIG)
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise RefusedRepository(f"{where}: .git/{name} unreadable ({exc}); not trusted") from None
        bad = refused_setting(text)
        if bad:
            raise RefusedRepository(f"{where}: .git/{name} sets {bad}")
    return Repository(git_dir=git_dir, top=top)


def refused_setting(config: str) -> str | None:
    """The first setting of git config text that makes a partial clone (a lazy fetch runs the remote's
    transport) or pulls in another file (include, includeIf); None when there is none. Section and key
    names are matched as git does, case-insensitively."""
    section = ""
    for raw in config.splitlines():
        line = raw
        m = _SECTION.match(line)
        if m:
            section = m.group(1).lower().split(".")[0]
            if section in ("include", "includeif"):
                return f"[{m.group(1)}] (another config file)"
            line = m.group(2)
        k = _KEY.match(line)
        if not k:
            continue
        key = k.group(1).lower()
        if section == "extensions" and key == "partialclone":
            return "extensions.partialClone (a partial clone)"
        if section == "remote" and key in ("promisor", "partialclonefilter"):
            return f"remote.*.{key} (a partial clone)"
    return None


def _env() -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR")}
    keep.update(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL="/dev/null", GIT_TERMINAL_PROMPT="0",
                GIT_OPTIONAL_LOCKS="0", GIT_NO_LAZY_FETCH="1", GIT_NO_REPLACE_OBJECTS="1", GIT_PAGER="cat",
                GIT_ASKPASS="", SSH_ASKPASS="", GIT_ATTR_NOSYSTEM="1", GIT_ALLOW_PROTOCOL="none")
    return keep


def _git(repo: Repository, *args: str, cap: int = MAX_BLOB) -> bytes | None:
    cmd = ["git"]
    for item in SAFE_CONFIG:
        cmd += ["-c", item]
    cmd += [f"--git-dir={repo.git_dir}", *args]
    env = {**_env(), "GIT_CEILING_DIRECTORIES": os.path.dirname(repo.top)}
    try:
        proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, timeout=TIMEOUT_S, env=env,
                              check=False, cwd=repo.git_dir)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0 or len(proc.stdout) > cap:
        return None
    return proc.stdout


def resolve_commit(repo: Repository, rev: str) -> str | None:
    """The commit id ``rev`` names in ``repo`` (None: unknown revision)."""
    out = _git(repo, "rev-parse", "--verify", "--quiet", "--end-of-options", check_rev(rev) + "^{commit}")
    text = out.decode().strip() if out else ""
    return text if re.fullmatch(r"[0-9a-f]{40,64}", text) else None


def show_blob(repo: Repository, commit: str, path: str) -> str | None:
    """The text of ``path`` (relative to the repository's top folder) at ``commit`` (None: absent there)."""
    if not re.fullmatch(r"[0-9a-f]{40,64}", commit) or path.startswith("-") or "\n" in path:
        return None
    out = _git(repo, "cat-file", "blob", f"{commit}:{path}")
    return out.decode("utf-8", "replace") if out is not None else None


def list_files(repo: Repository, commit: str, suffix: str) -> list[str]:
    """Paths (relative to the repository's top folder) of the files ending with ``suffix`` at ``commit`` (bounded)."""
    if not re.fullmatch(r"[0-9a-f]{40,64}", commit):
        return []
    out = _git(repo, "ls-tree", "-r", "--name-only", "-z", commit, cap=16 * MAX_BLOB)
    if not out:
        return []
    return [p for p in out.decode("utf-8", "replace").split("\0") if p.endswith(suffix)][:5000]
