"""analyze_grpc(base=...) on a hostile repository: a partial clone whose promisor remote is an ``ext::``
command, and a ``.git`` file pointing out of the workspace, are refused before git runs; nothing runs."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from server.config import Conventions
from tests.code_nav.conftest import build_nav_workspace
from tests.code_nav.test_grpc import EVENT_PROTO
from tools.code_nav.grpc import analyze_grpc


def _git(root: Path, *args: str) -> str:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"}
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main", *args],
                          cwd=root, check=True, capture_output=True, env=env, text=True).stdout.strip()


def _analyze(ws: Path, state: Path):
    from tools.mesh_index.service import IndexService

    service = IndexService(ws, Conventions(), cache_dir=state)
    try:
        service.refresh()
        return analyze_grpc(service, "EventService", base="HEAD")
    finally:
        service.close()


def _committed(ws: Path) -> Path:
    repo = ws / "npm-packages"
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "base")
    proto = ws / EVENT_PROTO
    proto.write_text(proto.read_text().replace("  string user_role = 3;\n", ""))
    return repo


def test_partial_clone_with_an_ext_remote_runs_nothing(tmp_path: Path):
    ws = build_nav_workspace(tmp_path / "ws")
    repo = _committed(ws)
    blob = _git(repo, "rev-parse", f"HEAD:{os.path.relpath(ws / EVENT_PROTO, repo)}")
    (repo / ".git" / "objects" / blob[:2] / blob[2:]).unlink()  # the base's blob: a lazy fetch would get it
    marker = tmp_path / "ext-ran"
    with (repo / ".git" / "config").open("a") as fh:
        fh.write(f'[remote "origin"]\n\turl = ext::sh -c touch% {marker}\n\tpromisor = true\n'
                 "\tpartialclonefilter = blob:none\n[protocol \"ext\"]\n\tallow = always\n")
    r = _analyze(ws, tmp_path / "state")
    assert not marker.exists(), "the repository's ext:: promisor remote ran a command"
    assert r.breaking == []
    assert any("refused" in n and "promisor" in n for n in r.notes), r.notes


def test_dot_git_file_pointing_outside_is_not_followed(tmp_path: Path):
    ws = build_nav_workspace(tmp_path / "ws")
    repo = _committed(ws)
    elsewhere = tmp_path / "elsewhere.git"
    shutil.move(str(repo / ".git"), elsewhere)
    (repo / ".git").write_text(f"gitdir: {elsewhere}\n")
    r = _analyze(ws, tmp_path / "state")
    assert r.breaking == [], "git read a repository outside the workspace"
    assert any("refused" in n and ".git is a file" in n for n in r.notes), r.notes


def test_config_settings_refused_as_git_reads_them():
    from tools.code_nav.git_blobs import refused_setting

    assert refused_setting("[Extensions]\n\tpartialClone = origin\n") == "extensions.partialClone (a partial clone)"
    assert refused_setting('[remote "x"]\n  PROMISOR=true\n') == "remote.*.promisor (a partial clone)"
    assert refused_setting("[include]\n\tpath = /elsewhere/config\n").startswith("[include]")
    assert refused_setting('[includeIf "gitdir:/"]\n\tpath = x\n').startswith("[includeIf]")
    assert refused_setting('[core]\n\tbare = false\n[remote "origin"]\n\turl = https://x\n') is None


def test_the_git_call_itself_allows_no_transport(tmp_path: Path, monkeypatch):
    """Even on a git without GIT_NO_LAZY_FETCH (before 2.39.4 / 2.44) and past the refusal, the repository's
    ``protocol.ext.allow=always`` cannot start its ext:: remote: GIT_ALLOW_PROTOCOL=none and the -c overrides."""
    from tools.code_nav import git_blobs

    ws = build_nav_workspace(tmp_path / "ws")
    repo = _committed(ws)
    inner = os.path.relpath(ws / EVENT_PROTO, repo)
    blob = _git(repo, "rev-parse", f"HEAD:{inner}")
    (repo / ".git" / "objects" / blob[:2] / blob[2:]).unlink()
    marker = tmp_path / "ext-ran"
    with (repo / ".git" / "config").open("a") as fh:
        fh.write(f'[remote "origin"]\n\turl = ext::sh -c touch% {marker}\n\tpromisor = true\n'
                 "[protocol \"ext\"]\n\tallow = always\n")
    old_env = git_blobs._env
    monkeypatch.setattr(git_blobs, "_env", lambda: {k: v for k, v in old_env().items() if k != "GIT_NO_LAZY_FETCH"})
    handle = git_blobs.Repository(git_dir=str(repo / ".git"), top=str(repo))
    commit = git_blobs.resolve_commit(handle, "HEAD")
    assert commit and git_blobs.show_blob(handle, commit, inner) is None
    assert not marker.exists(), "the repository's ext:: remote ran"
