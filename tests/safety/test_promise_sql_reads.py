"""Promise: every SQL read runs read-only, under a statement timeout, and returns at most the row cap.

The checks are made from inside the connection the read tools use (``Connections.read``,
which query_outbox, outbox_health, trace_* and the planners all go through) with
``SHOW``, and by trying what the promise forbids: a write, a statement slower than the
timeout, more rows than the cap. A last test proves the same through a real tool: the
outbox table is a view that raises unless the reading transaction is read-only and has
the configured timeout.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import psycopg
import pytest

from server.config import Settings
from server.connections import Connections
from server.errors import MeshError

pytestmark = pytest.mark.anyio

SVC = "orders"


@pytest.fixture
def table_db(pg_url: str) -> str:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE items (n int PRIMARY KEY)")
        conn.execute("INSERT INTO items SELECT generate_series(1, 20)")
    return pg_url


@pytest.fixture
def settings_for(make_settings: Callable[..., Settings], table_db: str) -> Callable[..., Settings]:
    def make(**limits: int) -> Settings:
        return make_settings(services={SVC: {"postgres": table_db}}, limits=limits)

    return make


def _count(url: str) -> int:
    with psycopg.connect(url) as conn:
        return conn.execute("SELECT count(*) FROM items").fetchone()[0]


async def _read(settings: Settings, query: str, params: tuple | None = None, **kw) -> list[dict]:
    connections = Connections(settings)
    try:
        return (await connections.read(SVC, query, params, **kw)).rows
    finally:
        await connections.aclose()


# -- read only ------------------------------------------------------------------------------


async def test_reads_run_in_a_read_only_transaction(settings_for) -> None:
    settings = settings_for()
    connections = Connections(settings)
    try:
        for _ in range(3):  # the first read opens the connection, the next ones reuse it from the pool
            rows = (await connections.read(SVC, "SHOW transaction_read_only")).rows
            assert rows == [{"transaction_read_only": "on"}]
    finally:
        await connections.aclose()


@pytest.mark.parametrize(
    "statement",
    [
        "INSERT INTO items VALUES (1000) RETURNING n",
        "UPDATE items SET n = n + 100 WHERE n = 1 RETURNING n",
        "DELETE FROM items WHERE n = 2 RETURNING n",
        "CREATE TABLE sneaky (x int)",
        "WITH gone AS (DELETE FROM items RETURNING n) SELECT count(*) FROM gone",
    ],
)
async def test_a_write_through_a_read_fails_and_changes_nothing(settings_for, table_db, statement) -> None:
    settings = settings_for()
    connections = Connections(settings)
    try:
        with pytest.raises((psycopg.Error, MeshError)) as info:
            await connections.read(SVC, statement)
        assert "read-only" in str(info.value)
        # the pooled connection is still read-only afterwards (a failed read must not leave it writable)
        again = await connections.read(SVC, "SHOW transaction_read_only")
        assert again.rows == [{"transaction_read_only": "on"}]
        with pytest.raises((psycopg.Error, MeshError)):
            await connections.read(SVC, "INSERT INTO items VALUES (1001) RETURNING n")
    finally:
        await connections.aclose()
    assert _count(table_db) == 20
    with psycopg.connect(table_db) as conn:
        assert conn.execute("SELECT to_regclass('sneaky')").fetchone()[0] is None


async def test_the_pooled_connection_itself_is_read_only(settings_for) -> None:
    """``Connections.pg`` hands out the read connection: a write on it fails too."""
    connections = Connections(settings_for())
    try:
        async with connections.pg(SVC) as conn:
            cur = await conn.execute("SHOW transaction_read_only")
            assert (await cur.fetchone()) == {"transaction_read_only": "on"}
            with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
                await conn.execute("INSERT INTO items VALUES (2000)")
            await conn.rollback()
    finally:
        await connections.aclose()


# -- statement timeout ----------------------------------------------------------------------


@pytest.mark.parametrize("timeout_ms", [1234, 20_000])
async def test_the_configured_statement_timeout_is_set(settings_for, timeout_ms: int) -> None:
    rows = await _read(settings_for(statement_timeout_ms=timeout_ms), "SHOW statement_timeout")
    expected = f"{timeout_ms}ms" if timeout_ms % 1000 else f"{timeout_ms // 1000}s"
    assert rows == [{"statement_timeout": expected}]


async def test_a_per_call_timeout_wins_over_the_default(settings_for) -> None:
    rows = await _read(settings_for(statement_timeout_ms=5000), "SHOW statement_timeout", timeout_ms=777)
    assert rows == [{"statement_timeout": "777ms"}]


async def test_a_statement_slower_than_the_timeout_is_cancelled(settings_for) -> None:
    settings = settings_for(statement_timeout_ms=300)
    started = time.monotonic()
    with pytest.raises(MeshError, match=r"^the query on service 'orders' exceeded the statement timeout of 300 ms: "
                                        r"narrow the filters or raise \[limits\] statement_timeout_ms$"):
        await _read(settings, "SELECT pg_sleep(5)")
    assert time.monotonic() - started < 4  # cancelled by the server well before the sleep ends


async def test_a_statement_within_the_timeout_completes(settings_for) -> None:
    rows = await _read(settings_for(statement_timeout_ms=3000), "SELECT 1 AS slept FROM pg_sleep(0.05)")
    assert rows == [{"slept": 1}]


async def test_the_timeout_does_not_leak_into_the_session(settings_for) -> None:
    """Set per transaction: a later read with another timeout sees its own value."""
    connections = Connections(settings_for(statement_timeout_ms=4000))
    try:
        first = await connections.read(SVC, "SHOW statement_timeout", timeout_ms=111)
        second = await connections.read(SVC, "SHOW statement_timeout")
    finally:
        await connections.aclose()
    assert first.rows == [{"statement_timeout": "111ms"}]
    assert second.rows == [{"statement_timeout": "4s"}]


async def test_a_pooled_connection_keeps_no_timeout_of_an_earlier_read(settings_for) -> None:
    """The timeout is local to the read's transaction: the pooled connection handed out next
    (``Connections.pg``, which trace_request uses) still has the server's own setting."""
    connections = Connections(settings_for(statement_timeout_ms=4000))
    try:
        async with connections.pg(SVC) as conn:
            before = await (await conn.execute("SHOW statement_timeout")).fetchone()
        await connections.read(SVC, "SELECT 1 AS one", timeout_ms=111)
        await connections.read(SVC, "SELECT 1 AS one")
        async with connections.pg(SVC) as conn:
            assert len(connections._idle[SVC]) == 0  # the same pooled connection, taken out again
            after = await (await conn.execute("SHOW statement_timeout")).fetchone()
    finally:
        await connections.aclose()
    assert before == {"statement_timeout": "0"}
    assert after == before


