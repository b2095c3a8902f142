"""``mesh-mcp serve``: the MCP server over stdio (default) or streamable HTTP.

HTTP mode is authenticated with a bearer token when one is configured (``MESH_HTTP_TOKEN`` or
``[http] token_file``, see :mod:`server.http_auth`) and refuses a non-loopback address without one.
"""

from __future__ import annotations

import argparse
import copy
import logging
from typing import TYPE_CHECKING, Any

from server.errors import InvalidArgument, MeshError
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


def ensure_port_free(host: str, port: int) -> None:
    """Raise ``MeshError`` naming the address when ``host:port`` cannot be bound (in use, or not ours),
    before anything says the server is up (uvicorn would log a bare "address already in use")."""
    import errno
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    probe = socket.socket(family, socket.SOCK_STREAM)
    try:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds: TIME_WAIT is no conflict
        probe.bind((host, port))
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise MeshError(f"cannot serve HTTP on {host}:{port}: port {port} is already in use (another mesh-mcp "
                            "or another server?): stop it, or pass another port with --http HOST:PORT") from None
        raise MeshError(f"cannot serve HTTP on {host}:{port}: {exc.strerror or exc}") from None
    finally:
        probe.close()


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

        links = get_skill_links(runtime)
        links.workspace_skills()  # every result links its related skills: the first walks
        _warm_first_call(links)


def _warm_first_call(links: object) -> None:
    """What the first analyze_impact would do once: complete the result models whose references
    were left to resolve on first use, and find the code spans of the skills every answer links."""
    from pydantic import BaseModel

    from tools.mesh_index import model as index_model
    from tools.skills.related import TargetFacts

    for value in vars(index_model).values():
        if isinstance(value, type) and issubclass(value, BaseModel) and value.__module__ == index_model.__name__ \
                and not value.__pydantic_complete__:
            value.model_rebuild()
    links.related(TargetFacts(names=["mesh-mcp warm-up"], tables=["mesh-mcp warm-up"]))  # type: ignore[attr-defined]


def _start(args: argparse.Namespace) -> tuple[MCPServer, Settings, tuple[str, int] | None]:
    """The built server, its settings and, in HTTP mode, (host, port); the index warm-up started."""
    from server.cli_support import settings_from_args
    from server.errors import ConfigError
    from tools.mesh_index.warmup import adopt, start_warm_up

    try:
        settings = settings_from_args(args)
    except ConfigError as exc:
        return _start_degraded(args, str(exc))
    warm = start_warm_up(settings)  # the index loads while the MCP SDK is imported
    if settings.enable_remediation:
        from server.approval.trust import log_gate_at_start

        log_gate_at_start(settings)
    mode = "remediation" if settings.enable_remediation else "read-only"
    if args.http:
        host, port = parse_host_port(args.http)
        ensure_port_free(host, port)
        server, authenticated = build_http_server(settings, host, port)
        adopt(server.runtime, warm)  # type: ignore[attr-defined]
        auth = "bearer token required" if authenticated else "no token (loopback only)"
        log.warning("mesh-mcp serving streamable HTTP on http://%s:%d/mcp (%s, %s)", host, port, mode, auth)
        return server, settings, (host, port)
    from server.app import build_server

    server = build_server(settings)
    adopt(server.runtime, warm)  # type: ignore[attr-defined]
    return server, settings, None


CONFIG_FIX = ("fix the file or the MESH_* variable it names (docs/configuration.md), check it with `mesh-mcp doctor` "
              "(same --config / --workspace), then restart the server (reconnect in the client)")


def _start_degraded(args: argparse.Namespace, error: str) -> tuple[MCPServer, Settings, tuple[str, int] | None]:
    """A broken configuration: serve anyway, every tool answering with the error, so the agent's user sees it
    (a client shows little more than "failed to connect" for a server that exits before the handshake).

    Built on the default settings without a workspace, writing nothing (no schema cache, no index)."""
    from server.app import build_server
    from server.config import Settings

    message = f"{error} — {CONFIG_FIX}"
    log.error("configuration error: %s; serving in degraded mode (every tool answers with this error)", error)
    settings = Settings()
    if args.http:
        host, port = parse_host_port(args.http)
        ensure_port_free(host, port)
        from server.http_auth import require_token_for

        require_token_for(host, None)  # degraded: no token could be read, so loopback only
        return build_server(settings, cache_schemas=False, config_error=message), settings, (host, port)
    return build_server(settings, cache_schemas=False, config_error=message), settings, None
