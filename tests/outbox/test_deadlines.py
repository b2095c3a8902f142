"""Client-side deadlines: a frozen network gives a tool error naming the service, in time.

A loopback TCP proxy (tests/tcp_proxy.py, on a free port) sits between mesh-mcp and the
real PostgreSQL (or Redis) and is frozen mid-session: the pooled connection's peer stops
answering, which ``statement_timeout`` cannot help with. The read must come back within
the deadline (statement timeout + margin) as a tool error naming the service, the other
service must keep answering, and the stalled one must answer again once the network is back.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

from server.errors import ServiceUnavailable
from tests.helpers import in_process_client
from tests.outbox import sim
from tests.tcp_proxy import FreezingProxy

pytestmark = pytest.mark.anyio

TIMEOUT_MS = 400
MARGIN_MS = 600
DEADLINE_S = (TIMEOUT_MS + MARGIN_MS) / 1000


def through(url: str, port: int) -> str:
    parts = urlsplit(url)
    user = parts.netloc.rpartition("@")[0]
    return urlunsplit(parts._replace(netloc=f"{user}@127.0.0.1:{port}"))


@pytest.fixture
def pg_proxy(outbox_db: str) -> Iterator[FreezingProxy]:
    target = urlsplit(outbox_db)
    proxy = FreezingProxy(target.hostname or "127.0.0.1", target.port or 5432)
    yield proxy
    proxy.close()


def deadline_settings(outbox_settings, user_dsn: str, other_dsn: str):
    return outbox_settings(
        services={"user": {"postgres": user_dsn}, "event": {"postgres": other_dsn}},
        limits={"statement_timeout_ms": TIMEOUT_MS, "sql_deadline_margin_ms": MARGIN_MS, "connect_timeout_s": 1},
    )


async def test_frozen_pooled_connection_answers_within_the_deadline(
    db, outbox_db, make_outbox_db, pg_proxy, outbox_settings, tools_for
) -> None:
    job_id = sim.insert_job(db)
    other = make_outbox_db()
    with psycopg.connect(other, autocommit=True) as conn:
        other_job = sim.insert_job(conn)
    settings = deadline_settings(outbox_settings, through(outbox_db, pg_proxy.port), other)
    async with tools_for(settings) as tools:
        first = await tools.query(table="jobs_outbox", service="user")
        assert [r.id for r in first.rows] == [job_id]  # the connection is now pooled
        pooled = tools.runtime.connections._idle["user"][0]
        assert pooled.info.get_parameters().get("keepalives") == "1"  # TCP keepalives are on

        pg_proxy.freeze()
        started = time.monotonic()
        with pytest.raises(ServiceUnavailable) as err:
            await tools.query(table="jobs_outbox", service="user")
        elapsed = time.monotonic() - started
        assert elapsed < DEADLINE_S + 1.5, elapsed
        message = str(err.value)
        assert "service 'user'" in message and "deadline of 1000 ms" in message
        assert "check the network" in message
        assert pooled.closed  # discarded, never handed out again

        # every service at once: the frozen one is named, the other one answers
        started = time.monotonic()
        both = await tools.query(table="jobs_outbox", service=None)
        assert time.monotonic() - started < DEADLINE_S + 1.5
        assert [r.id for r in both.rows] == [other_job]
        assert [p.service for p in both.unavailable] == ["user"]

        pg_proxy.thaw()
        again = await tools.query(table="jobs_outbox", service="user")
        assert [r.id for r in again.rows] == [job_id]


async def test_frozen_database_is_a_tool_error_through_mcp(
    db, outbox_db, make_outbox_db, pg_proxy, outbox_settings
) -> None:
    sim.insert_job(db)
    settings = deadline_settings(outbox_settings, through(outbox_db, pg_proxy.port), make_outbox_db())
    async with in_process_client(settings) as client:
        ok = await client.call_tool("query_outbox", {"table": "jobs_outbox", "service": "user"})
        assert not ok.is_error
        pg_proxy.freeze()
        started = time.monotonic()
        result = await client.call_tool("trace_job",
            {"detail": "full", "job_id": sim.insert_job(db), "service": "user"})
        assert time.monotonic() - started < DEADLINE_S + 1.5 + 1  # + connect timeout of a fresh connection
        assert result.is_error
        assert "PostgreSQL of service 'user' is unavailable" in result.content[0].text
        other = await client.call_tool("outbox_health", {"service": "event"})
        assert not other.is_error
        pg_proxy.thaw()
        back = await client.call_tool("query_outbox", {"table": "jobs_outbox", "service": "user"})
        assert not back.is_error


async def test_frozen_redis_answers_within_its_timeout(redis_url, outbox_settings, tools_for, r) -> None:
    target = urlsplit(redis_url)
    proxy = FreezingProxy(target.hostname or "127.0.0.1", target.port or 6379)
    try:
        url = urlunsplit(target._replace(netloc=f"127.0.0.1:{proxy.port}"))
        settings = outbox_settings(redis={"url": url}, limits={"redis_timeout_s": 0.5, "connect_timeout_s": 0.5})
        async with tools_for(settings) as tools:
            conns = tools.runtime.connections
            async with conns.redis_errors():
                assert await conns.redis().ping()
            proxy.freeze()
            started = time.monotonic()
            with pytest.raises(ServiceUnavailable) as err:
                async with conns.redis_errors():
                    await conns.redis().xlen("stream:anything")
            assert time.monotonic() - started < 2.0
            assert "Redis at redis://127.0.0.1:" in str(err.value)
            proxy.thaw()
            async with conns.redis_errors():
                assert await conns.redis().ping()
    finally:
        proxy.close()


async def test_statement_timeout_in_outbox_health_is_slow_not_unavailable(
    db, outbox_db, outbox_settings, tools_for
) -> None:
    sim.insert_job(db, age_s=1000)
    settings = outbox_settings(limits={"statement_timeout_ms": 300})
    with psycopg.connect(outbox_db) as locker:
        # another session holds a lock the health counts of job_audit must wait for
        locker.execute("LOCK TABLE job_audit IN ACCESS EXCLUSIVE MODE")
        async with tools_for(settings) as tools:
            report = await tools.health("user")
        locker.rollback()
    (svc,) = report.services
    assert svc.available
    tables = {t.table: t for t in svc.tables}
    (slow,) = tables["job_audit"].verdicts
    assert (slow.code, slow.severity) == ("slow", "warning")
    assert "statement timeout of 300 ms" in slow.sentence
    assert "CREATE INDEX CONCURRENTLY ON job_audit" in slow.next_step  # doctor's recommendation
    assert [v.code for v in tables["jobs_outbox"].verdicts] == ["pending_in_outbox"]  # the rest still answers
    assert not report.ok
    assert "job_audit: SLOW (statement timeout)" in report.summary_text()
    assert "UNAVAILABLE" not in report.summary_text()
