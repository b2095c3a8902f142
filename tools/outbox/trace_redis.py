"""The Redis side of a trace: each read on its instance, an instance that is down recorded once.

:meth:`TraceRedis._redis` runs one read on the instance that holds a key; when that instance is
down the read answers None, the instance is named once in ``unavailable`` (``redis`` for the
default instance, ``redis:<name>`` for another) and ``redis_ok`` turns False, so the hop it
served is reported unknown (:meth:`TraceRedis._redis_unknown`), never guessed. The instances read
are the trace's ``redis_sources``. :meth:`TraceRedis.clock_offset` measures Redis ``TIME`` against
the database clock once per service, so stream ids are searched around the row's times.
"""

from __future__ import annotations

from typing import Any

from server.config import Settings
from server.connections import Connections
from server.errors import MeshError, ServiceUnavailable
from server.redis_routing import RedisSource, redis_source
from server.redis_settings import DEFAULT_INSTANCE
from tools.outbox.model import Hop, ServiceProblem
from tools.outbox.schema_discovery import SchemaCatalog
from tools.outbox.trace_search import TraceSearch
from tools.outbox.trace_streams import redis_now_ms

CLOCK_SQL = "SELECT (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::bigint AS now_ms"


def redis_name(instance: str) -> str:
    """How a Redis instance is named in ``unavailable`` and in sentences."""
    return "redis" if instance == DEFAULT_INSTANCE else f"redis:{instance}"


class TraceRedis(TraceSearch):
    """The SQL reads of :class:`TraceSearch` plus the Redis reads, with the outages and clock offsets met."""

    def __init__(self, connections: Connections, settings: Settings, catalog: SchemaCatalog) -> None:
        super().__init__(connections, settings, catalog)
        self.redis_ok = True
        self.offsets: dict[str, int] = {}
        self.redis_down: set[str] = set()
        self.redis_used: list[str] = []

    async def _redis(self, coro_fn: Any, instance: str, *args: Any, **kwargs: Any) -> Any:
        """Run a Redis step on ``instance`` (its read client is the first argument).

        When that instance is down, record it once and return None.
        """
        if instance in self.redis_down:
            return None
        if instance not in self.redis_used:
            self.redis_used.append(instance)
        try:
            async with self.connections.redis_errors(instance):
                return await coro_fn(self.connections.redis_reader(instance), *args, **kwargs)
        except ServiceUnavailable as exc:
            self.redis_ok = False
            self.redis_down.add(instance)
            self.unavailable.append(ServiceProblem(service=redis_name(instance), error=str(exc)))
            return None

    def sources(self) -> list[RedisSource]:
        return [redis_source(self.settings, i) for i in self.redis_used]

    def _redis_unknown(self, name: str, ref: str) -> Hop:
        return Hop(name=name, ref=ref, found=False, state="unknown", healthy=None,
                   detail="Redis is unavailable: this hop could not be observed")

    async def clock_offset(self, service: str, instance: str, key: str) -> int:
        """Redis ``TIME`` minus the database's ``now()`` in ms, measured once per call and service.

        The database is read between two Redis ``TIME`` calls and compared with their middle,
        so the round trips do not count as offset. 0 when either cannot be read.
        """
        if service in self.offsets:
            return self.offsets[service]
        before = await self._redis(redis_now_ms, instance, key)
        if before is None:
            return 0
        try:
            result = await self.connections.read(service, CLOCK_SQL, max_rows=1)
        except MeshError:
            return 0  # the row was read a moment ago; without the offset the window is just not shifted
        after = await self._redis(redis_now_ms, instance, key)
        if after is None:
            return 0
        self.offsets[service] = (before + after) // 2 - int(result.rows[0]["now_ms"])
        return self.offsets[service]
