"""Promise: the connection layer honours its settings, names what failed and cleans up after itself.

Behavioural checks only (what a caller or the database sees), so they hold whatever pool
implementation ``server.connections`` uses: the libpq options of the connection a read
tool gets (``conninfo`` as the driver reports it), what the server sees
(``pg_stat_activity``, ``pg_prepared_statements``), the error a dropped or frozen
connection gives, which Redis instance a name resolves to and how it is named in errors,
and that ``aclose`` leaves no connection behind on either service.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from urllib.parse import urlsplit, urlunsplit

import anyio
import psycopg
import pytest
import redis

from server.config import Settings
from server.connections import Connections
from server.errors import MeshError, NotFound, ServiceUnavailable
from tests.tcp_proxy import FreezingProxy

pytestmark = pytest.mark.anyio

SVC = "orders"


def _params(conn: psycopg.AsyncConnection) -> dict[str, str]:
    return conn.info.get_parameters()


def _backends(url: str) -> int:
    """Backends of ``url``'s database opened by mesh-mcp (seen by the server, not by our pool)."""
    dbname = urlsplit(url).path.lstrip("/")
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND application_name = 'mesh-mcp'",
            (dbname,),
        ).fetchone()[0]


@pytest.fixture
def settings_for(make_settings: Callable[..., Settings], pg_url: str) -> Callable[..., Settings]:
    def make(**limits: float) -> Settings:
        return make_settings(services={SVC: {"postgres": pg_url}}, limits=limits)

    return make


# -- libpq options come from [limits] ----------------------------------------------------------


@pytest.mark.parametrize(
    ("connect_timeout_s", "idle_s", "want_timeout", "want_interval"),
    [(2.4, 7, "2", "2"), (0.3, 2, "1", "1"), (3.6, 30, "4", "10")],
)
async def test_connect_timeout_and_keepalives_come_from_the_settings(
    settings_for, connect_timeout_s: float, idle_s: int, want_timeout: str, want_interval: str
) -> None:
    connections = Connections(settings_for(connect_timeout_s=connect_timeout_s, pg_keepalives_idle_s=idle_s))
    try:
        async with connections.pg(SVC) as conn:
            params = _params(conn)
    finally:
        await connections.aclose()
    assert params["connect_timeout"] == want_timeout  # rounded, never below one second
    assert params["keepalives"] == "1"
    assert params["keepalives_idle"] == str(idle_s)
    assert params["keepalives_interval"] == want_interval  # a third of the idle time, at least one second
    assert params["keepalives_count"] == "3"
    assert params["application_name"] == "mesh-mcp"


async def test_no_statement_is_ever_prepared_on_the_server(settings_for) -> None:
    """``prepare_threshold=None``: PgBouncer in transaction mode cannot route prepared statements.

    psycopg prepares a statement on its 5th execution by default; after ten identical reads
    the same pooled connection must still hold no prepared statement.
    """
    connections = Connections(settings_for())
    try:
        for _ in range(10):
            await connections.read(SVC, "SELECT %s::int AS n", (1,))
        seen = await connections.read(SVC, "SELECT name, statement FROM pg_prepared_statements")
        backends = await connections.read(SVC, "SELECT pg_backend_pid() AS pid")
        again = await connections.read(SVC, "SELECT pg_backend_pid() AS pid")
    finally:
        await connections.aclose()
    assert backends.rows == again.rows  # the reads did share one pooled connection
    assert seen.rows == []


# -- errors: the service, one line, the driver's reason -----------------------------------------


async def test_a_missing_table_error_is_one_line(settings_for) -> None:
    with pytest.raises(NotFound) as info:
        connections = Connections(settings_for())
        try:
            await connections.read(SVC, "SELECT * FROM nope")
        finally:
            await connections.aclose()
    message = str(info.value)
    assert message == "service 'orders': relation \"nope\" does not exist (check [conventions.tables])"


