"""Lazy, small pools of connections to each service's PostgreSQL and to Redis.

Nothing connects until a tool needs it. Reads go through :meth:`Connections.read`,
which runs the statement in a READ ONLY transaction with a statement timeout and a
row cap, parameters always bound. A database or Redis that cannot be reached raises
:class:`~server.errors.ServiceUnavailable` naming it; other services keep answering.

A small hand-rolled pool is used instead of ``psycopg_pool`` because the latter hides
the connection error behind a generic pool timeout (after the whole wait), and the first
thing a user needs when a database is down is the reason (measured: docs/configuration.md,
"Why mesh-mcp keeps its own small connection pool").

``statement_timeout`` is enforced by the server, so it cannot help when the peer stops
answering (a frozen network, a failover): every read therefore also has a client-side
deadline, the statement timeout plus ``[limits] sql_deadline_margin_ms``. When it expires
the query is cancelled (bounded), the connection is discarded, and the tool gets a
:class:`~server.errors.ServiceUnavailable` naming the service and what to check; the
next read opens a fresh connection, so the service answers again once its network is
back. TCP keepalives are on (``[limits] pg_keepalives_idle_s``) so a dead peer is also
noticed by the kernel on idle pooled connections.
"""

from __future__ import annotations

import copy
import logging
import math
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio

from server.config import Settings
from server.errors import InvalidArgument, MeshError, NotFound, ServiceUnavailable, StatementTimeout
from server.redaction import redact_dsn, redact_text
from server.redis_routing import route
from server.redis_settings import DEFAULT_INSTANCE

if TYPE_CHECKING:
    import psycopg
    from psycopg import sql

# psycopg and redis are imported by the methods that use them, not here: a server that starts
# (``tools/list``) or a tool that needs neither does not pay their import (about 0.15 s).

log = logging.getLogger("mesh.connections")

POOL_SIZE = 2

CANCEL_TIMEOUT_S = 1.0
"""How long a cancel request of an expired read may take before the connection is just dropped."""


@dataclass(frozen=True)
class ReadResult:
    rows: list[dict[str, Any]]
    truncated: bool


def _first_line(exc: BaseException) -> str:
    """The first line of a driver's error, secrets redacted (libpq quotes the conninfo it could not parse)."""
    text = str(exc).strip().splitlines()
    return redact_text(text[0]) if text else type(exc).__name__


