"""Reading files of a git revision of an untrusted repository, running nothing the repository chose.

Only two plumbing commands run, ``git rev-parse --verify`` and ``git cat-file blob`` (plus ``ls-tree``
to list the revision's ``.proto`` files): none applies textconv, filters, hooks or the fsmonitor, and
each runs with the system and global config ignored (``GIT_CONFIG_NOSYSTEM=1``,
``GIT_CONFIG_GLOBAL=/dev/null``) and the repository's own settings that could start a program
overridden on the command line (``core.fsmonitor``, ``core.hooksPath``, ``core.sshCommand``,
``core.gitProxy``, ``core.pager``, ``credential.helper``, ``protocol.allow=never``, no lazy fetch of a
partial clone). The revision is checked (no leading ``-``, a small character set) and passed after
``--end-of-options``. Time and output are capped.
"""

from __future__ import annotations

import os
import re
import subprocess

from server.errors import InvalidArgument

REV = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_./~^@{}+-]{0,199}$")
TIMEOUT_S = 10
MAX_BLOB = 1024 * 1024
SAFE_CONFIG = (
    "core.fsmonitor=", "core.hooksPath=/dev/null", "core.sshCommand=false", "core.gitProxy=",
    "core.pager=cat", "core.askPass=", "credential.helper=", "protocol.allow=never",
    "core.untrackedCache=false", "core.alternateRefsCommand=", "diff.external=", "uploadpack.packObjectsHook=",
)


def check_rev(rev: str) -> str:
    rev = (rev or "").strip()
    if not REV.match(rev) or ".." in rev:
        raise InvalidArgument(f"base {rev[:60]!r} is not a git revision name (letters, digits, / . ~ ^ @ {{}} - _; "
                              "no leading '-', no range): give a branch, tag or commit, e.g. main or HEAD~3")
    return rev


def _env() -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR")}
    keep.update(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL="/dev/null", GIT_TERMINAL_PROMPT="0",
                GIT_OPTIONAL_LOCKS="0", GIT_NO_LAZY_FETCH="1", GIT_NO_REPLACE_OBJECTS="1", GIT_PAGER="cat",
                GIT_ASKPASS="", SSH_ASKPASS="", GIT_ATTR_NOSYSTEM="1")
    return keep


def _git(root: str, *args: str, cap: int = MAX_BLOB) -> bytes | None:
    cmd = ["git"]
    for item in SAFE_CONFIG:
        cmd += ["-c", item]
    cmd += ["-C", root, *args]
    try:
        proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, timeout=TIMEOUT_S, env=_env(),
                              check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0 or len(proc.stdout) > cap:
        return None
    return proc.stdout


def resolve_commit(root: str, rev: str) -> str | None:
    """The commit id ``rev`` names in the repository at ``root`` (None: unknown revision or no repository)."""
    out = _git(root, "rev-parse", "--verify", "--quiet", "--end-of-options", check_rev(rev) + "^{commit}")
    text = out.decode().strip() if out else ""
    return text if re.fullmatch(r"[0-9a-f]{40,64}", text) else None


def show_blob(root: str, commit: str, path: str) -> str | None:
    """The text of ``path`` (relative to ``root``) at ``commit`` (None: absent there)."""
    if not re.fullmatch(r"[0-9a-f]{40,64}", commit) or path.startswith("-") or "\n" in path:
        return None
    out = _git(root, "cat-file", "blob", f"{commit}:{path}")
    return out.decode("utf-8", "replace") if out is not None else None


def list_files(root: str, commit: str, suffix: str) -> list[str]:
    """Paths (relative to ``root``) of the files ending with ``suffix`` at ``commit`` (bounded)."""
    if not re.fullmatch(r"[0-9a-f]{40,64}", commit):
        return []
    out = _git(root, "ls-tree", "-r", "--name-only", "-z", commit, cap=16 * MAX_BLOB)
    if not out:
        return []
    return [p for p in out.decode("utf-8", "replace").split("\0") if p.endswith(suffix)][:5000]
