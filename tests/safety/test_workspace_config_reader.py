"""The workspace's own mesh.toml is read like every workspace file: through the guarded reader."""

from __future__ import annotations

from pathlib import Path

import pytest

from server.config import ConfigError, load_settings


def test_a_workspace_mesh_toml_linked_out_of_the_workspace_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside.toml"
    outside.write_text('[conventions.tables]\njobs_outbox = "stolen"\n', encoding="utf-8")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "mesh.toml").symlink_to(outside)
    with pytest.raises(ConfigError) as raised:
        load_settings(workspace=ws, environ={})
    assert "mesh.toml" in str(raised.value) and "outside" in str(raised.value)


def test_an_oversized_workspace_mesh_toml_is_refused_without_reading_it_whole(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "mesh.toml").write_text("# padding\n" * 200_000, encoding="utf-8")  # 2 MB of comments
    with pytest.raises(ConfigError) as raised:
        load_settings(workspace=ws, environ={})
    assert "mesh.toml" in str(raised.value)


def test_a_workspace_mesh_toml_inside_the_workspace_is_still_read(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "conf").mkdir(parents=True)
    (ws / "conf" / "real.toml").write_text('[conventions.tables]\njobs_outbox = "jobs"\n', encoding="utf-8")
    (ws / "mesh.toml").symlink_to(ws / "conf" / "real.toml")
    assert load_settings(workspace=ws, environ={}).conventions.tables.jobs_outbox == "jobs"
