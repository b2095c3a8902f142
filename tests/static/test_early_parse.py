"""The parse the command line starts before its imports (``indexer.start_early``) gives what the
plain parse gives, and ``mesh-mcp index`` prints the same with and without it. (start_early forks
only in a process of one thread: in the whole suite those checks run in a fresh spawned process.)

- the results collected by ``parse_files`` are the plain parse's; a file the early workers
  parsed but the refresh does not ask for is dropped, one they were not given is parsed;
- an early parse of another root or config is cancelled, not used;
- it starts only for a cold build of enough files in a process with one thread (``fork``);
  a warm ``mesh-mcp index`` (the cache exists) never starts it.
"""

from __future__ import annotations

import json
import multiprocessing
import shutil
import threading
from pathlib import Path

import pytest

import tools.mesh_index.commands as commands
from server.cli import main
from server.config import Conventions
from tests.helpers import FIXTURES
from tools.mesh_index import indexer
from tools.mesh_index.indexer import parse_files, start_early, take_early
from tools.mesh_index.ts_queries import extract_config

CFG = extract_config(Conventions())


def _items(root: Path, n: int) -> list[tuple[str, str]]:
    items = []
    for i in range(n):
        rel = f"pkg/src/m{i}.ts"
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(
            f"import {{ X{i} }} from './x{i}';\nexport enum E{i}JobType {{ A = 'e{i}.a' }}\n"
            f"export class H{i} {{ run() {{ this.queue.add(E{i}JobType.A, {{ stream: 's{i}' }}); }} }}\n")
        items.append((rel, "ts"))
    return items


@pytest.fixture(autouse=True)
def _no_leftover():
    yield
    indexer.cancel_early()


def _alone() -> bool:
    return threading.active_count() == 1


def _in_a_process_of_one_thread(check, tmp_path: Path) -> None:
    """Run ``check(tmp_path)`` here when this process has one thread, else in a fresh spawned one.

    start_early forks only in a process of one thread; in the whole suite earlier tests leave
    threads behind, so the check runs in a new interpreter (its assertion fails the exit code)."""
    if _alone():
        check(tmp_path)
        return
    child = multiprocessing.get_context("spawn").Process(target=_run_and_cancel, args=(check, tmp_path))
    child.start()
    child.join(300)
    if child.is_alive():
        child.kill()
        pytest.fail(f"{check.__name__} did not finish in 300 s in its own process")
    assert child.exitcode == 0, f"{check.__name__} failed in its own process (traceback above, exit {child.exitcode})"


def _run_and_cancel(check, tmp_path: Path) -> None:
    try:
        check(tmp_path)
    finally:
        indexer.cancel_early()


def test_early_results_are_the_plain_parse(tmp_path: Path):
    _in_a_process_of_one_thread(_check_early_results_are_the_plain_parse, tmp_path)


def _check_early_results_are_the_plain_parse(tmp_path: Path) -> None:
    assert _alone()
    items = _items(tmp_path, indexer.PARALLEL_THRESHOLD + 30)
    plain = parse_files(str(tmp_path), items, CFG, workers=1)
    assert start_early(str(tmp_path), items, CFG, workers=2)
    asked = [*items[5:], ("pkg/src/late.ts", "ts")]  # 5 files no longer wanted, one the workers never saw
    (tmp_path / "pkg/src/late.ts").write_text("export const late = createJob(X.A);\n")
    seen: list[tuple[int, int]] = []
    early = parse_files(str(tmp_path), asked, CFG, lambda done, total, _rel: seen.append((done, total)))
    assert take_early(str(tmp_path), CFG) is None  # collected once
    late = parse_files(str(tmp_path), [("pkg/src/late.ts", "ts")], CFG, workers=1)
    assert sorted(early) == sorted([r for r in plain if r[0] not in {rel for rel, _k in items[:5]}] + late)
    assert seen[-1] == (len(asked) - 1, len(asked)) and all("calls" in r[4] for r in early if r[0] != "pkg/src/late.ts")


def test_an_early_parse_of_another_root_or_config_is_not_used(tmp_path: Path):
    _in_a_process_of_one_thread(_check_an_early_parse_of_another_root_or_config_is_not_used, tmp_path)


def _check_an_early_parse_of_another_root_or_config_is_not_used(tmp_path: Path) -> None:
    assert _alone()
    items = _items(tmp_path, indexer.PARALLEL_THRESHOLD)
    other = extract_config(Conventions(static={"create_job_calls": ["enqueue"]}))
    assert other != CFG
    assert start_early(str(tmp_path), items, other, workers=2)
    assert take_early(str(tmp_path), CFG) is None and take_early(str(tmp_path), other) is None  # cancelled
    assert start_early(str(tmp_path / "elsewhere"), items, CFG, workers=2)
    got = parse_files(str(tmp_path), items, CFG, workers=1)
    assert sorted(got) == sorted(parse_files(str(tmp_path), items, CFG, workers=1))


def test_start_early_refuses_small_batches_one_core_and_threads(tmp_path: Path):
    items = _items(tmp_path, indexer.PARALLEL_THRESHOLD)
    assert not start_early(str(tmp_path), items[:-1], CFG, workers=2)
    assert not start_early(str(tmp_path), items, CFG, workers=1)
    stop = threading.Event()
    helper = threading.Thread(target=stop.wait)
    helper.start()
    try:
        assert not start_early(str(tmp_path), items, CFG, workers=2)  # a thread alive: no fork
    finally:
        stop.set()
        helper.join()


def test_index_command_prints_the_same_with_and_without_the_early_parse(tmp_path: Path, monkeypatch, capsys):
    ws = tmp_path / "ws"
    shutil.copytree(FIXTURES / "realistic_workspace", ws, ignore=shutil.ignore_patterns(".mesh"))
    _items(ws / "extra", indexer.PARALLEL_THRESHOLD)  # enough files for the pool
    started: list[bool] = []
    real = commands.start_parsing_early
    monkeypatch.setattr(commands, "start_parsing_early", lambda s, full: started.append(real(s, full)) or started[-1])

    def index(state: str) -> dict:
        monkeypatch.setenv("MESH_STATE_DIR", str(tmp_path / state))
        assert main(["index", "--workspace", str(ws), "--json"]) == 0
        data = json.loads(capsys.readouterr().out)
        for volatile in ("duration_s", "indexed_at", "cache"):
            data["index"].pop(volatile)
        return data

    with_early = index("a")
    warm = index("a")
    monkeypatch.setattr(indexer, "start_early", lambda *a, **k: False)
    without = index("b")
    assert started == [_alone(), False, False]  # cold: started (when this process has one thread); warm: not
    assert with_early == without and with_early["index"]["reparsed"] == with_early["index"]["files"] > 400
    assert warm["index"]["reparsed"] == 0 and warm["counts"] == with_early["counts"]


def test_an_early_parse_whose_workers_died_is_parsed_again(tmp_path: Path):
    _in_a_process_of_one_thread(_check_an_early_parse_whose_workers_died_is_parsed_again, tmp_path)


def _check_an_early_parse_whose_workers_died_is_parsed_again(tmp_path: Path) -> None:
    """A worker killed (the out-of-memory killer, a signal): the collect fails, the files are parsed again."""
    assert _alone()
    items = _items(tmp_path, indexer.PARALLEL_THRESHOLD)
    plain = parse_files(str(tmp_path), items, CFG, workers=1)
    assert start_early(str(tmp_path), items, CFG, workers=2)
    pool = indexer._EARLY["pool"]
    for proc in list(pool._processes.values()):
        proc.kill()
    assert sorted(parse_files(str(tmp_path), items, CFG)) == sorted(plain)