# -- row cap --------------------------------------------------------------------------------


@pytest.mark.parametrize(("cap", "truncated"), [(19, True), (20, False), (21, False)])
async def test_the_row_cap_at_and_around_the_row_count(settings_for, cap: int, truncated: bool) -> None:
    connections = Connections(settings_for(max_rows=cap))
    try:
        result = await connections.read(SVC, "SELECT n FROM items ORDER BY n")
    finally:
        await connections.aclose()
    assert [r["n"] for r in result.rows] == list(range(1, min(cap, 20) + 1))
    assert result.truncated is truncated


async def test_more_rows_than_the_cap_come_back_capped(settings_for) -> None:
    connections = Connections(settings_for(max_rows=5))
    try:
        result = await connections.read(SVC, "SELECT n FROM items ORDER BY n")
        asked_more = await connections.read(SVC, "SELECT n FROM items ORDER BY n", max_rows=50)
        asked_less = await connections.read(SVC, "SELECT n FROM items ORDER BY n", max_rows=2)
        exact = await connections.read(SVC, "SELECT n FROM items WHERE n <= 2 ORDER BY n", max_rows=2)
    finally:
        await connections.aclose()
    assert [r["n"] for r in result.rows] == [1, 2, 3, 4, 5] and result.truncated is True
    assert len(asked_more.rows) == 5 and asked_more.truncated is True  # a caller never gets past [limits]
    assert [r["n"] for r in asked_less.rows] == [1, 2] and asked_less.truncated is True
    assert [r["n"] for r in exact.rows] == [1, 2] and exact.truncated is False


async def test_a_catalog_read_keeps_its_own_cap_whole_and_is_still_read_only(settings_for) -> None:
    """The catalog of the outbox tables is read whole whatever ``[limits] max_rows`` (a schema cut at
    the data cap made present columns look missing); it keeps its own cap, and stays read-only."""
    connections = Connections(settings_for(max_rows=3))
    try:
        whole = await connections.read(SVC, "SELECT n FROM items ORDER BY n", max_rows=12, catalog=True)
        exact = await connections.read(SVC, "SELECT n FROM items ORDER BY n", max_rows=20, catalog=True)
        data = await connections.read(SVC, "SELECT n FROM items ORDER BY n", max_rows=12)
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            await connections.read(SVC, "DELETE FROM items RETURNING n", max_rows=50, catalog=True)
    finally:
        await connections.aclose()
    assert [r["n"] for r in whole.rows] == list(range(1, 13)) and whole.truncated is True
    assert len(exact.rows) == 20 and exact.truncated is False
    assert [r["n"] for r in data.rows] == [1, 2, 3] and data.truncated is True


async def test_parameters_are_bound_not_interpolated(settings_for, table_db) -> None:
    hostile = "1; DELETE FROM items"
    rows = await _read(settings_for(), "SELECT %s::text AS v", (hostile,))
    assert rows == [{"v": hostile}]
    assert _count(table_db) == 20


# -- the same, through a real read tool -------------------------------------------------------

