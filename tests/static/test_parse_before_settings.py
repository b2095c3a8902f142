"""``mesh-mcp index`` starts parsing before it loads its settings, with the default names, and the
settings decide: the parse is kept when they agree, cancelled and started again when they do not.

- the names written out for that start are the conventions' defaults (a changed default fails here);
- what the settings may change stops the guess beforehand: a config file or the workspace's
  ``mesh.toml`` speaking of conventions or of a state folder, a ``MESH_CONVENTIONS__*`` variable,
  a fact cache already in the state folder;
- a guess the settings contradict is cancelled and the files parsed with the settings' names; a
  guess they confirm is kept, and its walk handed to the service (the workspace is walked once);
- the command prints the same with and without the early start.

The forking checks run in a process of one thread (``_in_a_process_of_one_thread``): start_early
forks only there.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from argparse import Namespace
from pathlib import Path

import pytest

import tools.mesh_index.early_parse as early_parse
from server.cli import main
from server.config import Conventions, load_settings
from tests.helpers import FIXTURES
from tests.static.test_early_parse import _alone, _in_a_process_of_one_thread, _items
from tools.mesh_index import cache, indexer, quick_index
from tools.mesh_index.default_extract import DEFAULT_EXTRACT, DEFAULT_SKIP_DIRS
from tools.mesh_index.ts_queries import extract_config


@pytest.fixture(autouse=True)
def _nothing_left():
    yield
    indexer.cancel_early()
    early_parse._STARTED.clear()
    early_parse._WALK.clear()


def test_the_written_out_defaults_are_the_conventions_defaults():
    assert extract_config(Conventions()) == DEFAULT_EXTRACT
    assert tuple(Conventions().static.skip_dirs) == DEFAULT_SKIP_DIRS
    assert early_parse.CACHE_FILE == cache.FILE_NAME == quick_index.CACHE_FILE


@pytest.fixture
def guessing(tmp_path: Path, monkeypatch) -> tuple[Path, list]:
    """A workspace of enough files, a clean environment, and start_early recorded instead of forking."""
    ws = tmp_path / "ws"
    _items(ws, indexer.PARALLEL_THRESHOLD)
    for key in [k for k in __import__("os").environ if k.startswith("MESH_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("MESH_STATE_DIR", str(tmp_path / "state"))
    calls: list = []
    monkeypatch.setattr(indexer, "start_early", lambda root, items, cfg, workers=None: calls.append(cfg) or True)
    return ws, calls


def test_with_nothing_said_the_default_names_are_guessed(guessing):
    ws, calls = guessing
    assert early_parse.start_before_settings(Namespace(workspace=ws, config=None), full=False)
    assert calls == [DEFAULT_EXTRACT]


@pytest.mark.parametrize("how", ["user config", "--config", "workspace mesh.toml", "variable", "state_dir", "cache"])
def test_what_the_settings_may_change_stops_the_guess(guessing, tmp_path: Path, monkeypatch, how: str):
    ws, calls = guessing
    config = None
    if how == "user config":
        (tmp_path / "config" / "mesh-mcp").mkdir(parents=True)
        (tmp_path / "config" / "mesh-mcp" / "mesh.toml").write_text('[conventions.static]\ncreate_job_calls = ["x"]\n')
    elif how == "--config":
        config = tmp_path / "mine.toml"
        config.write_text('[conventions.static]\nskip_dirs = ["vendor"]\n')
    elif how == "workspace mesh.toml":
        (ws / "mesh.toml").write_text('[conventions.static]\ncreate_job_calls = ["enqueue"]\n')
    elif how == "variable":
        monkeypatch.setenv("MESH_CONVENTIONS__STATIC__CREATE_JOB_CALLS", '["enqueue"]')
    elif how == "state_dir":
        config = tmp_path / "mine.toml"
        config.write_text(f'state_dir = "{tmp_path / "elsewhere"}"\n')
    else:
        (tmp_path / "state").mkdir()
        (tmp_path / "state" / cache.FILE_NAME).write_bytes(b"")
    assert not early_parse.start_before_settings(Namespace(workspace=ws, config=config), full=False)
    assert calls == []


def test_a_guess_the_settings_contradict_is_cancelled_and_parsed_again(tmp_path: Path):
    _in_a_process_of_one_thread(_check_contradicted, tmp_path)


def _check_contradicted(tmp_path: Path) -> None:
    assert _alone()
    ws = tmp_path / "ws"
    _items(ws, indexer.PARALLEL_THRESHOLD)
    state = tmp_path / "state"
    args = Namespace(workspace=ws, config=None)
    assert early_parse.start_before_settings(args, full=False) == (indexer.worker_count() >= 2)
    if indexer.pending_early() is None:
        return  # one core: nothing starts early, nothing to cancel
    other = load_settings(environ={}, overrides={"workspace": str(ws), "state_dir": str(state),
                                                 "conventions": {"static": {"create_job_calls": ["enqueue"]}}})
    assert early_parse.start_parsing_early(other, full=False)
    assert indexer.pending_early() == (str(ws.resolve()), extract_config(other.conventions))  # started again
    indexer.cancel_early()

    assert early_parse.start_before_settings(args, full=False)
    same = load_settings(environ={}, overrides={"workspace": str(ws), "state_dir": str(state)})
    assert early_parse.start_parsing_early(same, full=False)
    assert indexer.pending_early() == (str(ws.resolve()), DEFAULT_EXTRACT)  # kept
    walk = early_parse.early_walk(ws)
    assert walk is not None and len(walk.files) == indexer.PARALLEL_THRESHOLD
    assert early_parse.early_walk(ws) is None  # handed over once


def test_index_prints_the_same_with_and_without_the_early_start(tmp_path: Path):
    _in_a_process_of_one_thread(_check_same_output, tmp_path)


def _check_same_output(tmp_path: Path) -> None:
    import os

    ws = tmp_path / "ws"
    shutil.copytree(FIXTURES / "realistic_workspace", ws, ignore=shutil.ignore_patterns(".mesh"))
    _items(ws / "extra", indexer.PARALLEL_THRESHOLD)
    for key in [k for k in os.environ if k.startswith("MESH_")]:
        del os.environ[key]
    os.environ["XDG_CONFIG_HOME"] = str(tmp_path / "config")
    walks: list[str] = []
    import tools.mesh_index.service as service_module

    real_discover = service_module.discover
    service_module.discover = lambda *a, **k: walks.append("service") or real_discover(*a, **k)

    def index(state: str) -> dict:
        os.environ["MESH_STATE_DIR"] = str(tmp_path / state)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert main(["index", "--workspace", str(ws), "--json"]) == 0
        data = json.loads(out.getvalue())
        for volatile in ("duration_s", "indexed_at", "cache"):
            data["index"].pop(volatile)
        return data

    started: list[bool] = []
    real_start = early_parse.start_before_settings
    import tools.mesh_index.commands as commands

    commands.start_before_settings = lambda args, full: started.append(real_start(args, full)) or started[-1]
    early = index("a")
    assert started == [indexer.worker_count() >= 2]
    assert walks == ([] if started[0] else ["service"])  # the early walk was handed over
    commands.start_before_settings = lambda args, full: False
    commands.start_parsing_early = lambda settings, full: False
    plain = index("b")
    assert early == plain and early["index"]["reparsed"] == early["index"]["files"] > 400


@pytest.mark.parametrize("full", [True, False])
def test_a_config_path_that_is_a_fifo_is_refused_without_waiting(tmp_path: Path, full: bool):
    """``--config`` naming a FIFO (or a terminal): the early start and the quick path read config files
    without blocking; the settings then say what is wrong. (An open() on a FIFO waits for a writer.)"""
    import os
    import subprocess
    import sys

    from tests.helpers import REPO_ROOT

    ws = tmp_path / "ws"
    _items(ws, indexer.PARALLEL_THRESHOLD)
    fifo = tmp_path / "mesh.toml"
    os.mkfifo(fifo)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MESH_")}
    env.update(MESH_STATE_DIR=str(tmp_path / "state"), PYTHONPATH=str(REPO_ROOT))
    argv = [sys.executable, "-m", "server.cli", "index", "--workspace", str(ws), "--config", str(fifo)]
    proc = subprocess.run([*argv, *(["--full"] if full else [])], capture_output=True, text=True, env=env,
                          cwd=REPO_ROOT, timeout=60)
    assert proc.returncode == 2 and "config file" in proc.stderr
