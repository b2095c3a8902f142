"""The speed work on the static index changes no answer.

- The rewritten hot spots (``split_top``, ``has_new_with_named_arg``, ``text``) give what the
  character-by-character versions they replaced gave (kept here as references), on random
  input and on every file of the fixtures: the facts of every fixture file are identical.
- Worker processes started by ``fork`` (the command line), by the preloaded ``forkserver``
  (a process with threads: the MCP server) and in-process parsing give the same results.
- ``mesh-mcp index`` computes no verify check; the catalogue's failing checks are cached
  with the snapshot and computed again when a file changes.
- A warm ``mesh-mcp index`` never imports tree-sitter, the linker or verify_flow, and
  ``mesh-mcp --help`` does not import the settings (pydantic).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tools.mesh_index.expressions as expressions
import tools.mesh_index.parser as parser_module
import tools.mesh_index.sql_sites as sql_sites
from server.cli import main
from server.config import Conventions
from tests.helpers import FIXTURES, REPO_ROOT
from tools.mesh_index import indexer
from tools.mesh_index.indexer import parse_files, pool_context
from tools.mesh_index.parser import constructed, extract, has_new_with_named_arg
from tools.mesh_index.service import extract_config
from tools.mesh_index.sql_sites import split_top
from tools.mesh_index.workspace import discover

FIXTURE_WORKSPACES = ("workspace", "realistic_workspace", "verify_workspace")


# -- the versions the rewrites replaced, verbatim ----------------------------------------------

def ref_split_top(s: str, sep: str = ",") -> list[str]:
    out, depth, cur, i, quote = [], 0, [], 0, False
    while i < len(s):
        ch = s[i]
        if quote:
            cur.append(ch)
            if ch == "'":
                if i + 1 < len(s) and s[i + 1] == "'":
                    cur.append("'")
                    i += 1
                else:
                    quote = False
        elif ch == "'":
            quote = True
            cur.append(ch)
        elif ch in "([":
            depth += 1
            cur.append(ch)
        elif ch in ")]":
            depth -= 1
            cur.append(ch)
        elif depth == 0 and s.startswith(sep, i):
            out.append("".join(cur))
            cur = []
            i += len(sep)
            continue
        else:
            cur.append(ch)
        i += 1
    out.append("".join(cur))
    return [p.strip() for p in out]


REF_NEW_CALL = re.compile(rb"new\s+[A-Z]\w*\s*\(")
REF_NAMED = re.compile(rb"\s*[A-Za-z_$][\w$]*\s*[,)]")


def ref_has_new_with_named_arg(src: bytes) -> bool:
    for m in REF_NEW_CALL.finditer(src):
        depth, i, end = 1, m.end(), min(len(src), m.end() + 400)
        while i < end and depth:
            ch = src[i]
            if ch in b"([{":
                depth += 1
            elif ch in b")]}":
                depth -= 1
            elif ch == 44 and depth == 1 and REF_NAMED.match(src, i + 1):
                return True
            i += 1
    return False


def ref_text(node) -> str:
    return node.text.decode("utf-8", "replace") if node is not None and node.text is not None else ""


def fixture_files() -> list[tuple[Path, str, str]]:
    out = []
    for name in FIXTURE_WORKSPACES:
        root = FIXTURES / name
        for f in discover(root, Conventions().static.skip_dirs).files:
            out.append((root, f.rel, f.kind))
    return out


# -- hot spots -----------------------------------------------------------------------------------

SQL_ALPHABET = st.text(alphabet="ab ,;|()[]'x\n", max_size=60)


@settings(max_examples=600, deadline=None)
@given(SQL_ALPHABET, st.sampled_from([",", "||", ";"]))
def test_split_top_equals_the_character_loop(s, sep):
    assert split_top(s, sep) == ref_split_top(s, sep)


def test_split_top_equals_the_character_loop_on_fixture_sql():
    texts = [(root / rel).read_text("utf-8", "replace") for root, rel, kind in fixture_files() if kind in ("sql", "ts")]
    assert any("INSERT INTO" in t.upper() for t in texts)
    for t in texts:
        for sep in (",", "||", ";"):
            assert split_top(t, sep) == ref_split_top(t, sep)


JS_ALPHABET = st.text(alphabet="new ABx(){}[],$_ \n", max_size=80)


@settings(max_examples=600, deadline=None)
@given(JS_ALPHABET)
def test_new_call_prefilter_equals_the_character_loop(s):
    src = s.encode()
    assert has_new_with_named_arg(src) is ref_has_new_with_named_arg(src)


def test_new_call_prefilter_on_long_calls_and_fixture_files():
    long_call = b"new Foo(" + b"a" * 390 + b", NAME)"
    assert has_new_with_named_arg(long_call) is ref_has_new_with_named_arg(long_call) is True
    too_long = b"new Foo(" + b"a" * 400 + b", NAME)"
    assert has_new_with_named_arg(too_long) is ref_has_new_with_named_arg(too_long) is False
    for root, rel, _kind in fixture_files():
        src = (root / rel).read_bytes()
        assert has_new_with_named_arg(src) is ref_has_new_with_named_arg(src), rel


REF_CONSTRUCTED = re.compile(rb"\bnew\s+([A-Z][\w$]*)\s*[(<]")
NEW_ALPHABET = st.text(alphabet="new ABx(<$_ \n", max_size=60)


@settings(max_examples=600, deadline=None)
@given(NEW_ALPHABET)
def test_constructed_names_equal_the_word_boundary_regex(s):
    src = s.encode()
    assert constructed(src) == [m.decode() for m in REF_CONSTRUCTED.findall(src)]


def test_constructed_names_on_fixture_files():
    for root, rel, _kind in fixture_files():
        src = (root / rel).read_bytes()
        assert constructed(src) == [m.decode() for m in REF_CONSTRUCTED.findall(src)], rel
    assert constructed(b"new A(); xnew B(); $new C(); _new D<T>()") == ["A", "C"]


def test_facts_of_every_fixture_file_are_those_of_the_replaced_functions(monkeypatch):
    cfg = extract_config(Conventions())
    files = fixture_files()
    current = {(str(root), rel): json.dumps(extract((root / rel).read_bytes(), kind, cfg), sort_keys=True)
               for root, rel, kind in files}
    new_text, new_split = expressions.text, sql_sites.split_top
    for mod in [m for name, m in sys.modules.items() if name.startswith("tools.mesh_index.")]:
        if getattr(mod, "text", None) is new_text:
            monkeypatch.setattr(mod, "text", ref_text)
        if getattr(mod, "split_top", None) is new_split:
            monkeypatch.setattr(mod, "split_top", ref_split_top)
    monkeypatch.setattr(parser_module, "has_new_with_named_arg", ref_has_new_with_named_arg)
    assert parser_module.text is ref_text and sql_sites.split_top is ref_split_top
    before = {(str(root), rel): json.dumps(extract((root / rel).read_bytes(), kind, cfg), sort_keys=True)
              for root, rel, kind in files}
    assert len(current) == len(files) > 150
    assert current == before


# -- worker processes -----------------------------------------------------------------------------

def _items(tmp_path: Path, n: int) -> list[tuple[str, str]]:
    items = []
    for i in range(n):
        rel = f"pkg/src/m{i}.ts"
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"import {{ X{i} }} from './x{i}';\nexport enum E{i}JobType {{ A = 'e{i}.a' }}\n"
                        f"export class H{i} {{ readonly jobType = E{i}JobType.A;\n"
                        f"  run() {{ createJob(E{i}JobType.A); }} }}\n")
        items.append((rel, "ts"))
    return items


def test_start_method_is_fork_alone_and_forkserver_with_threads():
    # a process with only its main thread (a fresh interpreter, as the CLI is) forks
    alone = subprocess.run(
        [sys.executable, "-c", "from tools.mesh_index.indexer import pool_context; "
         "print(pool_context().get_start_method())"],
        cwd=REPO_ROOT, capture_output=True, text=True, check=True, timeout=60,
    )
    assert alone.stdout.strip() == "fork"
    # this test process may already run helper threads (earlier tests' worker threads): then forkserver
    if threading.active_count() == 1:
        assert pool_context().get_start_method() == "fork"
    seen: list[str] = []
    stop = threading.Event()
    helper = threading.Thread(target=stop.wait)
    helper.start()
    try:
        seen.append(pool_context().get_start_method())
    finally:
        stop.set()
        helper.join()
    assert seen == ["forkserver"]


def test_fork_forkserver_and_in_process_parsing_agree(tmp_path: Path):
    items = _items(tmp_path, indexer.PARALLEL_THRESHOLD + 20)
    cfg = extract_config(Conventions())
    serial = parse_files(str(tmp_path), items, cfg, None, workers=1)
    forked = parse_files(str(tmp_path), items, cfg, None, workers=2)  # this thread is alone: fork
    results: dict[str, list] = {}

    def from_a_thread() -> None:  # two threads alive: the preloaded forkserver
        results["forkserver"] = parse_files(str(tmp_path), items, cfg, None, workers=2)

    t = threading.Thread(target=from_a_thread)
    t.start()
    t.join()
    assert sorted(serial) == sorted(forked) == sorted(results["forkserver"])
    assert len(serial) == len(items) and all("calls" in r[4] for r in serial)


# -- verify checks: not in `index`, cached with the snapshot ------------------------------------------

@pytest.fixture
def verify_ws(tmp_path: Path) -> Path:
    target = tmp_path / "vws"
    shutil.copytree(FIXTURES / "verify_workspace", target, ignore=shutil.ignore_patterns(".mesh"))
    return target


def _count_checks(monkeypatch) -> list[int]:
    import tools.verify.service as verify_service

    calls: list[int] = []
    real = verify_service.failing_checks_by_type
    monkeypatch.setattr(verify_service, "failing_checks_by_type", lambda s: calls.append(1) or real(s))
    return calls


def test_index_command_computes_no_verify_check(verify_ws: Path, tmp_path: Path, monkeypatch, capsys):
    calls = _count_checks(monkeypatch)
    monkeypatch.setenv("MESH_STATE_DIR", str(tmp_path / "state"))
    assert main(["index", "--workspace", str(verify_ws), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["counts"]["job"] >= 1 and calls == []


def test_failing_checks_are_cached_with_the_snapshot_and_invalidated_by_a_change(
        verify_ws: Path, make_service, monkeypatch):
    calls = _count_checks(monkeypatch)
    first = make_service(verify_ws)
    expected = first.catalogue().model_dump(exclude={"index"})
    assert any(e["failing_checks"] for e in expected["entries"]) and calls == [1]
    assert first.catalogue().model_dump(exclude={"index"}) == expected and calls == [1]  # in memory
    first.close()

    warm = make_service(verify_ws)  # a new process, nothing changed: from the cache, verify never runs
    assert warm.catalogue().model_dump(exclude={"index"}) == expected and calls == [1]
    warm.close()

    changed = next(p for p in sorted(verify_ws.rglob("*.ts")) if "createJob" in p.read_text())
    changed.write_text(changed.read_text() + "\n// edited\n")
    again = make_service(verify_ws)  # the file hash changed: another digest, computed again
    assert again.catalogue().model_dump(exclude={"index"}) == expected and calls == [1, 1]
    again.close()

    full = make_service(verify_ws)
    full.refresh(full=True)  # --full clears the cached checks too
    full.catalogue()
    assert calls == [1, 1, 1]


# -- imports of the command line -------------------------------------------------------------------------

PROBE = """
import sys
from server.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as exc:  # --help
    code = exc.code or 0