class Connections:
    """Per-settings connection cache. Create one per server; close it on shutdown."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._idle: dict[str, list[psycopg.AsyncConnection[Any]]] = {}
        self._redis_clients: dict[str, tuple[Any, Any]] = {}
        self._default_instance = DEFAULT_INSTANCE

    # -- PostgreSQL -------------------------------------------------------------------

    def service_names(self) -> list[str]:
        return sorted(self.settings.services)

    def resolve_services(self, service: str | None) -> list[str]:
        """``None`` -> every configured service; otherwise check the name exists."""
        if not self.settings.services:
            raise NotFound(
                "no service is configured: add [services.<name>] postgres = \"postgresql://...\" to mesh.toml"
            )
        if service is None:
            return self.service_names()
        if service not in self.settings.services:
            known = ", ".join(self.service_names())
            raise NotFound(f"unknown service '{service}': configured services are {known}")
        return [service]

    def _label(self, service: str) -> str:
        return f"PostgreSQL of service '{service}'"

    async def _connect(self, service: str, *, read_only: bool) -> psycopg.AsyncConnection[Any]:
        import psycopg
        from psycopg.rows import dict_row

        dsn = self.settings.services[service].postgres
        try:
            conn = await psycopg.AsyncConnection.connect(
                dsn,
                connect_timeout=max(1, round(self.settings.limits.connect_timeout_s)),
                autocommit=False,
                row_factory=dict_row,
                application_name="mesh-mcp",
                keepalives=1,
                keepalives_idle=self.settings.limits.pg_keepalives_idle_s,
                keepalives_interval=max(1, self.settings.limits.pg_keepalives_idle_s // 3),
                keepalives_count=3,
                prepare_threshold=None,
            )
        except psycopg.Error as exc:
            raise ServiceUnavailable(
                self._label(service), f"{_first_line(exc)} (dsn {redact_dsn(dsn)})"
            ) from None
        if read_only:
            await conn.set_read_only(True)
        return conn

    @asynccontextmanager
    async def pg(self, service: str) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        """A read-only connection of ``service``'s pool (returned to the pool afterwards)."""
        self.resolve_services(service)
        idle = self._idle.setdefault(service, [])
        conn = None
        while idle:
            candidate = idle.pop()
            if not candidate.closed and not candidate.broken:
                conn = candidate
                break
        if conn is None:
            conn = await self._connect(service, read_only=True)
        import psycopg  # loaded by _connect at the latest

        ok = False
        try:
            yield conn
            ok = True
        except psycopg.OperationalError as exc:
            raise ServiceUnavailable(self._label(service), _first_line(exc)) from None
        finally:
            if conn.closed or conn.broken or not ok or len(idle) >= POOL_SIZE:
                if not conn.closed:
                    await conn.close()
            else:
                if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                    await conn.rollback()
                idle.append(conn)

    @asynccontextmanager
    async def pg_write(self, service: str) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        """A fresh read-write connection, for remediation only; always closed afterwards."""
        import psycopg

        self.resolve_services(service)
        conn = await self._connect(service, read_only=False)
        try:
            yield conn
        except psycopg.OperationalError as exc:
            raise ServiceUnavailable(self._label(service), _first_line(exc)) from None
        finally:
            await conn.close()

    async def read(
        self,
        service: str,
        query: sql.Composable | str,
        params: Sequence[Any] | dict[str, Any] | None = None,
        *,
        max_rows: int | None = None,
        timeout_ms: int | None = None,
        catalog: bool = False,
    ) -> ReadResult:
        """Run one SELECT in a read-only transaction; at most ``max_rows`` rows come back.

        ``max_rows`` is clamped to ``[limits] max_rows`` (the row cap of data reads), except for
        ``catalog`` reads: a read of the database's own catalog (the outbox tables' columns and
        indexes), whose size the schema bounds, keeps its ``max_rows`` whole. A catalog cut by the
        data cap would make present columns look missing and every later answer wrong.
        """
        import psycopg

        cap = max_rows if max_rows is not None else self.settings.limits.max_rows
        if not catalog:
            cap = min(cap, self.settings.limits.max_rows)
        timeout = timeout_ms if timeout_ms is not None else self.settings.limits.statement_timeout_ms
        deadline_ms = timeout + self.settings.limits.sql_deadline_margin_ms
        async with self.pg(service) as conn:
            try:
                with anyio.fail_after(deadline_ms / 1000):
                    rows = await self._run(conn, query, params, cap, timeout)
            except TimeoutError:
                await self._discard(conn)
                raise ServiceUnavailable(
                    self._label(service),
                    f"no reply within the client-side deadline of {deadline_ms} ms (statement timeout {timeout} ms "
                    f"+ margin {self.settings.limits.sql_deadline_margin_ms} ms): the connection was cancelled and "
                    "dropped; check the network to the database and whether it is failing over (a new connection "
                    "is opened on the next call)",
                ) from None
            except psycopg.errors.QueryCanceled:
                raise StatementTimeout(service, timeout) from None
            except psycopg.errors.UndefinedTable as exc:
                raise NotFound(f"service '{service}': {_first_line(exc)} (check [conventions.tables])") from None
            except psycopg.errors.UndefinedColumn as exc:
                raise MeshError(f"service '{service}': {_first_line(exc)}") from None
        return ReadResult(rows=list(rows[:cap]), truncated=len(rows) > cap)

    @staticmethod
    async def _run(
        conn: psycopg.AsyncConnection[Any],
        query: sql.Composable | str,
        params: Sequence[Any] | dict[str, Any] | None,
        cap: int,
        timeout: int,
    ) -> list[dict[str, Any]]:
        async with conn.transaction():
            await conn.execute("SELECT set_config('statement_timeout', %s, true)", (str(timeout),))
            cur = await conn.execute(query, params)
            return await cur.fetchmany(cap + 1) if cur.description else []

    @staticmethod
    async def _discard(conn: psycopg.AsyncConnection[Any]) -> None:
        """Cancel what ``conn`` runs (bounded: the peer may not answer) and close it for good."""
        import psycopg

        try:
            with anyio.move_on_after(CANCEL_TIMEOUT_S):
                await conn.cancel_safe(timeout=math.ceil(CANCEL_TIMEOUT_S))
        except (psycopg.Error, OSError) as exc:
            log.debug("cancel of an expired read failed: %s", _first_line(exc))
        if not conn.closed:
            await conn.close()

    # -- Redis ------------------------------------------------------------------------
    # Topologies, TLS and several instances: see server/redis_settings.py and
    # server/redis_clients.py. ``instance=None`` means this object's default instance
    # (``[redis]``, or the one a view from ``bound_to`` was made for).

    def bound_to(self, instance: str) -> Connections:
        """A view sharing these pools and clients whose ``redis()`` defaults to ``instance``.

        A remediation plan runs on the instance of its stream or queue: the planner and the
        executor use such a view. Close the original, not the view.
        """
        view = copy.copy(self)
        view._default_instance = self._redis_instance(instance)
        return view

    def _redis_instance(self, instance: str | None) -> str:
        name = instance or self._default_instance
        if name != DEFAULT_INSTANCE and name not in self.settings.redis.instances:
            known = ", ".join(self.settings.redis.instance_names())
            raise NotFound(f"unknown Redis instance '{name}': configured instances are {known}")
        return name

    def _redis_pair(self, instance: str | None) -> tuple[Any, Any]:
        name = self._redis_instance(instance)
        pair = self._redis_clients.get(name)
        if pair is None:
            from server.redis_clients import build_clients

            pair = build_clients(self.settings.redis.instance(name), self.settings.limits)
            self._redis_clients[name] = pair
        return pair

    def redis(self, instance: str | None = None) -> Any:
        """The primary client of a Redis instance (connects on first command): writes and exact reads."""
        return self._redis_pair(instance)[0]

    def redis_reader(self, instance: str | None = None) -> Any:
        """The client read tools use: a replica when ``read_from_replicas``, else the primary."""
        return self._redis_pair(instance)[1]

    def redis_instance_for_stream(self, stream: str) -> str:
        """The instance a stream key lives on (``streams`` patterns; dead-letter keys follow their source)."""
        return route(self.settings, stream, kind="streams")

    def redis_instance_for_queue(self, queue: str) -> str:
        """The instance a BullMQ queue lives on (``queues`` patterns)."""
        return route(self.settings, queue, kind="queues")

    def redis_label(self, instance: str | None = None) -> str:
        name = instance or self._default_instance
        cfg = self.settings.redis.instance(name) if name in self.settings.redis.instance_names() else None
        what = "Redis" if name == DEFAULT_INSTANCE else f"Redis instance '{name}'"
        if cfg is None:
            return what
        if cfg.mode == "sentinel":
            return f"{what} (sentinel service '{cfg.service_name}' via {', '.join(cfg.sentinels)})"
        where = redact_dsn(cfg.url)
        return f"{what} at {where}" + (" (cluster)" if cfg.mode == "cluster" else "")

    @asynccontextmanager
    async def redis_errors(self, instance: str | None = None) -> AsyncIterator[None]:
        """Translate Redis failures into ServiceUnavailable / MeshError with a clear message."""
        import redis.exceptions as redis_errors

        label = self.redis_label(instance)
        try:
            yield
        except redis_errors.AuthenticationError as exc:
            text = _first_line(exc)
            if "HELLO must be called" in text or "NOAUTH" in text or "Authentication required" in text:
                reason = "a password is required and [redis] url has none"
            else:
                reason = f"authentication failed ({text})"
            raise ServiceUnavailable(
                label, f"{reason}: put the password in [redis] url (redis://:PASSWORD@host:port/db)"
            ) from None
        except redis_errors.CrossSlotTransactionError as exc:
            raise MeshError(f"{label}: keys of one transaction are in different cluster slots ({_first_line(exc)})"
                            ) from None
        except redis_errors.ResponseError as exc:
            text = _first_line(exc)
            if text.startswith("NOAUTH"):
                raise ServiceUnavailable(
                    label, "a password is required: put it in [redis] url (redis://:pw@host)"
                ) from None
            if text.startswith("WRONGTYPE"):
                raise InvalidArgument(f"{text}: the key exists but is not of the expected type") from None
            if text.startswith("CROSSSLOT"):
                raise MeshError(f"{label}: a command touched keys of different cluster slots ({text})") from None
            raise MeshError(f"Redis refused a command: {text}") from None
        except (redis_errors.ConnectionError, redis_errors.TimeoutError, OSError) as exc:
            raise ServiceUnavailable(label, _first_line(exc)) from None
        except redis_errors.RedisClusterException as exc:
            raise ServiceUnavailable(label, f"cluster: {_first_line(exc)}") from None

    async def aclose(self) -> None:
        for conns in self._idle.values():
            for conn in conns:
                if not conn.closed:
                    await conn.close()
        self._idle.clear()
        clients = {id(c): c for pair in self._redis_clients.values() for c in pair}
        self._redis_clients.clear()
        for client in clients.values():
            await client.aclose()
