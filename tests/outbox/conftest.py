"""Fixtures of the runtime diagnosis tests: scratch outbox databases, Redis, and a tool runner."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Any

import psycopg
import pytest

from server.config import Settings
from server.demo.embedded import free_port
from server.runtime import Runtime
from tests.helpers import REPO_ROOT
from tests.streams.conftest import cluster_backend, redis_cluster  # noqa: F401  (the cluster param of r)
from tools.outbox import health, query_outbox
from tools.outbox.model import HealthReport, QueryOutboxResult, TraceReport
from tools.outbox.schema_discovery import SchemaCatalog
from tools.outbox.trace import Tracer

SCHEMA_SQL = (REPO_ROOT / "tools" / "outbox" / "schema.sql").read_text(encoding="utf-8")


def apply_schema(url: str, sql_text: str = SCHEMA_SQL) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql_text)


@pytest.fixture
def make_outbox_db(make_pg_db: Callable[[], str]) -> Callable[[], str]:
    """Factory of scratch service databases holding the project's outbox schema and audit trigger."""

    def make() -> str:
        url = make_pg_db()
        apply_schema(url)
        return url

    return make


@pytest.fixture
def outbox_db(make_outbox_db: Callable[[], str]) -> str:
    return make_outbox_db()


@pytest.fixture
def db(outbox_db: str) -> Iterator[psycopg.Connection]:
    """An autocommit connection to the service database, used the way the services write."""
    with psycopg.connect(outbox_db, autocommit=True) as conn:
        yield conn


@pytest.fixture(params=["machine", "cluster"])
def r(request: pytest.FixtureRequest) -> Any:
    """The Redis a trace test writes into: the machine's (scratch database) or the session's cluster.

    ``outbox_settings`` points the tools at the same one (mode = "cluster" for the cluster).
    """
    if request.param == "cluster":
        backend = request.getfixturevalue("cluster_backend")
        request.node.mesh_redis = backend.redis_config
        return backend.client
    request.node.mesh_redis = {"url": request.getfixturevalue("redis_url")}
    return request.getfixturevalue("redis_client")


@pytest.fixture
def down_dsn() -> str:
    """A DSN on a port where nothing listens."""
    return f"postgresql://postgres@127.0.0.1:{free_port()}/nothing"


class Tools:
    """Calls the plain library functions the MCP adapters call, on one Runtime."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.catalog = SchemaCatalog(runtime.connections, runtime.settings)

    async def query(self, **kwargs: Any) -> QueryOutboxResult:
        kwargs.setdefault("service", "user")
        return await query_outbox.query_outbox(self.runtime.connections, self.runtime.settings, self.catalog,
                                               **kwargs)

    async def health(self, service: str | None = None) -> HealthReport:
        return await health.outbox_health(self.runtime.connections, self.runtime.settings, self.catalog, service)

    async def trace_job(self, job_id: str, service: str | None = "user") -> TraceReport:
        return await Tracer(self.runtime.connections, self.runtime.settings, self.catalog).trace_job(service, job_id)

    async def trace_event(self, event_id: str, service: str | None = "user") -> TraceReport:
        return await Tracer(self.runtime.connections, self.runtime.settings, self.catalog).trace_event(
            service, event_id
        )


@pytest.fixture
def outbox_settings(
    request: pytest.FixtureRequest, make_settings: Callable[..., Settings], outbox_db: str, redis_url: str
) -> Callable[..., Settings]:
    """Settings with service 'user' on the scratch outbox database and the scratch Redis (``r``'s, if used)."""

    def make(**overrides: Any) -> Settings:
        overrides.setdefault("services", {"user": {"postgres": outbox_db}})
        overrides.setdefault("redis", getattr(request.node, "mesh_redis", None) or {"url": redis_url})
        return make_settings(**overrides)

    return make


@pytest.fixture
def tools_for() -> Callable[[Settings], Any]:
    @asynccontextmanager
    async def make(settings: Settings) -> AsyncIterator[Tools]:
        runtime = Runtime(settings)
        try:
            yield Tools(runtime)
        finally:
            await runtime.aclose()

    return make
