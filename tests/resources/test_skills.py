"""Skill documents: front matter parsing and validation, and the bundled skills."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from resources.skills import SkillError, bundled_skills_dir, load_skills, parse_skill

EXPECTED_SKILLS = {"trace-async-flow", "implement-async-job-flow", "remediate-async-failures", "using-mesh-mcp"}
CONTRACT_TOOLS = [
    "analyze_impact", "list_catalogue", "verify_flow", "query_outbox", "outbox_health", "trace_job", "trace_event",
    "inspect_stream", "list_pending", "dlq_list", "inspect_queue", "propose_remediation", "apply_remediation",
]

GOOD = """---
name: sample-skill
description: "A sample: with a colon in quotes"
tags: [alpha, beta-2]
---
# Sample

Body text.
"""


def test_parse_valid_skill_inline_list() -> None:
    skill = parse_skill(GOOD, origin="sample-skill.md", expected_name="sample-skill")
    assert skill.name == "sample-skill"
    assert skill.description == "A sample: with a colon in quotes"
    assert skill.tags == ("alpha", "beta-2")
    assert skill.title == "Sample"
    assert skill.body.startswith("# Sample")
    assert skill.uri == "skill://sample-skill"
    assert skill.text == GOOD


def test_parse_block_list_tags() -> None:
    text = "---\nname: x\ndescription: d\ntags:\n  - one\n  - two\n---\nbody\n"
    assert parse_skill(text, origin="x.md").tags == ("one", "two")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("no front matter\n", "must start with a '---'"),
        ("---\nname: x\n", "not closed"),
        ("---\nname: x\ndescription: d\n---\nbody", "misses tags"),
        ("---\nname: x\ndescription: d\ntags: [a]\nowner: me\n---\nbody", "unknown front matter key(s) owner"),
        ("---\nname: Not_Kebab\ndescription: d\ntags: [a]\n---\nbody", "must be kebab-case"),
        ("---\nname: x\ndescription: \"\"\ntags: [a]\n---\nbody", "description must be"),
        ("---\nname: x\ndescription: d\ntags: []\n---\nbody", "non-empty list"),
        ("---\nname: x\ndescription: d\ntags: [Bad Tag]\n---\nbody", "kebab-case"),
        ("---\nname: x\ndescription: d\ntags: [a, a]\n---\nbody", "duplicate tags"),
        ("---\nname: x\ndescription: d\ntags: [a]\n---\n\n", "no body"),
        ("---\nname: x\nname: y\ndescription: d\ntags: [a]\n---\nbody", "appears twice"),
        ("---\n- stray\nname: x\n---\nbody", "outside of a list key"),
        ("---\njust words\n---\nbody", "expected 'key: value'"),
    ],
)
def test_parse_rejects_malformed(text: str, message: str) -> None:
    with pytest.raises(SkillError) as info:
        parse_skill(text, origin="x.md")
    assert message in str(info.value)
    assert "x.md" in str(info.value)


def test_name_must_match_file_name() -> None:
    with pytest.raises(SkillError, match=r"differs from the file name 'other\.md'"):
        parse_skill(GOOD, origin="other.md", expected_name="other")


def test_bundled_skills_are_valid_and_unique() -> None:
    skills = load_skills(strict=True)
    names = [s.name for s in skills]
    assert set(names) == EXPECTED_SKILLS
    assert len(names) == len(set(names))
    for skill in skills:
        assert skill.path is not None and skill.path.stem == skill.name
        assert 20 <= len(skill.description) <= 400
        assert skill.body.lstrip().startswith("# ")


def test_guide_names_every_contract_tool_in_runbook_order() -> None:
    guide = next(s for s in load_skills() if s.name == "using-mesh-mcp").body
    for tool in CONTRACT_TOOLS:
        assert f"{tool}(" in guide, tool
    order = ["**`analyze_impact(", "**`outbox_health(", "**`inspect_stream(", "**`propose_remediation(",
             "mesh-mcp approve <plan_id>", 'apply_remediation(plan_id="']
    positions = [guide.index(marker) for marker in order]
    assert positions == sorted(positions)


def prose_lines(markdown: str) -> list[str]:
    """Lines outside fenced code blocks (code samples show the target system's API, not prose)."""
    out, fenced = [], False
    for line in markdown.splitlines():
        if line.strip().startswith("```"):
            fenced = not fenced
        elif not fenced:
            out.append(line)
    return out


def test_skills_are_in_english() -> None:
    french_markers = [" le ", " la ", " les ", " des ", " une ", " est ", " pas ", " dans "]
    for skill in load_skills():
        lowered = f" {skill.body.lower()} "
        assert sum(lowered.count(marker) for marker in french_markers) < 5, skill.name


def test_skills_copy_no_line_of_the_seed_runbooks() -> None:
    seeds = Path(os.environ.get("MESH_TEST_SEEDS", "/work/shared/seeds"))
    if not seeds.is_dir():
        pytest.skip(f"the seed runbooks are not here ({seeds}; set MESH_TEST_SEEDS)")
    seed_lines = {
        line.strip() for path in seeds.glob("*.txt") for line in path.read_text(encoding="utf-8").splitlines()
        if len(line.strip()) > 60
    }
    for skill in load_skills():
        copied = [line for line in prose_lines(skill.body) if line.strip() in seed_lines]
        assert not copied, (skill.name, copied[:3])


def test_lenient_loading_skips_bad_files_but_not_duplicates(tmp_path: Path) -> None:
    (tmp_path / "sample-skill.md").write_text(GOOD, encoding="utf-8")
    (tmp_path / "broken.md").write_text("no front matter", encoding="utf-8")
    assert [s.name for s in load_skills(tmp_path, strict=False)] == ["sample-skill"]
    with pytest.raises(SkillError, match=r"broken\.md"):
        load_skills(tmp_path, strict=True)


def test_bundled_dir_is_the_package() -> None:
    assert (bundled_skills_dir() / "__init__.py").is_file()
