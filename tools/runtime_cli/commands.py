"""The runtime commands: each calls the library function its MCP tool calls, then prints or exits.

Exit codes: :mod:`tools.runtime_cli.exits`.
"""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from server.cli_support import fail, print_json, settings_from_args
from tools.runtime_cli import exits

if TYPE_CHECKING:
    from server.runtime import Runtime

T = TypeVar("T")


def _run(args: argparse.Namespace, call: Callable[[Runtime], Awaitable[T]]) -> tuple[T | None, int]:
    """``call(runtime)`` on a fresh Runtime; an anticipated error printed on stderr with its exit code."""
    import anyio

    from server.errors import MeshError, NotFound, ServiceUnavailable, StatementTimeout
    from server.runtime import Runtime

    settings = settings_from_args(args)

    async def go() -> T:
        runtime = Runtime(settings)
        try:
            return await call(runtime)
        finally:
            await runtime.aclose()

    try:
        return anyio.run(go), exits.OK
    except (ServiceUnavailable, StatementTimeout) as exc:
        return None, fail(str(exc), exits.UNAVAILABLE)
    except NotFound as exc:
        return None, fail(str(exc), exits.USAGE)
    except MeshError as exc:
        return None, fail(str(exc), exits.USAGE)


def _emit(args: argparse.Namespace, value: Any, text: Callable[[], str]) -> None:
    if args.json:
        print_json(value)
    else:
        _print(text())


def _print(text: str) -> None:
    """``text`` with its long lines wrapped to the terminal (tables already fit it)."""
    from server.cli_support import terminal_width
    from server.tables import fit_lines

    print(fit_lines(text, terminal_width()))


def cmd_trace(args: argparse.Namespace) -> int:
    """``trace job ID`` / ``trace event ID``: trace_job / trace_event."""
    from tools.detail import shaped
    from tools.flow_map.trace_mermaid import trace_mermaid
    from tools.outbox.mcp_tools import catalog_of
    from tools.outbox.summary import summarise_trace
    from tools.outbox.trace import Tracer
    from tools.runtime_cli import render
    from tools.skills.model import attach_related
    from tools.skills.trace_links import related_to_trace

    async def call(runtime: Runtime) -> tuple[Any, str | None]:
        tracer = Tracer(runtime.connections, runtime.settings, catalog_of(runtime))
        if args.kind == "job":
            report = await tracer.trace_job(args.service, args.id)
        else:
            report = await tracer.trace_event(args.service, args.id)
        report.mermaid = trace_mermaid(report)
        return report, attach_related(report, await related_to_trace(runtime, report))

    answer, code = _run(args, call)
    if answer is None:
        return code
    report, related = answer
    if args.json:
        limits = settings_from_args(args).limits
        print_json(shaped(report, args.detail, summarise_trace, limits.summary_items))
    else:
        _print("\n".join(filter(None, [render.trace_text(report), related])))
    return render.trace_exit(report)


def cmd_health(args: argparse.Namespace) -> int:
    """``health``: outbox_health."""
    from tools.outbox import health as health_lib
    from tools.outbox.mcp_tools import catalog_of
    from tools.runtime_cli import render

    async def call(runtime: Runtime) -> Any:
        return await health_lib.outbox_health(runtime.connections, runtime.settings, catalog_of(runtime),
                                              args.service)

    report, code = _run(args, call)
    if report is None:
        return code
    _emit(args, report, lambda: render.health_text(report))
    if any(not svc.available for svc in report.services):
        return exits.UNAVAILABLE
    return exits.OK if report.ok else exits.PROBLEM


def cmd_stream(args: argparse.Namespace) -> int:
    """``stream NAME``: inspect_stream."""
    from tools.runtime_cli import render
    from tools.streams.inspect import inspect_stream

    async def call(runtime: Runtime) -> Any:
        return await inspect_stream(runtime.connections, runtime.settings, args.name)

    report, code = _run(args, call)
    if report is None:
        return code
    if args.json:
        from tools.detail import shaped
        from tools.streams.summary import summarise_stream

        print_json(shaped(report, args.detail, summarise_stream, settings_from_args(args).limits.summary_items))
    else:
        _print(render.stream_text(report))
    return exits.PROBLEM if render.serious(report.anomalies) else exits.OK


def cmd_dlq(args: argparse.Namespace) -> int:
    """``dlq``: dlq_list."""
    from tools.runtime_cli import render
    from tools.streams.dlq import list_dead_letters

    async def call(runtime: Runtime) -> Any:
        return await list_dead_letters(runtime.connections, runtime.settings, stream=args.stream, count=args.count,
                                       cursor=args.cursor, type=args.type, contains=args.contains)

    page, code = _run(args, call)
    if page is None:
        return code
    _emit(args, page, lambda: render.dlq_text(page))
    return exits.PROBLEM if page.entries else exits.OK


def cmd_queue(args: argparse.Namespace) -> int:
    """``queue NAME``: inspect_queue."""
    from tools.queues.bull import inspect_queue
    from tools.runtime_cli import render

    async def call(runtime: Runtime) -> Any:
        return await inspect_queue(runtime.connections, runtime.settings, args.name, job_id=args.job_id,
                                   failures=args.failures)

    report, code = _run(args, call)
    if report is None:
        return code
    _emit(args, report, lambda: render.queue_text(report))
    return render.queue_exit(report)


def cmd_rows(args: argparse.Namespace) -> int:
    """``rows SERVICE TABLE``: query_outbox (a listing: exit 0 unless the service is unavailable)."""
    from tools.outbox import query_outbox as query_lib
    from tools.outbox.mcp_tools import catalog_of
    from tools.runtime_cli import render

    async def call(runtime: Runtime) -> Any:
        return await query_lib.query_outbox(
            runtime.connections, runtime.settings, catalog_of(runtime), service=args.service, table=args.table,
            status=args.status, type=args.type, id=args.id, older_than_s=args.older_than_s, limit=args.limit,
            cursor=args.cursor,
        )

    result, code = _run(args, call)
    if result is None:
        return code
    _emit(args, result, lambda: render.rows_text(result))
    return exits.UNAVAILABLE if result.unavailable else exits.OK
