"""Fixtures of the trace_request tests: three scratch service databases and a scratch Redis."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import psycopg
import pytest
from psycopg import sql

from server.config import Settings
from server.runtime import Runtime
from tests.conftest import _with_database, as_url
from tests.outbox.conftest import apply_schema
from tools.outbox.mcp_tools import catalog_of
from tools.trace_request.model import RequestReport
from tools.trace_request.service import trace_request

OLD_SCHEMA = """
ALTER TABLE event_queue DROP COLUMN traceparent, DROP COLUMN correlation_id;
ALTER TABLE jobs_outbox DROP COLUMN traceparent;
"""


SERVICES = ("event", "notification", "social")

BASELINE_INDEXES = "SELECT indexname FROM pg_indexes WHERE schemaname = 'public'"


@contextmanager
def outbox_database(pg_admin_url: str, *extra_sql: str) -> Iterator[str]:
    """A scratch database with the outbox schema, then ``extra_sql`` applied; dropped afterwards."""
    dbname = f"mesh_t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{dbname}"')
    try:
        url = as_url(_with_database(pg_admin_url, dbname))
        apply_schema(url)
        for text in extra_sql:
            apply_schema(url, text)
        yield url
    finally:
        with psycopg.connect(pg_admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')


@pytest.fixture(scope="module")
def service_dbs(pg_admin_url: str) -> Iterator[dict[str, tuple[str, frozenset[str]]]]:
    """The three service databases, created once per test module: ``name -> (url, indexes of the schema)``.

    Creating and dropping three databases per test took about 3 s of a 3.5 s test under load; each test
    now gets them emptied instead (``dbs``), which is what the mutation bench runs once per mutant."""
    out: dict[str, tuple[str, frozenset[str]]] = {}
    with ExitStack() as stack:
        for name in SERVICES:
            url = stack.enter_context(outbox_database(pg_admin_url, *((OLD_SCHEMA,) if name == "social" else ())))
            with psycopg.connect(url, autocommit=True) as conn:
                indexes = frozenset(row[0] for row in conn.execute(BASELINE_INDEXES))
            out[name] = (url, indexes)
        yield out


@pytest.fixture
def dbs(service_dbs: dict[str, tuple[str, frozenset[str]]]) -> Iterator[dict[str, tuple[str, psycopg.Connection]]]:
    """Services event and notification (current schema) and social (older schema: no traceparent), as the
    schema left them: every table emptied and every index a test added dropped, before the test."""
    out: dict[str, tuple[str, psycopg.Connection]] = {}
    for name, (url, indexes) in service_dbs.items():
        conn = psycopg.connect(url, autocommit=True)
        added = [row[0] for row in conn.execute(BASELINE_INDEXES) if row[0] not in indexes]
        for index in added:
            conn.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(sql.Identifier(index)))
        tables = [row[0] for row in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")]
        if tables:
            conn.execute(sql.SQL("TRUNCATE {} RESTART IDENTITY CASCADE").format(
                sql.SQL(", ").join(sql.Identifier(t) for t in tables)))
        out[name] = (url, conn)
    yield out
    for _, conn in out.values():
        conn.close()


@pytest.fixture
def saga_settings(make_settings: Callable[..., Settings], dbs: dict, redis_url: str) -> Callable[..., Settings]:
    def make(**overrides: Any) -> Settings:
        overrides.setdefault("services", {name: {"postgres": url} for name, (url, _) in dbs.items()})
        overrides.setdefault("redis", {"url": redis_url})
        return make_settings(**overrides)

    return make


@pytest.fixture
def run() -> Callable[..., Any]:
    async def go(settings: Settings, **kwargs: Any) -> RequestReport:
        runtime = Runtime(settings)
        try:
            return await trace_request(runtime.connections, settings, catalog_of(runtime), **kwargs)
        finally:
            await runtime.aclose()

    return go
