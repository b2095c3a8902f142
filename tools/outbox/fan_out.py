"""Run one step per service database concurrently, the others answering when one fails.

The runtime tools take ``service=None`` for "every configured service". A service whose
step fails (database down, table missing, timeout) is then reported as a
:class:`~tools.outbox.model.ServiceProblem` while the others answer. When the caller named
one service, its failure is the answer and is raised. A malformed argument
(``InvalidArgument``) is always raised: it is the caller's mistake, not the service's.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio

from server.errors import InvalidArgument, MeshError
from tools.outbox.model import ServiceProblem


async def each_service(
    services: list[str], step: Callable[[str], Awaitable[None]], *, named: bool
) -> list[ServiceProblem]:
    """Run ``step(name)`` for every service concurrently; the problems of those that failed, by name.

    ``named`` is True when the caller asked for one service by name: its error is raised.
    """
    problems: list[ServiceProblem] = []

    async def one(name: str) -> None:
        try:
            await step(name)
        except MeshError as exc:
            if named or isinstance(exc, InvalidArgument):
                raise
            problems.append(ServiceProblem(service=name, error=str(exc)))

    try:
        async with anyio.create_task_group() as tg:
            for name in services:
                tg.start_soon(one, name)
    except BaseExceptionGroup as group:
        raise group.exceptions[0] from None
    return sorted(problems, key=lambda p: p.service)
