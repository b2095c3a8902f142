"""The project's promises to a new user: README's two commands and CI agree."""

from __future__ import annotations

import re

from tests.helpers import REPO_ROOT


def readme_commands() -> list[str]:
    text = (REPO_ROOT / "README.md").read_text()
    head = text.split("---", 1)[0]
    return [line.strip() for line in head.splitlines() if line.startswith("    ")]


def test_readme_starts_with_exactly_two_commands() -> None:
    commands = readme_commands()
    assert len(commands) == 2, commands
    assert commands[0].endswith("mesh-mcp demo")
    assert "pytest" in commands[1]


def test_ci_runs_the_readme_test_command_verbatim() -> None:
    ci = (REPO_ROOT / ".ci" / "run").read_text()
    test_command = readme_commands()[1]
    runnable = [line.strip() for line in ci.splitlines() if line.strip() and not line.strip().startswith("#")]
    assert runnable[-1] == test_command


def test_ci_does_not_mask_the_test_status() -> None:
    ci = (REPO_ROOT / ".ci" / "run").read_text()
    assert "set -euo pipefail" in ci
    assert not re.search(r"pytest[^\n]*\|\|\s*true", ci)
