"""``mesh-mcp map``: the picture on stdout (a valid diagram, comments included), ``--json``, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

from server.cli import main
from tests.flow_map.conftest import copy_workspace
from tests.flow_map.mermaid_parser import parse_ok


def test_map_prints_a_diagram_with_its_trouble_as_comments(tmp_path: Path, capsys, mesh_config, redis_url):
    ws = copy_workspace("workspace", tmp_path / "ws")
    config = mesh_config({"workspace": str(ws), "state_dir": str(tmp_path / "state"), "redis": {"url": redis_url}})
    assert main(["map", "--config", str(config), "FALLBACK_CREATE_EVENT", "--depth", "2"]) == 0
    plain = capsys.readouterr().out
    assert plain.startswith("flowchart LR\n")
    assert "%% trouble: event event:job:outbox:failure" in plain
    assert main(["map", "--config", str(config), "GEOCODE_EVENT", "--live", "--direction", "TB"]) == 0
    live = capsys.readouterr().out
    assert "%% live unknown" in live and "no service database configured" in live
    assert main(["map", "--config", str(config), "GEOCODE_EVENT", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["target"] == "GEOCODE_EVENT" and data["depth"] == 3 and data["nodes"]
    parse_ok([plain, live, data["mermaid"]])
    assert main(["map", "--config", str(config), "GEOCODE_EVENTS"]) == 2  # an unknown name: 2, as impact and verify
    said = capsys.readouterr().err
    assert "matches no" in said and "JobMessagingType.GEOCODE_EVENT" in said  # the closest names
    assert main(["map", "--config", str(config), "GEOCODE_EVENT", "--depth", "7"]) == 2
    assert "depth must be" in capsys.readouterr().err
