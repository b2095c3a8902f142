"""mesh-mcp index / impact / catalogue: tables, --json, exit codes, progress on stderr."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from server.cli import main
from tests.helpers import REPO_ROOT


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_index_prints_a_summary(capsys, workspace: Path, tmp_path: Path, monkeypatch):
    monkeypatch.setenv("MESH_STATE_DIR", str(tmp_path / "state"))
    code, out, _err = run(capsys, "index", "--workspace", str(workspace))
    assert code == 0
    assert "files         66" in out and "parse errors  1" in out and "orphans       26" in out
    assert "parse error: ms-event/src/legacy/broken.ts" in out
    code, out, _ = run(capsys, "index", "--workspace", str(workspace), "--json")
    data = json.loads(out)
    assert code == 0 and data["index"]["reparsed"] == 0 and data["counts"]["job"] == 10
    code, out, _ = run(capsys, "index", "--workspace", str(workspace), "--full", "--json")
    assert json.loads(out)["index"]["reparsed"] == 66


def test_impact_tables_and_json(capsys, workspace: Path, tmp_path: Path, monkeypatch):
    monkeypatch.setenv("MESH_STATE_DIR", str(tmp_path / "state"))
    code, out, _ = run(capsys, "impact", "--workspace", str(workspace), "GEOCODE_EVENT", "--depth", "2")
    assert code == 0
    assert "EventsJobType.GEOCODE_EVENT" in out
    assert "producers (1)" in out and "ms-event/src/modules/event/event.service.ts:14" in out
    assert "consumers (2)" in out and "EventWorker" in out
    assert "follow-ups (3)" in out and "event:job:outbox:success" in out
    code, out, _ = run(capsys, "impact", "--workspace", str(workspace), "events.geocode_event", "--json",
                       "--include-tests")
    data = json.loads(out)
    assert code == 0 and len(data["producers"]) == 2 and any(p["test_only"] for p in data["producers"])


def test_an_unknown_name_exits_2_with_suggestions_in_impact_map_and_verify(
        capsys, workspace: Path, tmp_path: Path, monkeypatch):
    """The same exit code for an unknown name everywhere (2, usage): impact and map exited 1, verify 2."""
    monkeypatch.setenv("MESH_STATE_DIR", str(tmp_path / "state"))
    code, out, err = run(capsys, "impact", "--workspace", str(workspace), "GEOCODE_EVENTS")
    assert code == 2 and "closest names: GEOCODE_EVENT" in err and out == ""
    code, out, err = run(capsys, "map", "--workspace", str(workspace), "GEOCODE_EVENTS")
    assert code == 2 and "matches no" in err and out == ""
    code, out, err = run(capsys, "verify", "--workspace", str(workspace), "GEOCODE_EVENTS")
    assert code == 2 and "GEOCODE_EVENTS" in err


def test_catalogue_orphans(capsys, workspace: Path, tmp_path: Path, monkeypatch):
    monkeypatch.setenv("MESH_STATE_DIR", str(tmp_path / "state"))
    code, out, _ = run(capsys, "catalogue", "--workspace", str(workspace), "--orphans")
    assert code == 0
    assert "handler SyncCalendarHandler not routed by any worker" in out
    assert "archive-queue" in out and "event-queue " not in out
    assert "26 orphan(s)" in out
    code, out, _ = run(capsys, "catalogue", "--workspace", str(workspace), "--kind", "stream", "--json")
    data = json.loads(out)
    assert code == 0 and set(data["counts"]) == {"stream"}


def test_no_workspace_fails_with_exit_2(capsys, tmp_path: Path, monkeypatch):
    monkeypatch.delenv("MESH_WORKSPACE", raising=False)
    monkeypatch.chdir(tmp_path)
    code, _, err = run(capsys, "impact", "X")
    assert code == 2 and "no workspace" in err


def test_cli_subprocess_stdout_is_pure_json(workspace: Path, tmp_path: Path):
    env = {"PYTHONPATH": str(REPO_ROOT), "MESH_STATE_DIR": str(tmp_path / "state"), "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "-m", "server.cli", "catalogue", "--workspace", str(workspace),
                           "--orphans", "--json"], capture_output=True, text=True, env=env, timeout=120, cwd=REPO_ROOT)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["orphans"] == 26
    assert "indexing" not in proc.stdout


class FakeTty:
    def __init__(self) -> None:
        self.text = ""

    def isatty(self) -> bool:
        return True

    def write(self, text: str) -> None:
        self.text += text

    def flush(self) -> None:
        pass


def test_progress_bar_draws_on_a_terminal():
    from tools.mesh_index.commands import ProgressBar

    stream = FakeTty()
    bar = ProgressBar(stream, width=10)
    for done in (1, 5, 10):
        bar(done, 10, "x.ts")
    assert stream.text.endswith("\rindexing [##########] 10/10 files\n")


def test_tables_keep_every_file_and_line_whole_at_60_and_200_columns(workspace: Path, tmp_path: Path):
    """impact / catalogue / verify --all / lint as a person sees them: within COLUMNS, no cell cut (wrapped)."""
    env = {"PYTHONPATH": str(REPO_ROOT), "MESH_STATE_DIR": str(tmp_path / "state"), "PATH": "/usr/bin:/bin",
           "NO_COLOR": "1"}
    commands = {"impact": ["impact", "GEOCODE_EVENT", "--depth", "2"], "catalogue": ["catalogue"],
                "verify": ["verify", "--all"], "lint": ["lint"]}
    for width, names in ((60, list(commands)), (200, ["impact", "verify"])):
        for name, argv in ((n, commands[n]) for n in names):
            proc = subprocess.run([sys.executable, "-m", "server.cli", *argv, "--workspace", str(workspace)],
                                  capture_output=True, text=True, env={**env, "COLUMNS": str(width)}, timeout=120,
                                  cwd=REPO_ROOT)
            out = proc.stdout
            assert proc.returncode in (0, 1), (name, proc.stderr)
            assert max(len(line) for line in out.splitlines()) <= width, (name, width, out)
            assert "…" not in out and "..." not in out.replace("... and", ""), (name, out)
            if name == "impact":
                assert "event.service.ts:14" in out  # a file name and its line are never split
                assert "ms-event/src/modules/event/event.service.ts:14" in "".join(out.split())


def test_a_folder_without_typescript_fails_and_is_left_untouched(tmp_path: Path):
    """A wrong --workspace in CI is not a green check: lint / index / verify --all exit 2 and write no .mesh/."""
    folder = tmp_path / "not-the-repos"
    (folder / "docs").mkdir(parents=True)
    (folder / "docs" / "README.md").write_text("# notes\n", encoding="utf-8")
    (folder / "node_modules" / "x").mkdir(parents=True)
    (folder / "node_modules" / "x" / "index.ts").write_text("export const a = 1;\n", encoding="utf-8")
    env = {"PYTHONPATH": str(REPO_ROOT), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    for argv in (["lint"], ["index"], ["verify", "--all"]):
        proc = subprocess.run([sys.executable, "-m", "server.cli", *argv, "--workspace", str(folder)],
                              capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
        assert proc.returncode == 2, (argv, proc.stdout, proc.stderr)
        assert "holds no TypeScript source" in proc.stderr and proc.stdout == "", argv
        assert sorted(p.name for p in folder.iterdir()) == ["docs", "node_modules"], argv  # no .mesh/
