"""Fixtures of the flow picture tests: private copies of the fixture workspaces and their index."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from server.config import Conventions
from tests import helpers
from tests.helpers import FIXTURES
from tools.mesh_index.service import IndexService


def copy_workspace(name: str, target: Path) -> Path:
    return helpers.copy_workspace(FIXTURES / name, target)



@pytest.fixture(scope="module")
def fixture_index(tmp_path_factory) -> Iterator[IndexService]:
    """The index of a copy of tests/fixtures/workspace (read-only, built once per module)."""
    root = tmp_path_factory.mktemp("flow")
    svc = IndexService(copy_workspace("workspace", root / "ws"), Conventions(), root / "state")
    svc.refresh()
    yield svc
    svc.close()


@pytest.fixture(scope="module")
def realistic_index(tmp_path_factory) -> Iterator[IndexService]:
    """The index of a copy of tests/fixtures/realistic_workspace (read-only, built once per module)."""
    root = tmp_path_factory.mktemp("flow-real")
    svc = IndexService(copy_workspace("realistic_workspace", root / "ws"), Conventions(), root / "state")
    svc.refresh()
    yield svc
    svc.close()
