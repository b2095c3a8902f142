"""Skills as teams write them: front-matter shapes, and a French runbook of the team's own shape.

- front matters seen in the wild (a BOM, CRLF line ends, the Agent Skills ``metadata`` /
  ``allowed-tools`` / ``license`` keys, ``tags`` as one comma-separated string, no ``name``, a
  ``...`` end marker) are all read, listed and kept;
- tests/fixtures/realistic_skills holds a runbook in the shape of the team's (the seeds: French
  prose, flow-style front matter with sources, verified digests, generated and mesh_keys; SQL,
  shell and diagram blocks, library calls in backticks) laid over a copy of
  tests/fixtures/realistic_workspace. It names one stale table (``event_outbox``): that is the
  only name flagged; every clean passage (real tables and columns, placeholders, names cut short
  with '...', library functions the workspace does not call) gives nothing.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from resources.workspace_skills import discover_workspace_skills
from server.config import load_settings
from tests.helpers import FIXTURES, in_process_client
from tools.skills.check import check_skills

pytestmark = pytest.mark.anyio

RUNBOOK = "skill://workspace/meta/volontariapp-trace-async-flow"
RUNBOOK_PATH = "meta/.agents/skills/volontariapp-trace-async-flow/SKILL.md"

SHAPES = {
    "bom/.agents/skills/with-bom/SKILL.md": (
        "\ufeff---\nname: with-bom\ndescription: Saved by an editor with a BOM.\n---\nb\n"
    ),
    "crlf/.claude/skills/crlf/SKILL.md": "---\r\nname: crlf\r\ndescription: Windows line ends.\r\n---\r\nbody\r\n",
    "spec/.agents/skills/spec/SKILL.md": (
        "---\nname: spec-shaped\ndescription: The Agent Skills specification's optional keys.\nlicense: MIT\n"
        "allowed-tools: Bash(git:*) Read\nmetadata:\n  author: team\n  version: \"1.2\"\n---\nbody\n"
    ),
    "tags/.agents/skills/tags/SKILL.md": "---\nname: tags\ndescription: d\ntags: outbox, redis, dlq\n---\nb\n",
    "noname/.claude/skills/No Name Here/SKILL.md": "---\ndescription: Only a description.\n...\nbody\n",
}


def test_front_matter_shapes_from_the_wild(tmp_path: Path) -> None:
    for rel, text in SHAPES.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True)
        path.write_bytes(text.encode("utf-8"))
    skills = {s.rel_path.split("/")[0]: s for s in discover_workspace_skills(tmp_path).skills}
    assert all(s.error is None for s in skills.values()), {k: s.error for k, s in skills.items()}
    assert skills["bom"].name == "with-bom" and skills["bom"].description == "Saved by an editor with a BOM."
    assert skills["crlf"].name == "crlf" and skills["crlf"].body.strip() == "body"
    spec = skills["spec"]
    assert spec.front_matter["metadata"] == {"author": "team", "version": "1.2"}
    assert spec.front_matter["allowed-tools"] == "Bash(git:*) Read" and spec.front_matter["license"] == "MIT"
    assert skills["tags"].tags == ["outbox", "redis", "dlq"]
    assert skills["noname"].name == "No Name Here", "no name: the folder's"
    assert skills["noname"].uri == "skill://workspace/noname/no-name-here"
    assert skills["noname"].description == "Only a description."


@pytest.fixture
def realistic(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    shutil.copytree(FIXTURES / "realistic_workspace", root)
    shutil.copytree(FIXTURES / "realistic_skills", root, dirs_exist_ok=True)
    return root


async def test_the_teams_runbook_is_listed_read_and_only_its_stale_table_flagged(realistic: Path,
                                                                               tmp_path: Path) -> None:
    settings = load_settings(workspace=realistic, environ={}, overrides={"state_dir": str(tmp_path / "state")})
    async with in_process_client(settings) as client:
        listed = {str(r.uri): r for r in (await client.list_resources()).resources}
        assert listed[RUNBOOK].title == "Trace Async Flow"
        assert (listed[RUNBOOK].description or "").startswith("Diagnostiquer un flux asynchrone")
        read = await client.read_resource(RUNBOOK)
        assert read.contents[0].text == (realistic / RUNBOOK_PATH).read_text(encoding="utf-8")
        result = await client.call_tool("check_skills", {"name": "volontariapp-trace-async-flow"})
    assert not result.is_error, result.content[0].text
    findings = result.structured_content["skills"][0]["findings"]
    about_the_body = [f for f in findings if f["code"] not in ("source_unverified", "source_changed")]
    assert [(f["code"], f["name"], f["line"], f["suggestion"]) for f in about_the_body] == [
        ("unknown_name", "event_outbox", 28, "event_queue")
    ]
    assert about_the_body[0]["severity"] == "error"
    assert "event_outbox" in result.content[0].text and "did you mean event_queue?" in result.content[0].text


def test_the_runbook_check_is_the_same_without_a_server(realistic: Path, tmp_path: Path) -> None:
    settings = load_settings(workspace=realistic, environ={}, overrides={"state_dir": str(tmp_path / "state")})
    report = check_skills(settings)
    names = [f.name for c in report.skills for f in c.findings if f.code == "unknown_name"]
    assert names == ["event_outbox"]
    assert report.errors == 1
