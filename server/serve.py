"""``mesh-mcp serve``: the MCP server over stdio (default) or streamable HTTP.

HTTP mode is authenticated with a bearer token when one is configured (``MESH_HTTP_TOKEN`` or
``[http] token_file``, see :mod:`server.http_auth`) and refuses a non-loopback address without one.
"""

from __future__ import annotations

import argparse
import copy
import logging
from typing import TYPE_CHECKING, Any

from server.errors import InvalidArgument
from server.startup_gc import collector_paused

if TYPE_CHECKING:  # the SDK is imported by build_server, after the index warm-up started
    from mcp.server.mcpserver import MCPServer

    from server.config import Settings

log = logging.getLogger("mesh.serve")


def parse_host_port(value: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:8000`` for IPv6) -> (host, port)."""
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise InvalidArgument(f"--http expects HOST:PORT such as 127.0.0.1:8765, got {value!r}")
    return host.strip("[]"), int(port)


def _stderr_log_config() -> dict[str, Any]:
    """uvicorn's logging config with every handler on stderr (stdout stays clean)."""
    import uvicorn.config

    config = copy.deepcopy(uvicorn.config.LOGGING_CONFIG)
    for handler in config["handlers"].values():
        handler["stream"] = "ext://sys.stderr"
    return config


def build_http_server(settings: Settings, host: str, port: int) -> tuple[MCPServer, bool]:
    """The server for HTTP on ``host:port`` and whether it requires a bearer token.

    Raises ``InvalidArgument`` when ``host`` is not loopback and no token is configured, or the
    token is unusable.
    """
    from server.app import build_server
    from server.http_auth import http_auth, load_http_token, require_token_for

    token = load_http_token(settings)
    require_token_for(host, token)
    if token is None:
        return build_server(settings), False
    auth, verifier = http_auth(host, port, token)
    return build_server(settings, auth=auth, token_verifier=verifier), True


def run_http(server: MCPServer, settings: Settings, host: str, port: int) -> None:
    """Serve streamable HTTP at ``http://HOST:PORT/mcp`` until interrupted."""
    import uvicorn

    from server.http_auth import transport_security

    app = server.streamable_http_app(
        streamable_http_path="/mcp", host=host, transport_security=transport_security(settings, host)
    )
    uvicorn.run(app, host=host, port=port, log_config=_stderr_log_config(), log_level="warning")


def cmd_serve(args: argparse.Namespace) -> int:
    if getattr(args, "shared_daemon", None):
        from server.shared_daemon import run_daemon

        return run_daemon(args, build_stdio_server, load_index_now)
    if not args.http:
        from server.shared_front import serve_through_shared

        code = serve_through_shared(args)  # None: shared mode refused or unavailable, serve in-process
        if code is not None:
            return code
    with collector_paused():  # the start-up makes long-lived objects, hardly any garbage (server/startup_gc.py)
        server, settings, http = _start(args)
    if http is not None:
        run_http(server, settings, *http)
    else:
        server.run("stdio")
    return 0


def build_stdio_server(args: argparse.Namespace) -> MCPServer:
    """The server ``serve`` runs over stdio (the shared server runs it over its socket), warm-up started."""
    return _start(args)[0]


def load_index_now(server: MCPServer) -> None:
    """Load the workspace's index and the tools' result models into memory (the shared server does it after
    binding its socket, so that its clients' first call is answered from memory; a start-up from the manifest
    loads them on first use)."""
    from server.sdk_tools import load_output_model
    from tools.mesh_index.service import get_index_service

    for tool in server._tool_manager.list_tools():  # each tool's result model, imported on a first call otherwise
        load_output_model(server, tool.name)
    import tools.mesh_index.summary  # noqa: F401  (analyze_impact's summary, the agents' first call)

    runtime = server.runtime  # type: ignore[attr-defined]
    if runtime.settings.workspace is not None:
        service = get_index_service(runtime)
        service.info()
        service.refresh()  # what a call does first: sets the folder watches when the start came from the manifest
        from tools.skills.service import get_skill_links

        get_skill_links(runtime).workspace_skills()  # every result links its related skills: the first walks


def _start(args: argparse.Namespace) -> tuple[MCPServer, Settings, tuple[str, int] | None]:
    """The built server, its settings and, in HTTP mode, (host, port); the index warm-up started."""
    from server.cli_support import settings_from_args
    from tools.mesh_index.warmup import adopt, start_warm_up

    settings = settings_from_args(args)
    warm = start_warm_up(settings)  # the index loads while the MCP SDK is imported
    if settings.enable_remediation:
        from server.approval.trust import log_gate_at_start

        log_gate_at_start(settings)
    mode = "remediation" if settings.enable_remediation else "read-only"
    if args.http:
        host, port = parse_host_port(args.http)
        server, authenticated = build_http_server(settings, host, port)
        adopt(server.runtime, warm)  # type: ignore[attr-defined]
        auth = "bearer token required" if authenticated else "no token (loopback only)"
        log.warning("mesh-mcp serving streamable HTTP on http://%s:%d/mcp (%s, %s)", host, port, mode, auth)
        return server, settings, (host, port)
    from server.app import build_server

    server = build_server(settings)
    adopt(server.runtime, warm)  # type: ignore[attr-defined]
    return server, settings, None
