"""Fixtures of the trace_request tests: three scratch service databases and a scratch Redis."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

from server.config import Settings
from server.runtime import Runtime
from tests.outbox.conftest import apply_schema
from tools.outbox.mcp_tools import catalog_of
from tools.trace_request.model import RequestReport
from tools.trace_request.service import trace_request

OLD_SCHEMA = """
ALTER TABLE event_queue DROP COLUMN traceparent, DROP COLUMN correlation_id;
ALTER TABLE jobs_outbox DROP COLUMN traceparent;
"""


@pytest.fixture
def dbs(make_pg_db: Callable[[], str]) -> Iterator[dict[str, tuple[str, psycopg.Connection]]]:
    """Services event and notification (current schema) and social (older schema: no traceparent)."""
    out: dict[str, tuple[str, psycopg.Connection]] = {}
    for name in ("event", "notification", "social"):
        url = make_pg_db()
        apply_schema(url)
        if name == "social":
            apply_schema(url, OLD_SCHEMA)
        out[name] = (url, psycopg.connect(url, autocommit=True))
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
