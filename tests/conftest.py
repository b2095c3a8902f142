"""Shared fixtures: real PostgreSQL and Redis, scratch per test, and real MCP clients.

- ``pg_url``: a scratch database created for the test and dropped after it.
- ``redis_url``: a Redis logical database that was empty, flushed after the test.
- ``mesh_config``: writes a ``mesh.toml`` for a test and returns its path.
- ``make_index``: builds the real index of a workspace folder (state under the test's tmp_path), closed after.
- ``mcp_session`` / ``stdio_session``: in-process and subprocess MCP clients.

Services come from ``MESH_TEST_POSTGRES_URL`` / ``MESH_TEST_REDIS_URL``, defaulting to
the local servers on 127.0.0.1. When neither variable is set and nothing answers on the
default port, an embedded server from the ``demo`` extra is started for the session, so
the suite also passes on a machine with no services at all.
"""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import redis

from server.config import Settings, load_settings
from server.demo.embedded import EmbeddedServices, port_answers
from tests.helpers import render_toml
from tests.scratch_redis import claim_database

# every `mesh-mcp serve` a test starts serves in-process unless the test asks for the shared server
# (tests/foundation/test_shared_serve.py): a shared server would outlive the test by its idle time
os.environ.setdefault("MESH_STANDALONE", "1")
# the default state folder is per-user ($XDG_STATE_HOME/mesh-mcp/...): the suite never writes into the real home
os.environ["XDG_STATE_HOME"] = tempfile.mkdtemp(prefix="mesh-test-state-")

DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/postgres"
DEFAULT_REDIS = "redis://127.0.0.1:6379/0"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


_embedded: EmbeddedServices | None = None


def _embedded_services() -> EmbeddedServices:
    global _embedded
    if _embedded is None:
        _embedded = EmbeddedServices()
    return _embedded


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _embedded is not None:
        _embedded.stop()


@pytest.fixture(scope="session")
def pg_admin_url() -> str:
    """URL of a database where the suite may CREATE/DROP DATABASE."""
    url = os.environ.get("MESH_TEST_POSTGRES_URL")
    if url:
        return url
    if port_answers("127.0.0.1", 5432):
        return DEFAULT_PG
    return _embedded_services().start_postgres()


@pytest.fixture(scope="session")
def redis_base_url() -> str:
    url = os.environ.get("MESH_TEST_REDIS_URL")
    if url:
        return url
    if port_answers("127.0.0.1", 6379):
        return DEFAULT_REDIS
    return _embedded_services().start_redis()


def _with_database(url: str, dbname: str) -> str:
    info = psycopg.conninfo.conninfo_to_dict(url)
    info["dbname"] = dbname
    return psycopg.conninfo.make_conninfo(**info)


def as_url(conninfo: str) -> str:
    """A key=value conninfo as a postgresql:// URL (what mesh.toml documents)."""
    info = psycopg.conninfo.conninfo_to_dict(conninfo)
    user = info.get("user", "postgres")
    pw = f":{info['password']}" if info.get("password") else ""
    host = info.get("host", "127.0.0.1")
    port = info.get("port", "5432")
    db = info.get("dbname", "postgres")
    if host.startswith("/"):
        return f"postgresql://{user}{pw}@/{db}?host={host}&port={port}"
    return f"postgresql://{user}{pw}@{host}:{port}/{db}"


@pytest.fixture
def make_pg_db(pg_admin_url: str) -> Iterator[Callable[[], str]]:
    """Factory of scratch databases (several services per test); all dropped afterwards."""
    created: list[str] = []

    def make() -> str:
        name = f"mesh_t_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(pg_admin_url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        created.append(name)
        return as_url(_with_database(pg_admin_url, name))

    yield make
    with psycopg.connect(pg_admin_url, autocommit=True) as conn:
        for name in created:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def pg_url(make_pg_db: Callable[[], str]) -> str:
    """A scratch PostgreSQL database for this test only."""
    return make_pg_db()


@pytest.fixture
def redis_url(redis_base_url: str) -> Iterator[str]:
    """A Redis logical database (15 down to 1) that was empty, claimed for this test, flushed after.

    The claim is a short-lived lock key in the base database naming this process, so concurrent
    test runs on one Redis never share a database, a database holding keys is never touched, and
    a claim left by a killed test process is taken over (tests/scratch_redis.py).
    """
    yield from claim_database(redis_base_url)


@pytest.fixture
def redis_client(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


@pytest.fixture
def mesh_config(tmp_path: Path) -> Callable[..., Path]:
    """Write the user's mesh.toml (from a dict) into a temp dir beside ``tmp_path``, never inside it: tests use
    ``tmp_path`` as their workspace, and a config file inside the workspace may hold [conventions] only."""
    folder = tmp_path.parent / f"{tmp_path.name}-config"
    folder.mkdir(exist_ok=True)

    def write(data: dict[str, Any], name: str = "mesh.toml") -> Path:
        path = folder / name
        path.write_text(render_toml(data), encoding="utf-8")
        return path

    return write


@pytest.fixture
def make_settings(tmp_path: Path) -> Callable[..., Settings]:
    """Settings built like the CLI builds them (through load_settings), state in tmp_path."""

    def make(**overrides: Any) -> Settings:
        overrides.setdefault("state_dir", str(tmp_path / "state"))
        return load_settings(environ={}, overrides=overrides)

    return make


@pytest.fixture
def make_index(tmp_path: Path) -> Iterator[Callable[[Path], Any]]:
    """``make(ws)`` builds and refreshes a real ``IndexService`` of ``ws``; every one is closed afterwards.

    Each index has its own state folder and checks freshness on every call, so a test that edits the
    workspace sees its edit at the next query."""
    from server.config import Conventions
    from tools.mesh_index.service import IndexService

    made: list[IndexService] = []

    def make(ws: Path) -> IndexService:
        service = IndexService(ws, Conventions(), cache_dir=tmp_path / f"index-state-{len(made)}",
                               stale_check_interval_s=0)
        service.refresh()
        made.append(service)
        return service

    yield make
    for service in made:
        service.close()
