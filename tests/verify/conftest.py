"""Fixtures of the verify_flow tests: a private copy of the fixture workspace and its real index."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from server.config import Conventions
from tests.helpers import FIXTURES
from tools.mesh_index.service import IndexService

VERIFY_WORKSPACE = FIXTURES / "verify_workspace"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A copy of tests/fixtures/verify_workspace that a test may edit."""
    target = tmp_path / "ws"
    shutil.copytree(VERIFY_WORKSPACE, target, ignore=shutil.ignore_patterns(".mesh"))
    return target


@pytest.fixture
def index(workspace: Path, tmp_path: Path) -> Iterator[IndexService]:
    """The real static index of the copied workspace (cache in the test's temp dir)."""
    service = IndexService(workspace, Conventions(), cache_dir=tmp_path / "cache", stale_check_interval_s=0)
    service.refresh()
    yield service
    service.close()
