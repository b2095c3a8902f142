"""The persistent index: warm runs re-parse nothing, changed files only, stale files reported."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from server.config import Conventions, StaticConventions
from tools.mesh_index.indexer import parse_files
from tools.mesh_index.service import extract_config

SERVICE_FILE = "ms-event/src/modules/event/event.service.ts"
TOTAL = 66
EVENT_SERVICE = "ms-event/src/modules/event/event.service.ts"


def _answer(svc, target: str = "GEOCODE_EVENT") -> dict:
    data = svc.analyze_impact(target, depth=2).model_dump()
    data.pop("index")
    return data


def test_cold_then_warm_reparses_nothing(workspace, make_service):
    cold = make_service(workspace)
    info = cold.refresh()
    assert (info.files, info.reparsed) == (TOTAL, TOTAL)
    assert info.cache and info.cache.endswith("static-index.sqlite") and Path(info.cache).is_file()
    expected = _answer(cold)
    cold.close()

    warm = make_service(workspace)  # a new process: facts come from SQLite
    info = warm.refresh()
    assert (info.files, info.reparsed, info.parse_errors) == (TOTAL, 0, 1)
    assert _answer(warm) == expected
    assert warm.refresh().reparsed == 0  # in-process refresh with nothing changed


def test_one_changed_file_is_reparsed(workspace, make_service):
    svc = make_service(workspace)
    svc.refresh()
    assert svc.analyze_impact("events.publish_event").producers == []
    path = workspace / SERVICE_FILE
    path.write_text(path.read_text().replace("EventsJobType.GEOCODE_EVENT", "EventsJobType.PUBLISH_EVENT"))
    info = svc.refresh()
    assert info.reparsed == 1
    assert [p.file for p in svc.analyze_impact("events.publish_event").producers] == [SERVICE_FILE]
    assert svc.analyze_impact("events.geocode_event").producers == []
    other = make_service(workspace)  # the cache holds the new facts too
    assert other.refresh().reparsed == 0
    assert [p.file for p in other.analyze_impact("events.publish_event").producers] == [SERVICE_FILE]


def test_touched_but_identical_file_is_not_reparsed(workspace, make_service):
    svc = make_service(workspace)
    svc.refresh()
    path = workspace / SERVICE_FILE
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
    assert svc.refresh().reparsed == 0
    assert make_service(workspace).refresh().reparsed == 0  # the new mtime was recorded in the cache


def test_stale_files_reported_until_refresh(workspace, make_service):
    svc = make_service(workspace, stale_check_interval_s=0)
    svc.refresh()
    path = workspace / SERVICE_FILE
    path.write_text(path.read_text() + "\n// edited\n")
    (workspace / "ms-event/src/new.ts").write_text("export const x = 1;\n")
    (workspace / "ms-event/src/brand-new").mkdir()
    (workspace / "ms-event/src/brand-new/y.ts").write_text("export const y = 1;\n")
    (workspace / "ms-event/src/notes.json").write_text("{}")  # not a config file: never indexed
    (workspace / "ws-service/src/main.ts").unlink()
    r = svc.analyze_impact("GEOCODE_EVENT")
    assert r.index.stale_files == sorted([SERVICE_FILE, "ms-event/src/new.ts", "ms-event/src/brand-new/y.ts",
                                          "ws-service/src/main.ts"])
    assert any("changed since indexing" in n for n in r.notes)
    assert svc.catalogue().index.stale_files == r.index.stale_files
    info = svc.refresh()
    assert info.reparsed == 3 and info.files == TOTAL + 1  # +2 new, -1 removed
    assert svc.analyze_impact("GEOCODE_EVENT").index.stale_files == []
    # the removed file wired WsJobOutboxPostProcessor's stream: now unresolved
    r = svc.analyze_impact("stream:ws:jobs-outbox")
    assert r.consumers == []


def test_full_refresh_and_signature_change_reparse_everything(workspace, make_service):
    make_service(workspace).refresh()
    assert make_service(workspace).refresh(full=True).reparsed == TOTAL
    other = Conventions(static=StaticConventions(create_job_calls=["createJob", "makeJob"]))
    assert make_service(workspace, conventions=other).refresh().reparsed == TOTAL
    assert make_service(workspace, conventions=other).refresh().reparsed == 0


def test_a_corrupt_cache_is_set_aside_and_rebuilt(workspace, make_service, tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    (state / "static-index.sqlite").write_bytes(b"this is not a database" * 100)
    svc = make_service(workspace)
    info = svc.refresh()
    assert info.reparsed == TOTAL and info.cache == str(state / "static-index.sqlite")
    assert (state / "static-index.sqlite.corrupt").read_bytes() == b"this is not a database" * 100
    assert [m.value for m in svc.analyze_impact("GEOCODE_EVENT").matches] == ["events.geocode_event"]
    svc.close()
    assert make_service(workspace).refresh().reparsed == 0  # the rebuilt cache serves the next process


def test_a_cache_that_cannot_be_written_falls_back_to_memory(workspace, make_service, tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    (state / "static-index.sqlite").mkdir()  # not a file at all: neither opened nor moved
    svc = make_service(workspace)
    info = svc.refresh()
    assert info.reparsed == TOTAL and "cache disabled" in (info.cache or "")
    assert (state / "static-index.sqlite").is_dir() and not (state / "static-index.sqlite.corrupt").exists()
    assert [m.value for m in svc.analyze_impact("GEOCODE_EVENT").matches] == ["events.geocode_event"]


def test_queries_while_refreshing_from_threads(workspace, make_service):
    svc = make_service(workspace)
    errors: list[BaseException] = []

    def query() -> None:
        try:
            for _ in range(20):
                assert svc.analyze_impact("GEOCODE_EVENT").matches
        except BaseException as exc:  # collected for the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=query) for _ in range(4)]
    threads.append(threading.Thread(target=lambda: [svc.refresh(full=True) for _ in range(3)]))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_parallel_parsing_gives_the_same_facts(tmp_path):
    items = []
    for i in range(450):
        rel = f"pkg/src/m{i}.ts"
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"export enum E{i}JobType {{ A = 'e{i}.a' }}\n"
                        f"export class H{i} {{ readonly jobType = E{i}JobType.A; }}\n")
        items.append((rel, "ts"))
    cfg = extract_config(Conventions())
    seen: list[int] = []
    parallel = parse_files(str(tmp_path), items, cfg, lambda done, total, _p: seen.append(done), workers=2)
    serial = parse_files(str(tmp_path), items, cfg, None, workers=1)
    assert sorted(parallel) == sorted(serial) and len(serial) == 450
    assert seen and seen[-1] == 450


def test_warm_process_loads_the_linked_snapshot(workspace, make_service, monkeypatch):
    cold = make_service(workspace)
    cold.refresh()
    expected = _answer(cold, "FALLBACK_CREATE_EVENT")
    expected_catalogue = cold.catalogue().model_dump(exclude={"index"})
    cold.close()  # writes the snapshot

    import tools.mesh_index.service as service_module

    real_link = service_module.link

    def no_link(*args, **kwargs):
        raise AssertionError("a warm process with nothing changed must not relink")

    monkeypatch.setattr(service_module, "link", no_link)
    warm = make_service(workspace)
    info = warm.refresh()
    assert (info.files, info.reparsed, info.parse_errors) == (TOTAL, 0, 1)
    assert info.parse_error_files == ["ms-event/src/legacy/broken.ts"]
    assert warm.refresh().reparsed == 0  # the next refreshes (the MCP server's) neither load facts nor relink
    assert _answer(warm, "FALLBACK_CREATE_EVENT") == expected
    assert warm.catalogue().model_dump(exclude={"index"}) == expected_catalogue
    assert warm.package_dir_of(SERVICE_FILE) == "ms-event"
    assert "calls" in warm.facts_of(SERVICE_FILE)  # facts are loaded on demand

    monkeypatch.setattr(service_module, "link", real_link)
    path = workspace / SERVICE_FILE
    path.write_text(path.read_text().replace("EventsJobType.GEOCODE_EVENT", "EventsJobType.PUBLISH_EVENT"))
    assert warm.refresh().reparsed == 1
    assert [p.file for p in warm.analyze_impact("events.publish_event").producers] == [SERVICE_FILE]


def test_snapshot_is_not_used_when_a_package_json_changed(workspace, make_service, monkeypatch):
    cold = make_service(workspace)
    cold.refresh()
    cold.close()
    pkg = workspace / "ms-event/package.json"
    st = pkg.stat()
    os.utime(pkg, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))

    import tools.mesh_index.service as service_module

    calls = []
    real_link = service_module.link
    monkeypatch.setattr(service_module, "link", lambda *a, **k: calls.append(1) or real_link(*a, **k))
    warm = make_service(workspace)
    assert warm.refresh().reparsed == 0
    assert calls == [1]


def test_an_edit_that_leaves_the_facts_unchanged_does_not_relink(workspace, make_service, monkeypatch):
    svc = make_service(workspace)
    svc.refresh()
    import tools.mesh_index.service as service_module

    calls = []
    real_link = service_module.link
    monkeypatch.setattr(service_module, "link", lambda *a, **k: calls.append(1) or real_link(*a, **k))
    path = workspace / SERVICE_FILE
    # same lines, same facts: a comment inside a method body
    text = path.read_text()
    path.write_text(text.replace("private log(_m: string): void {}", "private log(_m: string): void { /**/ }"))
    assert svc.refresh().reparsed == 1
    assert calls == []
    path.write_text(path.read_text().replace("EventsJobType.GEOCODE_EVENT", "EventsJobType.PUBLISH_EVENT"))
    assert svc.refresh().reparsed == 1
    assert calls == [1]


def test_damage_found_after_the_open_sets_the_cache_aside_for_the_next_run(workspace, make_service, tmp_path):
    """The page of the facts table damaged (what an operating-system crash may leave): the open
    succeeds, the read of the facts fails; that run works from memory and sets the file aside, the
    next one builds a new cache."""
    import sqlite3

    first = make_service(workspace)
    first.refresh()
    first.close()
    path = tmp_path / "state" / "static-index.sqlite"
    assert not Path(f"{path}-wal").exists()  # a closed cache: everything is in the file itself
    with sqlite3.connect(path) as conn:
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'files'").fetchone()[0]
    conn.close()
    data = bytearray(path.read_bytes())
    data[(root - 1) * page_size:root * page_size] = b"\xff" * page_size
    path.write_bytes(bytes(data))
    edited = workspace / EVENT_SERVICE  # a change: the facts must be read (no snapshot of this state)
    edited.write_text(edited.read_text() + "\n// edited\n")
    damaged = make_service(workspace)
    info = damaged.refresh()
    assert info.reparsed == TOTAL and "cache disabled" in (info.cache or "")
    assert (tmp_path / "state" / "static-index.sqlite.corrupt").exists() and not path.exists()
    assert [m.value for m in damaged.analyze_impact("GEOCODE_EVENT").matches] == ["events.geocode_event"]
    damaged.close()
    rebuilt = make_service(workspace).refresh()
    assert rebuilt.reparsed == TOTAL and rebuilt.cache == str(path)
    assert make_service(workspace).refresh().reparsed == 0


def test_a_cache_replaced_by_another_process_is_not_set_aside(tmp_path):
    """Two processes finding the same file corrupt: the second leaves the first one's new cache alone."""
    from tools.mesh_index.cache import _inode, _set_aside

    path = tmp_path / "static-index.sqlite"
    path.write_bytes(b"not a database")
    seen = _inode(path)
    (tmp_path / "new").write_bytes(b"the new cache of another process")
    os.replace(tmp_path / "new", path)  # another inode in its place
    assert _set_aside(path, seen) is None and path.read_bytes() == b"the new cache of another process"