async def test_a_connection_killed_under_the_pool_is_named_and_replaced(settings_for, pg_url) -> None:
    connections = Connections(settings_for())
    try:
        pid = (await connections.read(SVC, "SELECT pg_backend_pid() AS pid")).rows[0]["pid"]
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
            for _ in range(50):
                if not admin.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone():
                    break
                time.sleep(0.05)
        with pytest.raises(ServiceUnavailable) as info:
            await connections.read(SVC, "SELECT 1 AS one")
        message = str(info.value)
        assert message.startswith("PostgreSQL of service 'orders' is unavailable")
        assert "\n" not in message  # the driver's first line only, not its hints
        assert "terminat" in message or "closed" in message  # the driver's reason is kept
        back = await connections.read(SVC, "SELECT pg_backend_pid() AS pid")  # a fresh connection
        assert back.rows[0]["pid"] != pid
    finally:
        await connections.aclose()


async def test_a_driver_error_without_text_still_names_its_kind(settings_for) -> None:
    connections = Connections(settings_for())
    try:
        with pytest.raises(ServiceUnavailable) as info:
            async with connections.pg(SVC):
                raise psycopg.OperationalError()
    finally:
        await connections.aclose()
    assert str(info.value).startswith("PostgreSQL of service 'orders' is unavailable")
    assert "OperationalError" in str(info.value)


async def test_no_service_configured_says_how_to_add_one(make_settings) -> None:
    with pytest.raises(NotFound) as info:
        Connections(make_settings()).resolve_services("orders")
    assert str(info.value) == (
        'no service is configured: add [services.<name>] postgres = "postgresql://..." to mesh.toml'
    )


async def test_a_frozen_network_gives_the_whole_deadline_message(make_settings, pg_url) -> None:
    target = urlsplit(pg_url)
    proxy = FreezingProxy(target.hostname or "127.0.0.1", target.port or 5432)
    user = target.netloc.rpartition("@")[0]
    dsn = urlunsplit(target._replace(netloc=f"{user}@127.0.0.1:{proxy.port}"))
    settings = make_settings(
        services={SVC: {"postgres": dsn}},
        limits={"statement_timeout_ms": 300, "sql_deadline_margin_ms": 500, "connect_timeout_s": 1},
    )
    connections = Connections(settings)
    try:
        assert (await connections.read(SVC, "SELECT 1 AS one")).rows == [{"one": 1}]
        pid = (await connections.read(SVC, "SELECT pg_backend_pid() AS pid")).rows[0]["pid"]
        proxy.freeze()
        started = time.monotonic()
        with pytest.raises(ServiceUnavailable) as info, anyio.fail_after(5):  # never hang: a test-side ceiling
            await connections.read(SVC, "SELECT 1 AS one")
        elapsed = time.monotonic() - started
        assert 0.7 < elapsed < 0.8 + 1.0 + 1.5, elapsed  # the deadline (800 ms) + the bounded cancel, not earlier
        assert str(info.value) == (
            "PostgreSQL of service 'orders' is unavailable: no reply within the client-side deadline of 800 ms "
            "(statement timeout 300 ms + margin 500 ms): the connection was cancelled and dropped; check the "
            "network to the database and whether it is failing over (a new connection is opened on the next call)"
        )
        proxy.thaw()
        back = await connections.read(SVC, "SELECT pg_backend_pid() AS pid")
        assert back.rows[0]["pid"] != pid  # the frozen connection was dropped, not handed out again
    finally:
        await connections.aclose()
        proxy.close()


async def test_a_cancel_that_cannot_reach_the_host_does_not_hold_the_read(make_settings, pg_url) -> None:
    """The host is gone (nothing listens any more): the cancel is refused, the deadline error comes in time.

    (psycopg's ``cancel_safe`` logs a refused cancel itself and does not raise, which this also shows:
    the read ends with the deadline error, not with the cancel's.)
    """
    target = urlsplit(pg_url)
    proxy = FreezingProxy(target.hostname or "127.0.0.1", target.port or 5432)
    user = target.netloc.rpartition("@")[0]
    dsn = urlunsplit(target._replace(netloc=f"{user}@127.0.0.1:{proxy.port}"))
    settings = make_settings(
        services={SVC: {"postgres": dsn}},
        limits={"statement_timeout_ms": 300, "sql_deadline_margin_ms": 300, "connect_timeout_s": 1},
    )
    connections = Connections(settings)
    try:
        assert (await connections.read(SVC, "SELECT 1 AS one")).rows == [{"one": 1}]
        proxy.freeze()
        proxy.refuse_new()
        started = time.monotonic()
        with pytest.raises(ServiceUnavailable) as info, anyio.fail_after(5):
            await connections.read(SVC, "SELECT 1 AS one")
        assert time.monotonic() - started < 0.6 + 1.0 + 1.5
    finally:
        await connections.aclose()
        proxy.close()
    assert "no reply within the client-side deadline of 600 ms" in str(info.value)


