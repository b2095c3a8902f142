"""What the tools share while the server runs: settings, connections, lazy services."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from server.config import Settings
from server.connections import Connections

T = TypeVar("T")


class Runtime:
    """Holds settings, the connection pools and capability services built on first use."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.connections = Connections(settings)
        self._services: dict[str, Any] = {}

    def service(self, key: str, factory: Callable[[], T]) -> T:
        """The capability service registered under ``key``, created by ``factory`` once."""
        if key not in self._services:
            self._services[key] = factory()
        return self._services[key]

    def existing(self, key: str) -> Any | None:
        """The service registered under ``key`` if one was created, else None (nothing is created)."""
        return self._services.get(key)

    async def aclose(self) -> None:
        for svc in self._services.values():
            closer = getattr(svc, "aclose", None)
            if closer is not None:
                await closer()
        await self.connections.aclose()
