"""Fixtures of the static index tests: a private copy of the fixture workspace and its service."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from server.config import Conventions
from tests.helpers import FIXTURES
from tools.mesh_index.service import IndexService

FIXTURE_WORKSPACE = FIXTURES / "workspace"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A copy of tests/fixtures/workspace that a test may modify."""
    target = tmp_path / "ws"
    shutil.copytree(FIXTURE_WORKSPACE, target, ignore=shutil.ignore_patterns(".mesh"))
    return target


@pytest.fixture
def make_service(tmp_path: Path):
    """Factory of IndexService instances sharing one cache directory (a new instance = a new process)."""
    made: list[IndexService] = []

    def make(ws: Path, **kwargs) -> IndexService:
        kwargs.setdefault("cache_dir", tmp_path / "state")
        svc = IndexService(ws, kwargs.pop("conventions", Conventions()), **kwargs)
        made.append(svc)
        return svc

    yield make
    for svc in made:
        svc.close()


@pytest.fixture
def service(workspace: Path, make_service) -> Iterator[IndexService]:
    svc = make_service(workspace)
    svc.refresh()
    yield svc


@pytest.fixture(scope="module")
def shared_service(tmp_path_factory) -> Iterator[IndexService]:
    """One read-only index of the fixture workspace for query tests (built once per module)."""
    root = tmp_path_factory.mktemp("shared")
    ws = root / "ws"
    shutil.copytree(FIXTURE_WORKSPACE, ws, ignore=shutil.ignore_patterns(".mesh"))
    svc = IndexService(ws, Conventions(), root / "state")
    svc.refresh()
    yield svc
    svc.close()


def where(sites) -> set[tuple[str, str, str | None]]:
    """(kind, file:line, value) of sites, for exact set comparisons."""
    return {(s.kind, f"{s.file}:{s.line}", s.value) for s in sites}
