"""Fixtures of the demo tests: the demo's broken scenario seeded on the suite's services."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from server.demo.command import DemoRun, prepare
from server.demo.services import DEMO_POSTGRES_ENV, DEMO_REDIS_ENV


@pytest.fixture
def demo_run(pg_admin_url: str, redis_url: str, tmp_path: Path) -> Iterator[DemoRun]:
    """The demo's broken scenario seeded in a scratch database and an empty Redis database."""
    run = prepare(tmp_path / "demo", {DEMO_POSTGRES_ENV: pg_admin_url, DEMO_REDIS_ENV: redis_url}, remediation=True)
    try:
        yield run
    finally:
        run.services.close()