# -- aclose leaves nothing open ------------------------------------------------------------------


async def test_aclose_closes_every_pooled_connection_and_redis_client(settings_for, pg_url, redis_url) -> None:
    settings = settings_for()
    settings = settings.model_copy(update={"redis": settings.redis.model_copy(update={"url": redis_url})})
    watcher = redis.Redis.from_url(redis_url)

    def client_ids() -> set[int]:
        return {int(c["id"]) for c in watcher.client_list()}

    before = client_ids()  # other tests of this process may still hold clients: only ours are counted
    connections = Connections(settings)
    try:
        held = []

        async def two_at_once() -> None:  # referenced: no close by GC
            async with connections.pg(SVC) as a, connections.pg(SVC) as b:
                held.extend([a, b])

        await two_at_once()  # two connections opened, both pooled
        assert _backends(pg_url) == 2
        assert await connections.redis().ping()
        ours = client_ids() - before - {watcher.client_id()}
        assert ours
    finally:
        await connections.aclose()
    for _ in range(100):
        if _backends(pg_url) == 0 and not ours & client_ids():
            break
        time.sleep(0.05)
    assert _backends(pg_url) == 0
    assert all(conn.closed for conn in held)
    assert not ours & client_ids()
    watcher.close()


async def test_aclose_closes_the_clients_of_every_redis_instance(make_settings, redis_url) -> None:
    settings = make_settings(redis={"url": redis_url, "instances": {"other": {"url": redis_url}}})
    watcher = redis.Redis.from_url(redis_url)
    before = {int(c["id"]) for c in watcher.client_list()}
    connections = Connections(settings)
    try:
        assert await connections.redis().ping()
        assert await connections.redis("other").ping()
        ours = {int(c["id"]) for c in watcher.client_list()} - before - {watcher.client_id()}
        assert len(ours) >= 2
    finally:
        await connections.aclose()
    for _ in range(100):
        if not ours & {int(c["id"]) for c in watcher.client_list()}:
            break
        time.sleep(0.05)
    assert not ours & {int(c["id"]) for c in watcher.client_list()}
    watcher.close()


async def test_unknown_service_lists_every_configured_one(make_settings, pg_url) -> None:
    connections = Connections(make_settings(services={"orders": {"postgres": pg_url}, "billing": {"postgres": pg_url}}))
    with pytest.raises(NotFound) as info:
        connections.resolve_services("users")
    assert str(info.value) == "unknown service 'users': configured services are billing, orders"


async def test_an_unreachable_database_names_the_drivers_reason(make_settings) -> None:
    from server.demo.embedded import free_port

    port = free_port()
    settings = make_settings(
        services={SVC: {"postgres": f"postgresql://app@127.0.0.1:{port}/orders"}}, limits={"connect_timeout_s": 2}
    )
    connections = Connections(settings)
    with pytest.raises(ServiceUnavailable) as info:
        await connections.read(SVC, "SELECT 1")
    await connections.aclose()
    message = str(info.value)
    assert message.startswith("PostgreSQL of service 'orders' is unavailable: ")
    assert "refused" in message.lower() and f"(dsn postgresql://app@127.0.0.1:{port}/orders)" in message


# -- Redis instances: resolution and names in errors ---------------------------------------------


