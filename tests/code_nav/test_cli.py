"""mesh-mcp search, dependents, grpc and docs: tables, --json, exit status."""

from __future__ import annotations

import json
from pathlib import Path

from server.cli import main


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_navigation_commands(capsys, nav_root: Path, tmp_path: Path, monkeypatch):
    monkeypatch.setenv("MESH_STATE_DIR", str(tmp_path / "state"))
    ws = str(nav_root)
    code, out, _ = run(capsys, "search", "EventsGatewayService", "--workspace", ws)
    assert code == 0 and "api-gateway/src/events/events.gateway.service.ts:6" in out and "signature" in out
    code, out, _ = run(capsys, "search", "EventReply", "--workspace", ws, "--json")
    assert code == 0 and json.loads(out)["hits"][0]["kind"] == "interface"
    code, out, _ = run(capsys, "search", "zzqqxx", "--workspace", ws)
    assert code == 1
    code, out, _ = run(capsys, "dependents", "@volontariapp/contracts-nest", "--workspace", ws)
    assert code == 0 and "~1.4.2" in out and "NO" in out
    code, out, _ = run(capsys, "dependents", "@volontariapp/contracts-nest", "--workspace", ws, "--granularity",
                       "package", "--json")
    assert [p["package"] for p in json.loads(out)["packages"]] == ["api-gateway", "ms-notification"]
    code, out, _ = run(capsys, "grpc", "EventService.CreateEvent", "--workspace", ws)
    assert code == 0 and "EventCommandController.createEvent" in out and "writes fallback" in out
    code, out, _ = run(capsys, "grpc", "EventService", "--workspace", ws, "--base=HEAD..x")
    assert code == 2 and "not a git revision" in _
    code, out, _ = run(capsys, "docs", "fallback", "--workspace", ws, "--max-sections", "1")
    assert code == 0 and "<<< quoted workspace text" in out
    code, out, _ = run(capsys, "docs", "fallback", "--workspace", ws, "--json")
    assert len(json.loads(out)["sections"]) == 2  # the two sections that mention it, of three
