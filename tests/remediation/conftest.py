"""Fixtures of the remediation tests: an outbox database, settings, a poison pill in a DLQ, approvals."""

from __future__ import annotations

import io
import re
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
import redis

from server.approval.cli import approve_plan
from server.config import Settings, load_settings
from tests.helpers import REPO_ROOT
from tests.remediation.target_sim import PostProcessor, new_event, push_event
from tests.streams.conftest import cluster_backend, redis_cluster

__all__ = ["cluster_backend", "redis_cluster"]

SCHEMA = (REPO_ROOT / "tools" / "outbox" / "schema.sql").read_text(encoding="utf-8")
STREAM = "stream:event:created"
GROUP = "pp-event"


@pytest.fixture
def outbox_db(pg_url: str) -> str:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(SCHEMA)
    return pg_url


def settings_for(tmp_path: Path, pg: str | None, redis_url: str | dict[str, Any], **overrides: Any) -> Settings:
    """``redis_url``: a URL, or a whole ``[redis]`` table (``Topology.redis``: url and mode)."""
    data: dict[str, Any] = {
        "state_dir": str(tmp_path / "state"),
        "redis": dict(redis_url) if isinstance(redis_url, dict) else {"url": redis_url},
        "enable_remediation": True,
        "approval": {"secret_file": str(tmp_path / "secret" / "approval.key")},
        "limits": {"replay_confirm_timeout_ms": 30_000},  # a ceiling: the confirm step returns once processed
    }
    if pg is not None:
        data["services"] = {"event": {"postgres": pg}}
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(data.get(key), dict):
            data[key] = {**data[key], **value}
        else:
            data[key] = value
    return load_settings(environ={}, overrides=data)


@dataclass
class Topology:
    """The Redis a remediation test runs on: ``client`` to seed and check, ``redis`` for ``settings_for``."""

    client: Any
    redis: dict[str, Any]
    cluster: bool


@pytest.fixture(params=["machine", "cluster"])
def topology(request: pytest.FixtureRequest) -> Topology:
    """The machine's Redis (scratch database), then the session's three-primary cluster (flushed around
    the test), for the remediation tests that make sense on both."""
    if request.param == "cluster":
        backend = request.getfixturevalue("cluster_backend")
        return Topology(backend.client, backend.redis_config, True)
    return Topology(request.getfixturevalue("redis_client"), {"url": request.getfixturevalue("redis_url")}, False)


@pytest.fixture
def settings(tmp_path: Path, outbox_db: str, redis_url: str) -> Settings:
    return settings_for(tmp_path, outbox_db, redis_url)


def approve(settings: Settings, plan_id: str, **kwargs: Any) -> str:
    """``mesh-mcp approve`` through its code path, a human at a tty reading the code back."""
    out = io.StringIO()

    def read_code(prompt: str) -> str:
        return re.search(r"type the code (\w+)", out.getvalue()).group(1)  # type: ignore[union-attr]

    kwargs.setdefault("ask_secret", lambda prompt: "")
    return approve_plan(settings, plan_id, is_tty=True, ask=read_code, out=out, **kwargs)


class Poison:
    """A poison pill that went through the retries into the DLQ, with its FAILED event_queue row."""

    def __init__(self, client: redis.Redis, pg: str | None, settings: Settings) -> None:
        self.client = client
        self.fixed = False
        self.event = new_event(bad=True)
        self.processor = PostProcessor(client, STREAM, GROUP, "pp-1", self.handle,
                                       conventions=settings.conventions)
        self.processor.ensure_group()
        if pg is not None:
            with psycopg.connect(pg, autocommit=True) as conn:
                conn.execute(
                    "INSERT INTO event_queue (id, status, type, emitter, payload, target_services, \"lastError\") "
                    "VALUES (%s, 'FAILED', %s, %s, %s, ARRAY['event'], 'consumer failed')",
                    (self.event["id"], self.event["type"], self.event["emitter"],
                     psycopg.types.json.Jsonb(self.event["payload"])),
                )
        self.message_id = push_event(client, STREAM, self.event)
        self.processor.run_until(lambda: client.xlen(f"{STREAM}-dlq") == 1)
        self.dlq_id = client.xrange(f"{STREAM}-dlq")[0][0].decode()

    def handle(self, event: dict[str, Any], message_id: str) -> None:
        if event["payload"]["after"].get("bad") and not self.fixed:
            raise ValueError(f"entity {event['emitterId']} not found")


@pytest.fixture
def poison(redis_client: redis.Redis, settings: Settings, outbox_db: str) -> Poison:
    return Poison(redis_client, outbox_db, settings)


@pytest.fixture
def make_poison(redis_client: redis.Redis) -> Callable[[Settings, str | None], Poison]:
    def make(settings: Settings, pg: str | None) -> Poison:
        return Poison(redis_client, pg, settings)

    return make


def event_status(pg: str, event_id: str) -> str:
    with psycopg.connect(pg) as conn:
        return conn.execute("SELECT status FROM event_queue WHERE id = %s", (event_id,)).fetchone()[0]


@pytest.fixture
def uid() -> Iterator[str]:
    yield uuid.uuid4().hex[:8]
