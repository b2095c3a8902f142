"""The code-navigation fixture: the realistic workspace plus ``nav_overlay`` (a proto contract package with
barrels and re-exports, an api-gateway with HTTP controllers and gRPC clients, a service pinned to an
older contract, @GrpcMethod handlers in PascalCase and camelCase, docs), copied once per module."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from server.config import Conventions, load_settings
from tests.helpers import FIXTURES, copy_workspace


def build_nav_workspace(target: Path) -> Path:
    copy_workspace(FIXTURES / "realistic_workspace", target)
    shutil.copytree(FIXTURES / "nav_overlay", target, dirs_exist_ok=True)
    return target


@pytest.fixture(scope="module")
def nav_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_nav_workspace(tmp_path_factory.mktemp("nav") / "ws")


@pytest.fixture(scope="module")
def nav_service(nav_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator:
    from tools.mesh_index.service import IndexService

    service = IndexService(nav_root, Conventions(), cache_dir=tmp_path_factory.mktemp("nav-state"))
    service.refresh()
    yield service
    service.close()


@pytest.fixture(scope="module")
def nav_settings(nav_root: Path, tmp_path_factory: pytest.TempPathFactory):
    return load_settings(environ={}, overrides={"workspace": str(nav_root),
                                                "state_dir": str(tmp_path_factory.mktemp("nav-mcp-state"))})