def _instances(make_settings, redis_url: str, **extra) -> Settings:
    return make_settings(
        redis={
            "url": redis_url,
            "instances": {
                "cache": {"url": "redis://:s3cr%40t@127.0.0.1:1/2", "streams": ["cache:*"], "queues": ["mail"]},
                "ha": {
                    "mode": "sentinel",
                    "url": "redis://",
                    "sentinels": ["10.0.0.1:26379", "10.0.0.2:26379"],
                    "service_name": "mesh-primary",
                },
            },
            **extra,
        }
    )


async def test_redis_instances_resolve_by_name_and_by_key(make_settings, redis_url) -> None:
    connections = Connections(_instances(make_settings, redis_url))
    try:
        assert connections.redis_instance_for_stream("cache:sessions") == "cache"
        assert connections.redis_instance_for_stream("orders:events") == "default"
        assert connections.redis_instance_for_queue("mail") == "cache"
        assert connections.redis_instance_for_queue("billing") == "default"
        cache = connections.bound_to("cache")
        assert cache.redis() is connections.redis("cache")  # a view shares the clients
        assert cache.redis_reader() is connections.redis_reader("cache")
        assert connections.redis() is connections.redis("default")
        assert connections.redis() is not connections.redis("cache")
        assert cache.redis("default") is connections.redis()
        assert await connections.redis().ping()  # the default one is the real test Redis
        with pytest.raises(NotFound) as info:
            connections.redis("nope")
        assert str(info.value) == "unknown Redis instance 'nope': configured instances are default, cache, ha"
        with pytest.raises(NotFound):
            connections.bound_to("nope")
    finally:
        await connections.aclose()


async def test_redis_labels_name_the_instance_without_its_password(make_settings, redis_url) -> None:
    connections = Connections(_instances(make_settings, redis_url))
    try:
        assert connections.redis_label() == f"Redis at {redis_url}"
        assert connections.redis_label("cache") == "Redis instance 'cache' at redis://:***@127.0.0.1:1/2"
        assert connections.bound_to("cache").redis_label() == "Redis instance 'cache' at redis://:***@127.0.0.1:1/2"
        assert connections.redis_label("ha") == (
            "Redis instance 'ha' (sentinel service 'mesh-primary' via 10.0.0.1:26379, 10.0.0.2:26379)"
        )
        assert connections.redis_label("gone") == "Redis instance 'gone'"
        with pytest.raises(ServiceUnavailable) as info:
            async with connections.redis_errors("cache"):
                await connections.redis("cache").ping()
        assert str(info.value).startswith("Redis instance 'cache' at redis://:***@127.0.0.1:1/2 is unavailable")
        assert "s3cr" not in str(info.value)
    finally:
        await connections.aclose()


async def test_a_cluster_instance_is_labelled_as_one(make_settings, redis_url) -> None:
    settings = make_settings(
        redis={"url": redis_url, "instances": {"big": {"mode": "cluster", "url": "redis://127.0.0.1:7000"}}}
    )
    connections = Connections(settings)
    assert connections.redis_label("big") == "Redis instance 'big' at redis://127.0.0.1:7000 (cluster)"
    assert connections.redis_label() == f"Redis at {redis_url}"
    await connections.aclose()


async def test_an_unknown_redis_instance_in_the_error_path_is_still_a_clear_error(make_settings, redis_url) -> None:
    connections = Connections(make_settings(redis={"url": redis_url}))
    with pytest.raises(MeshError, match="unknown Redis instance 'x': configured instances are default"):
        connections.redis_reader("x")
    await connections.aclose()


async def test_writes_go_to_the_primary_when_reads_may_use_replicas(make_settings, redis_url) -> None:
    """``read_from_replicas``: read tools get a replica client, remediation (``redis()``) never does."""
    settings = make_settings(
        redis={
            "url": redis_url,
            "instances": {
                "ha": {
                    "mode": "sentinel",
                    "url": "redis://",
                    "sentinels": ["127.0.0.1:1"],
                    "service_name": "mesh-primary",
                    "read_from_replicas": True,
                }
            },
        }
    )
    connections = Connections(settings)
    try:
        assert connections.redis("ha").connection_pool.is_master is True
        assert connections.redis_reader("ha").connection_pool.is_master is False
        assert connections.bound_to("ha").redis().connection_pool.is_master is True
    finally:
        await connections.aclose()