heavy = sorted(m for m in ("tree_sitter", "tools.mesh_index.sites", "tools.verify.service", "server.config",
                           "pydantic", "tools.mesh_index.indexer") if m in sys.modules)
print("MODULES " + ",".join(heavy), file=sys.stderr)
sys.exit(code)
"""


def _probe(*argv: str, env: dict[str, str] | None = None) -> list[str]:
    proc = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, cwd=REPO_ROOT,
                          env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    line = next(x for x in proc.stderr.splitlines() if x.startswith("MODULES "))
    return [m for m in line[len("MODULES "):].split(",") if m]


def test_warm_index_imports_neither_tree_sitter_nor_linker_nor_verify(workspace: Path, tmp_path: Path):
    import os

    env = {**os.environ, "MESH_STATE_DIR": str(tmp_path / "state")}
    cold = _probe("index", "--workspace", str(workspace), env=env)
    assert "tree_sitter" in cold and "tools.mesh_index.sites" in cold
    warm = _probe("index", "--workspace", str(workspace), env=env)
    assert "tree_sitter" not in warm and "tools.mesh_index.sites" not in warm
    assert "tools.verify.service" not in warm and "tools.mesh_index.indexer" not in warm


def test_help_imports_no_settings():
    assert _probe("--help") == []


def test_index_summary_is_cached_with_the_snapshot(workspace: Path, make_service, monkeypatch):
    first = make_service(workspace)
    catalogue = first.catalogue(with_checks=False)
    assert first.summary() == (catalogue.counts, catalogue.orphans) and catalogue.orphans > 0
    first.close()

    import tools.mesh_index.service as service_module

    def no_catalogue(*args, **kwargs):
        raise AssertionError("an unchanged workspace must take the summary from the cache")

    monkeypatch.setattr(service_module, "build_catalogue", no_catalogue)
    warm = make_service(workspace)
    assert warm.summary() == (catalogue.counts, catalogue.orphans)
    warm.close()
    path = workspace / "ms-event/src/modules/event/event.service.ts"
    path.write_text(path.read_text().replace("EventsJobType.GEOCODE_EVENT", "EventsJobType.PUBLISH_EVENT"))
    changed = make_service(workspace)
    with pytest.raises(AssertionError, match="from the cache"):
        changed.summary()  # another digest: computed again
