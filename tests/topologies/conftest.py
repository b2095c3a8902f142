"""Fixtures of the topology tests: the session's Redis Cluster (shared with the stream tests),
a Sentinel, a TLS-only Redis and PgBouncer, each started once per session on loopback and
stopped at the end (see tests/topologies/servers.py)."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from tests.remediation.conftest import outbox_db
from tests.streams.conftest import cluster_backend, machine, redis62, redis_cluster, settings_for
from tests.topologies.servers import (
    Cluster,
    PgBouncer,
    Sentinel,
    TlsRedis,
    start_cluster,
    start_pgbouncer,
    start_sentinel,
    start_tls_redis,
)

__all__ = ["cluster_backend", "machine", "outbox_db", "redis62", "redis_cluster", "settings_for"]


@pytest.fixture(scope="session")
def sentinel() -> Iterator[Sentinel]:
    server = start_sentinel()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def tls_redis() -> Iterator[TlsRedis]:
    server = start_tls_redis()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def pgbouncer(pg_admin_url: str) -> Iterator[PgBouncer]:
    info = psycopg.conninfo.conninfo_to_dict(pg_admin_url)
    host = str(info.get("host") or "127.0.0.1")
    if host.startswith("/"):
        pytest.skip("the test PostgreSQL listens on a unix socket only: PgBouncer needs its TCP port")
    server = start_pgbouncer(host, int(info.get("port") or 5432))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def replicated_cluster() -> Iterator[Cluster]:
    """Three primaries with one replica each (the replica-read tests only)."""
    cluster = start_cluster(replicas=1)
    yield cluster
    cluster.stop()
