"""Pieces of the demo: the DUMP rewrite that ages a consumer, probes, and honesty when tools fail."""

from __future__ import annotations

import dataclasses
import os
import struct
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from server.config import RedisSettings
from server.demo.command import diagnose_run, prepare
from server.demo.dump import age_consumer_in_dump, crc64
from server.demo.embedded import EmbeddedServices, free_port
from server.demo.report import Probe, match_probe, render_text
from server.demo.services import DEMO_POSTGRES_ENV, DEMO_REDIS_ENV


@pytest.fixture(scope="module")
def private_redis() -> Iterator[str]:
    services = EmbeddedServices()
    try:
        yield services.start_redis().rsplit("/", 1)[0]
    finally:
        services.stop()


def test_crc64_is_redis_jones_crc() -> None:
    # the check value of Redis's crc64 (src/crc64.c test: "123456789")
    assert crc64(b"123456789") == 0xE9C6D914C4B8D9CA


@pytest.mark.parametrize("url_fixture", ["private_redis", "redis_base_url"])
def test_dump_rewrite_ages_only_the_named_consumer(url_fixture: str, request: pytest.FixtureRequest) -> None:
    """On the embedded Redis (6.2) and the local one (7.x): XINFO shows the new idle time."""
    url = request.getfixturevalue(url_fixture)
    base = url.rsplit("/", 1)[0] if url.rsplit("/", 1)[-1].isdigit() else url
    client = redis.Redis.from_url(f"{base}/0")
    key = f"mesh-test-age-{free_port()}"
    try:
        client.xadd(key, {"a": "1"})
        client.xadd(key, {"a": "2"})
        client.xgroup_create(key, "g", id="0")
        client.xreadgroup("g", "dead-one", {key: ">"}, count=1)
        client.xreadgroup("g", "alive-one", {key: ">"}, count=1)
        now_ms = int(client.time()[0]) * 1000
        payload = client.dump(key)
        aged = age_consumer_in_dump(payload, "dead-one", now_ms - 1_200_000, now_ms)
        assert aged is not None
        client.restore(key, 0, aged, replace=True)
        idle = {c["name"].decode(): c["idle"] for c in client.xinfo_consumers(key, "g")}
        assert idle["dead-one"] >= 1_190_000
        assert idle["alive-one"] < 60_000
        assert client.xpending(key, "g")["pending"] == 2
        # a payload whose checksum does not match, or a name that is not there, is left alone
        broken = payload[:-1] + bytes([payload[-1] ^ 0xFF])
        assert age_consumer_in_dump(broken, "dead-one", 0, now_ms) is None
        assert age_consumer_in_dump(payload, "nobody", 0, now_ms) is None
    finally:
        client.delete(key)
        client.close()


def test_probe_needs_the_code_about_the_fault() -> None:
    result = {"anomalies": [
        {"code": "dead_consumer", "consumer": "c-1", "message": "consumer 'c-1' holds 2 entries"},
        {"code": "dlq_not_empty", "message": "dlq holds 1"},
    ]}
    assert match_probe(result, Probe("inspect_stream", {}, frozenset({"dead_consumer"}), "c-1")) == (
        "dead_consumer: consumer 'c-1' holds 2 entries")
    assert match_probe(result, Probe("inspect_stream", {}, frozenset({"dead_consumer"}), "c-2")) is None
    assert match_probe(result, Probe("inspect_stream", {}, frozenset({"trimmed_pending"}))) is None
    assert match_probe({"verdict": {"code": "ok"}}, Probe("trace_job", {}, frozenset({"stuck_processing"}))) is None
    # tools without diagnosis codes: a record with exactly the fault's field values, not a mere mention
    dead_letters = {"entries": [{"message_id": "2-0", "error": "boom", "payload": {"note": "1-0"}},
                                {"message_id": "1-0", "error": "TypeError: x\n  at f"}]}
    assert match_probe(dead_letters, Probe("dlq_list", {}, record=(("message_id", "1-0"),))) == (
        "message_id=1-0: TypeError: x")
    assert match_probe(dead_letters, Probe("dlq_list", {}, record=(("message_id", "3-0"),))) is None
    job = {"job": {"job_id": "j1", "state": "completed"}}
    assert match_probe(job, Probe("inspect_queue", {}, record=(("job_id", "j1"), ("state", "failed")))) is None


def test_a_redis_outage_is_reported_not_papered_over(pg_admin_url: str, private_redis: str, tmp_path: Path) -> None:
    env = {DEMO_POSTGRES_ENV: pg_admin_url, DEMO_REDIS_ENV: f"{private_redis}/7"}
    run = prepare(tmp_path / "demo", env, remediation=False)
    try:
        dead = RedisSettings(url=f"redis://127.0.0.1:{free_port()}/0")
        report = diagnose_run(dataclasses.replace(run, settings=run.settings.model_copy(update={"redis": dead})))
    finally:
        run.services.close()
    by_code = {f.code: f for f in report.findings}
    for code in ("dead_consumer", "trimmed_pending", "stale_idempotency_lock"):
        assert not by_code[code].found
        assert any("unavailable" in line for line in by_code[code].not_checked), by_code[code].not_checked
    assert by_code["job_stuck_pending"].found  # PostgreSQL still answers
    assert not report.ok
    text = render_text(report)
    assert "NOT FOUND" in text and "not run:" in text


def test_dump_layout_assumption_is_checked_by_name_length() -> None:
    assert age_consumer_in_dump(b"x" * 5, "c", 0, 0) is None
    body = b"\x15" + bytes([3]) + b"abc" + struct.pack("<q", 1000) + b"\x0b\x00"
    payload = body + struct.pack("<Q", crc64(body))
    out = age_consumer_in_dump(payload, "abc", 10, 1000)
    assert out is not None and struct.unpack_from("<q", out, 5)[0] == 10


def test_demo_settings_ignore_the_users_configuration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mesh_config: Callable[..., Path]
) -> None:
    """MESH_CONFIG and MESH_* variables must not leak a real service into the demo's server."""
    from server.demo.command import demo_settings
    from server.demo.services import DemoServices

    real = mesh_config({"services": {"billing": {"postgres": "postgresql://prod@db.example/billing"}}})
    monkeypatch.setenv("MESH_CONFIG", str(real))
    monkeypatch.setenv("MESH_REDIS__URL", "redis://prod.example:6379/0")
    services = DemoServices(root=tmp_path, service_dsn="host=/tmp dbname=demo", redis_url="redis://127.0.0.1:1/0",
                            labels={})
    settings = demo_settings(services, tmp_path, remediation=True)
    assert list(settings.services) == ["event"]
    assert settings.redis.url == "redis://127.0.0.1:1/0"
    assert settings.config_file is None
    assert settings.approval.secret_file == str(tmp_path / "approval.key")


def test_sweep_removes_only_directories_of_dead_demos(tmp_path: Path) -> None:
    import subprocess
    import sys

    from server.demo.services import PID_FILE, sweep_stale_demos

    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(finished.stdout)
    layout = {"mesh-demo-dead": str(dead_pid), "mesh-demo-alive": str(os.getpid()), "mesh-demo-nopid": None,
              "mesh-demo-garbled": "not a pid", "other-dead": str(dead_pid)}
    for name, pid in layout.items():
        (tmp_path / name / "services").mkdir(parents=True)
        if pid is not None:
            (tmp_path / name / PID_FILE).write_text(pid)
    removed = sweep_stale_demos(tmp_path)
    assert removed == [tmp_path / "mesh-demo-dead"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mesh-demo-alive", "mesh-demo-garbled", "mesh-demo-nopid",
                                                           "other-dead"]
