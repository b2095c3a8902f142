"""Fixtures of the tracer's promise tests (``test_promise_trace_*.py``): one PostgreSQL database per test
module (each test writes its own rows), the suite's scratch Redis, and tracers built on them.

Imported by name into each test module (``from tests.outbox.trace_fixtures import ...``).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import psycopg
import pytest

from server.demo.embedded import free_port
from server.runtime import Runtime
from tests.conftest import _with_database, as_url
from tests.outbox.conftest import SCHEMA_SQL
from tools.outbox.schema_discovery import SchemaCatalog
from tools.outbox.trace import Tracer


@pytest.fixture(scope="module")
def module_db(pg_admin_url: str) -> Iterator[str]:
    name = f"mesh_t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = as_url(_with_database(pg_admin_url, name))
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(SCHEMA_SQL)
    yield url
    with psycopg.connect(pg_admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def db(module_db: str) -> Iterator[psycopg.Connection]:
    with psycopg.connect(module_db, autocommit=True) as conn:
        yield conn


@pytest.fixture
def r(redis_client):
    return redis_client


@pytest.fixture
async def tracer_for(make_settings, module_db: str, redis_url: str) -> AsyncIterator[Any]:
    runtimes: list[Runtime] = []

    def make(**overrides: Any) -> Tracer:
        overrides.setdefault("services", {"user": {"postgres": module_db}})
        overrides.setdefault("redis", {"url": redis_url})
        runtime = Runtime(make_settings(**overrides))
        runtimes.append(runtime)
        return Tracer(runtime.connections, runtime.settings, SchemaCatalog(runtime.connections, runtime.settings))

    yield make
    for runtime in runtimes:
        await runtime.aclose()


def dead_port_url() -> str:
    return f"redis://127.0.0.1:{free_port()}/0"


def down_pg() -> str:
    return f"postgresql://postgres@127.0.0.1:{free_port()}/nothing"