GUARD = """
CREATE FUNCTION mesh_guard() RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  IF current_setting('transaction_read_only') <> 'on' THEN
    RAISE EXCEPTION 'guard: the read ran in a writable transaction';
  END IF;
  IF current_setting('statement_timeout') <> '2345ms' THEN
    RAISE EXCEPTION 'guard: statement_timeout is %', current_setting('statement_timeout');
  END IF;
  RETURN true;
END $$;
ALTER TABLE event_queue RENAME TO event_queue_data;
CREATE VIEW event_queue AS SELECT * FROM event_queue_data WHERE mesh_guard();
"""


async def test_query_outbox_reads_read_only_with_its_timeout(make_settings, pg_url, redis_url) -> None:
    from tests.helpers import REPO_ROOT, in_process_client

    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute((REPO_ROOT / "tools" / "outbox" / "schema.sql").read_text(encoding="utf-8"))
        conn.execute(
            "INSERT INTO event_queue (id, status, type, emitter, payload, target_services) "
            "VALUES (gen_random_uuid(), 'PENDING', 'user:created', 'ms-user', '{}', ARRAY['user:created'])"
        )
        conn.execute(GUARD)
    settings = make_settings(services={SVC: {"postgres": pg_url}}, redis={"url": redis_url},
                             limits={"statement_timeout_ms": 2345})
    async with in_process_client(settings) as client:
        result = await client.call_tool("query_outbox", {"service": SVC, "table": "event_queue"})
    text = " ".join(getattr(c, "text", "") for c in result.content)
    assert not result.is_error, text
    assert "guard:" not in text
    assert result.structured_content["rows"], result.structured_content


# -- errors name the service, never the password ----------------------------------------------


async def test_reads_identify_themselves_and_tolerate_statements_without_rows(settings_for) -> None:
    connections = Connections(settings_for())
    try:
        name = await connections.read(SVC, "SHOW application_name")
        nothing = await connections.read(SVC, "DO $$ BEGIN PERFORM 1; END $$")
    finally:
        await connections.aclose()
    assert name.rows == [{"application_name": "mesh-mcp"}]
    assert nothing.rows == [] and nothing.truncated is False


async def test_a_missing_table_or_column_is_a_clear_error(settings_for) -> None:
    from server.errors import NotFound

    with pytest.raises(NotFound, match=r"service 'orders': .*nope.*check \[conventions.tables\]"):
        await _read(settings_for(), "SELECT * FROM nope")
    with pytest.raises(MeshError, match=r"service 'orders': .*missing_col"):
        await _read(settings_for(), "SELECT missing_col FROM items")


async def test_an_unreachable_database_is_named_without_its_password(make_settings) -> None:
    from server.demo.embedded import free_port
    from server.errors import ServiceUnavailable

    dsn = f"postgresql://app:Zq%40W%2Fx9k@127.0.0.1:{free_port()}/orders"
    settings = make_settings(services={SVC: {"postgres": dsn}}, limits={"connect_timeout_s": 2})
    started = time.monotonic()
    with pytest.raises(ServiceUnavailable) as info:
        await _read(settings, "SELECT 1")
    message = str(info.value)
    assert time.monotonic() - started < 10
    assert "PostgreSQL of service 'orders' is unavailable" in message
    assert "Zq" not in message and "x9k" not in message and "app:***@" in message


async def test_a_refused_login_is_named_with_its_reason_at_once(make_settings, pg_admin_url: str) -> None:
    """The reason (here a missing role) is in the error, well before the connect timeout: a pool that
    hides it behind its own timeout (psycopg_pool: docs/configuration.md) would fail this."""
    from server.errors import ServiceUnavailable

    info = psycopg.conninfo.conninfo_to_dict(pg_admin_url)
    info.update(user="mesh_no_such_role", dbname="postgres")
    info.pop("password", None)
    dsn = psycopg.conninfo.make_conninfo(**info)
    settings = make_settings(services={SVC: {"postgres": dsn}}, limits={"connect_timeout_s": 5})
    started = time.monotonic()
    with pytest.raises(ServiceUnavailable) as raised:
        await _read(settings, "SELECT 1")
    assert time.monotonic() - started < 2.5
    assert 'role "mesh_no_such_role" does not exist' in str(raised.value)
    assert "PostgreSQL of service 'orders' is unavailable" in str(raised.value)


async def test_unknown_and_unconfigured_services_are_refused(settings_for, make_settings) -> None:
    from server.errors import NotFound

    connections = Connections(settings_for())
    try:
        assert connections.resolve_services(None) == [SVC]
        assert connections.resolve_services(SVC) == [SVC]
        with pytest.raises(NotFound, match="unknown service 'billing': configured services are orders"):
            await connections.read("billing", "SELECT 1")
    finally:
        await connections.aclose()
    empty = Connections(make_settings())
    with pytest.raises(NotFound, match="no service is configured"):
        empty.resolve_services(None)
