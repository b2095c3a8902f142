"""Fixtures of the lint tests: private copies of the fixture workspaces and their real index."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.helpers import FIXTURES, copy_workspace
from tools.lint.engine import lint
from tools.lint.model import LintReport
from tools.mesh_index.service import IndexService

LINT_WORKSPACE = FIXTURES / "lint_workspace"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A copy of tests/fixtures/lint_workspace that a test may edit."""
    return copy_workspace(LINT_WORKSPACE, tmp_path / "ws")



@pytest.fixture
def report(workspace: Path, make_index: Callable[[Path], IndexService]) -> LintReport:
    """Every finding of the lint fixture, info included."""
    return lint(make_index(workspace), min_severity="info")
