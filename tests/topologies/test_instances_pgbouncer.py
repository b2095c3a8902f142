"""Several Redis instances with routing, PgBouncer in transaction mode, doctor and config checks."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from server.config import ConfigError, Settings, load_settings
from server.connections import Connections
from server.doctor import run_doctor
from server.redis_routing import route
from server.runtime import Runtime
from tests.helpers import in_process_client
from tests.streams.conftest import Backend
from tests.streams.redis_servers import RedisProcess
from tests.streams.snapshot import differences, snapshot
from tests.topologies.servers import PgBouncer

pytestmark = pytest.mark.anyio


async def _doctor(settings: Settings) -> dict[str, object]:
    runtime = Runtime(settings)
    try:
        report = await run_doctor(runtime)
    finally:
        await runtime.aclose()
    return {c.name: c for c in report.checks}


async def test_streams_and_queues_routed_to_their_instance(
    machine: Backend, redis62: RedisProcess, make_settings: Callable[..., Settings]
) -> None:
    """ws streams and every queue live on a second Redis; each result names the instance it read."""
    other = redis62.client(0)
    other.flushdb()
    try:
        machine.client.xadd("stream:event:created", {"n": "1"})
        machine.client.xadd("stream:event:created-dlq", {"messageId": "1-0", "error": "x", "payload": "{}"})
        other.xadd("stream:ws:notify", {"n": "2"})
        other.rpush("bull:event-queue:wait", "j1")
        other.hset("bull:event-queue:j1", mapping={"name": "n", "data": "{}", "timestamp": "1"})
        settings = make_settings(redis={"url": machine.url, "instances": {
            "realtime": {"url": redis62.url(0), "streams": ["stream:ws:*"], "queues": ["*"]}}})
        assert route(settings, "stream:ws:notify-dlq", kind="streams") == "realtime"
        assert route(settings, "stream:event:created", kind="streams") == "default"
        before = (snapshot(machine.client), snapshot(other))
        async with in_process_client(settings) as client:
            streams = await client.call_tool("list_streams", {})
            ws = await client.call_tool("inspect_stream", {"detail": "full", "stream": "stream:ws:notify"})
            ev = await client.call_tool("inspect_stream", {"detail": "full", "stream": "stream:event:created"})
            queues = await client.call_tool("list_queues", {})
            queue = await client.call_tool("inspect_queue", {"queue": "event-queue"})
            dlq_all = await client.call_tool("dlq_list", {})
            dlq_one = await client.call_tool("dlq_list", {"stream": "stream:event:created"})
        for result in (streams, ws, ev, queues, queue, dlq_one):
            assert not result.is_error, result.content
        found = {(s["name"], s["instance"]) for s in streams.structured_content["streams"]}
        assert found == {("stream:event:created", "default"), ("stream:event:created-dlq", "default"),
                         ("stream:ws:notify", "realtime")}
        assert [r["instance"] for r in streams.structured_content["redis_sources"]] == ["default", "realtime"]
        assert ws.structured_content["redis_source"]["instance"] == "realtime"
        assert ws.structured_content["length"] == 1 and ev.structured_content["length"] == 1
        assert ev.structured_content["redis_source"]["instance"] == "default"
        assert [(q["name"], q["instance"]) for q in queues.structured_content["queues"]] == [
            ("event-queue", "realtime")]
        assert queue.structured_content["counts"]["wait"] == 1
        assert "(Redis instance 'realtime', standalone)" in queue.content[0].text
        assert dlq_all.is_error and "pass stream=" in dlq_all.content[0].text
        assert dlq_one.structured_content["redis_source"]["instance"] == "default"
        assert (differences(before[0], snapshot(machine.client)), differences(before[1], snapshot(other))) == ([], [])
        checks = await _doctor(settings)
        assert checks["redis"].status == "ok" and checks["redis:realtime"].status == "ok"
        assert "redis-streams:version[realtime]" in checks
    finally:
        other.flushdb()


async def test_doctor_says_when_the_mode_does_not_match(
    redis_cluster: object, machine: Backend, make_settings: Callable[..., Settings]
) -> None:
    url = redis_cluster.url  # type: ignore[attr-defined]
    checks = await _doctor(make_settings(redis={"url": url}))
    assert checks["redis:mode"].status == "fail" and "cluster_enabled:1" in checks["redis:mode"].detail
    assert 'mode = "cluster"' in (checks["redis:mode"].fix or "")
    checks = await _doctor(make_settings(redis={"url": url, "mode": "cluster"}))
    assert "redis:mode" not in checks
    assert checks["redis"].status == "ok" and "3 primaries" in checks["redis"].detail
    checks = await _doctor(make_settings(redis={"url": machine.url.rsplit("/", 1)[0] + "/0", "mode": "cluster"}))
    assert checks["redis:mode"].status == "fail" and "cluster_enabled:0" in checks["redis:mode"].detail


async def test_reads_through_pgbouncer_in_transaction_mode(
    pgbouncer: PgBouncer, pg_url: str, make_settings: Callable[..., Settings], redis_url: str
) -> None:
    dbname = psycopg.conninfo.conninfo_to_dict(pg_url)["dbname"]
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE t (id int PRIMARY KEY, v text)")
        conn.execute("INSERT INTO t SELECT g, 'v' || g FROM generate_series(1, 20) g")
    settings = make_settings(services={"event": {"postgres": pgbouncer.url(dbname) + "?sslmode=disable"}},
                             redis={"url": redis_url})
    connections = Connections(settings)
    try:
        for n in range(12):  # more reads than pooled server connections, the same statement each time
            result = await connections.read("event", "SELECT v FROM t WHERE id = %s", (n + 1,))
            assert result.rows == [{"v": f"v{n + 1}"}]
        ro = await connections.read("event", "SELECT current_setting('transaction_read_only') AS ro")
        assert ro.rows == [{"ro": "on"}]
        with pytest.raises(Exception, match="read-only"):
            await connections.read("event", "INSERT INTO t VALUES (100, 'x')")
        after = await connections.read("event", "SELECT current_setting('statement_timeout') AS st")
        assert after.rows[0]["st"] != "0"  # SET LOCAL held inside the read transaction
    finally:
        await connections.aclose()
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT count(*) FROM t").fetchone()[0] == 20
        # SET LOCAL never leaked into the pooled session
        assert conn.execute("SELECT count(*) FROM pg_prepared_statements").fetchone()[0] == 0

    checks = await _doctor(settings)
    check = checks["postgres:event:connection"]
    assert check.status == "ok", check.detail
    assert f"port {pgbouncer.port}" in check.detail and "PgBouncer?" in check.detail
    assert "sslmode disable" in check.detail and "READ ONLY" in check.detail

    with_options = make_settings(services={"event": {"postgres": pgbouncer.url(dbname)
                                                     + "?options=-c%20work_mem%3D8MB"}}, redis={"url": redis_url})
    check = (await _doctor(with_options))["postgres:event:connection"]
    assert check.status == "fail" and "unsupported startup parameter: options" in check.detail
    assert "startup options" in (check.fix or "")


def test_doctor_shows_pg_tls_settings_redacted(tmp_path: Path) -> None:
    settings = load_settings(environ={}, overrides={"services": {"event": {
        "postgres": "postgresql://u:s3cret@db.example:5432/app?sslmode=verify-full&sslrootcert=/etc/ca.pem"}}})
    from server.redaction import redact_dsn
    from server.topology_doctor import _dsn_params, _tls_text

    dsn = settings.services["event"].postgres
    shown = f"{redact_dsn(dsn)} ({_tls_text(_dsn_params(dsn))})"
    assert "s3cret" not in shown and "sslmode verify-full, sslrootcert /etc/ca.pem" in shown


@pytest.mark.parametrize(("redis", "message"), [
    ({"mode": "sentinel"}, "needs sentinels"),
    ({"mode": "sentinel", "sentinels": ["nope"], "service_name": "m"}, "not host:port"),
    ({"sentinels": ["h:1"]}, "only used with mode"),
    ({"mode": "cluster", "url": "redis://h:1/3"}, "only database 0"),
    ({"read_from_replicas": True}, "needs mode"),
    ({"mode": "replicated"}, "mode"),
    ({"ssl_cert_reqs": "maybe"}, "ssl_cert_reqs"),
    ({"instances": {"default": {"url": "redis://h/0"}}}, "not 'default'"),
    ({"instances": {"q": {"url": "redis://h/0", "typo": 1}}}, "unknown key 'redis.instances.q.typo'"),
])
def test_topology_settings_are_validated(redis: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_settings(environ={}, overrides={"redis": redis})


def test_topology_settings_accepted() -> None:
    settings = load_settings(environ={}, overrides={"redis": {
        "url": "rediss://:pw@ignored/2", "mode": "sentinel", "sentinels": ["10.0.0.1:26379", "10.0.0.2:26379"],
        "service_name": "mymaster", "sentinel_password": "spw", "read_from_replicas": True,
        "ssl_ca_certs": "/etc/ca.pem", "instances": {"queues": {"url": "redis://q:6379/0", "mode": "cluster",
                                                                "queues": ["*"]}}}})
    assert settings.redis.tls and settings.redis.instances["queues"].mode == "cluster"
    assert route(settings, "event-queue", kind="queues") == "queues"
    assert route(settings, "stream:x", kind="streams") == "default"
