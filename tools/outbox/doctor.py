"""Doctor checks of tools.outbox (placeholder until the capability lands)."""

from __future__ import annotations

from server.doctor import Check
from server.runtime import Runtime


async def checks(runtime: Runtime) -> list[Check]:
    return []
