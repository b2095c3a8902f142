"""The SQL reads of one ``trace_request`` call: one pooled connection per service, held for the
whole call, in one READ ONLY REPEATABLE READ transaction (one snapshot of each database, so the
tree is not torn by rows changing between lookups); the statement timeout is set once per
transaction (``SET LOCAL``); several lookups of one level go out together in one round trip
(:meth:`RequestReads.read_many`, psycopg's pipeline mode).

Each read keeps the guarantees of :meth:`server.connections.Connections.read`: bound
parameters, a row cap, the server-side statement timeout and a client-side deadline (the
timeout plus ``[limits] sql_deadline_margin_ms``) after which the connection is cancelled and
dropped and the service is named in a :class:`~server.errors.ServiceUnavailable`. A failed
read rolls the transaction back; the next read opens a new one.

:class:`RequestReads` also stands in for :class:`~server.connections.Connections` where the
tracer of :mod:`tools.outbox.trace` expects one (``read``; everything else is delegated), so
the chains of the items are read in the same transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AsyncExitStack
from typing import Any

import anyio

from server.connections import Connections, ReadResult, _first_line
from server.errors import MeshError, NotFound, ServiceUnavailable, StatementTimeout
from server.lazy_modules import LazyModule

psycopg = LazyModule("psycopg")
sql = LazyModule("psycopg.sql")

Read = tuple[Any, Sequence[Any] | None, int]
"""(query: a ``psycopg.sql.Composable`` or str, params, max_rows)"""


class RequestReads:
    """Per-call SQL reads (see the module docstring). Use ``async with RequestReads(connections):``."""

    def __init__(self, connections: Connections) -> None:
        self.connections = connections
        self.settings = connections.settings
        self._stack = AsyncExitStack()
        self._conns: dict[str, psycopg.AsyncConnection[Any]] = {}
        self._locks: dict[str, anyio.Lock] = {}
        self.round_trips = 0
        """Statements sent (a pipelined batch counts once): what the bench and the tests check."""

    def __getattr__(self, name: str) -> Any:  # redis_reader, redis_instance_for_stream, ... of the real pools
        return getattr(self.connections, name)

    async def __aenter__(self) -> RequestReads:
        await self._stack.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self._conns.clear()
        await self._stack.__aexit__(*exc)

    # -- connections ------------------------------------------------------------------------------

    def _label(self, service: str) -> str:
        return f"PostgreSQL of service '{service}'"

    async def _conn(self, service: str, timeout_ms: int) -> psycopg.AsyncConnection[Any]:
        conn = self._conns.get(service)
        if conn is None or conn.closed or conn.broken:
            conn = await self._stack.enter_async_context(self.connections.pg(service))
            self._conns[service] = conn
        if conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
            # the implicit BEGIN (the connection is read only) and the transaction's settings, one round trip
            self.round_trips += 1
            await conn.execute(sql.SQL(
                "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY; SET LOCAL statement_timeout = {}"
            ).format(sql.Literal(int(timeout_ms))))
        return conn

    async def _drop(self, service: str) -> None:
        conn = self._conns.pop(service, None)
        if conn is not None:
            await Connections._discard(conn)

    # -- reads --------------------------------------------------------------------------------------

    async def read(self, service: str, query: sql.Composable | str, params: Sequence[Any] | dict[str, Any] | None
                   = None, *, max_rows: int | None = None, timeout_ms: int | None = None,
                   catalog: bool = False) -> ReadResult:
        """One SELECT in the call's transaction of ``service`` (same contract as ``Connections.read``; a
        ``catalog`` read keeps its ``max_rows`` whole, as every read here does)."""
        cap = self.settings.limits.max_rows if max_rows is None else max_rows
        return (await self.read_many(service, [(query, params, cap)], timeout_ms=timeout_ms))[0]  # type: ignore[list-item]

    async def read_many(self, service: str, reads: list[Read], *, timeout_ms: int | None = None) -> list[ReadResult]:
        """Several SELECTs of ``service`` in one round trip (pipeline), in the call's transaction."""
        if not reads:
            return []
        self.connections.resolve_services(service)
        limits = self.settings.limits
        timeout = timeout_ms if timeout_ms is not None else limits.statement_timeout_ms
        deadline_ms = timeout * len(reads) + limits.sql_deadline_margin_ms
        lock = self._locks.setdefault(service, anyio.Lock())
        async with lock:
            try:
                with anyio.fail_after(deadline_ms / 1000):
                    conn = await self._conn(service, timeout)
                    rows = await self._run(conn, reads)
            except TimeoutError:
                await self._drop(service)
                raise ServiceUnavailable(
                    self._label(service),
                    f"no reply within the client-side deadline of {deadline_ms} ms (statement timeout {timeout} ms "
                    f"+ margin {limits.sql_deadline_margin_ms} ms): the connection was cancelled and dropped; check "
                    "the network to the database and whether it is failing over",
                ) from None
            except psycopg.errors.QueryCanceled:
                await self._rollback(service)
                raise StatementTimeout(service, timeout) from None
            except psycopg.errors.UndefinedTable as exc:
                await self._rollback(service)
                raise NotFound(f"service '{service}': {_first_line(exc)} (check [conventions.tables])") from None
            except psycopg.errors.UndefinedColumn as exc:
                await self._rollback(service)
                raise MeshError(f"service '{service}': {_first_line(exc)}") from None
            except psycopg.OperationalError as exc:
                await self._drop(service)
                raise ServiceUnavailable(self._label(service), _first_line(exc)) from None
            except psycopg.Error:
                await self._rollback(service)
                raise
        out = []
        for got, (_q, _p, cap) in zip(rows, reads, strict=True):
            capped = min(cap, limits.max_rows)
            out.append(ReadResult(rows=list(got[:capped]), truncated=len(got) > capped))
        return out

    async def _rollback(self, service: str) -> None:
        conn = self._conns.get(service)
        if conn is None:
            return
        try:
            await conn.rollback()
        except psycopg.Error:
            await self._drop(service)

    async def _run(self, conn: psycopg.AsyncConnection[Any], reads: list[Read]) -> list[list[dict[str, Any]]]:
        self.round_trips += 1
        caps = [min(cap, self.settings.limits.max_rows) for _q, _p, cap in reads]
        if len(reads) == 1:
            query, params, _cap = reads[0]
            cur = await conn.execute(query, params)
            return [await cur.fetchmany(caps[0] + 1) if cur.description else []]
        async with conn.pipeline() as pipe:
            cursors = [await conn.cursor().execute(query, params) for query, params, _cap in reads]
            await pipe.sync()
            return [await cur.fetchmany(cap + 1) if cur.description else [] for cur, cap in zip(cursors, caps,
                                                                                                 strict=True)]
