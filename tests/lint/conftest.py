"""Fixtures of the lint tests: private copies of the fixture workspaces and their real index."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from server.config import Conventions
from tests.helpers import FIXTURES
from tools.lint.engine import lint
from tools.lint.model import LintReport
from tools.mesh_index.service import IndexService

LINT_WORKSPACE = FIXTURES / "lint_workspace"


def copy_workspace(source: Path, target: Path) -> Path:
    shutil.copytree(source, target, ignore=shutil.ignore_patterns(".mesh"))
    return target


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A copy of tests/fixtures/lint_workspace that a test may edit."""
    return copy_workspace(LINT_WORKSPACE, tmp_path / "ws")


@pytest.fixture
def make_index(tmp_path: Path) -> Iterator[Callable[[Path], IndexService]]:
    made: list[IndexService] = []

    def make(root: Path) -> IndexService:
        service = IndexService(root, Conventions(), cache_dir=tmp_path / f"cache{len(made)}", stale_check_interval_s=0)
        service.refresh()
        made.append(service)
        return service

    yield make
    for service in made:
        service.close()


@pytest.fixture
def report(workspace: Path, make_index: Callable[[Path], IndexService]) -> LintReport:
    """Every finding of the lint fixture, info included."""
    return lint(make_index(workspace), min_severity="info")
