"""The shared server of a workspace: one MCP server, one index, one MCP session per connected front.

Started by :mod:`server.shared_front` as ``mesh-mcp serve --shared-daemon SOCKET``. It builds
the server exactly as ``mesh-mcp serve`` does (same settings, same warm-up), listens on the Unix
socket (mode 0600 inside the private runtime folder), and runs each accepted connection as an
MCP session over newline-delimited JSON-RPC, the stdio framing. It exits when no client has
been connected for ``--idle-exit`` seconds, or when its socket was removed or replaced (another
shared server took the key over); it removes its socket and pid file when they are still its own.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread

log = logging.getLogger("mesh.serve.shared")

_ACCEPT_POLL_S = 0.5


class _Clients:
    def __init__(self) -> None:
        self.connected = 0
        self.served = 0
        self.idle_since = time.monotonic()


def _bind(sock_path: Path) -> tuple[socket.socket, int]:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock_path.unlink(missing_ok=True)  # started under the front's lock: a leftover is a dead server's
    old_umask = os.umask(0o177)
    try:
        listener.bind(str(sock_path))
    finally:
        os.umask(old_umask)
    listener.listen(64)
    listener.settimeout(_ACCEPT_POLL_S)
    return listener, os.stat(sock_path).st_ino


def _still_ours(sock_path: Path, inode: int) -> bool:
    try:
        return os.stat(sock_path).st_ino == inode
    except OSError:
        return False


async def _session(lowlevel: Any, conn: socket.socket, clients: _Clients) -> None:
    from mcp.server.stdio import stdio_server

    clients.connected += 1
    clients.served += 1
    reader = conn.makefile("r", encoding="utf-8", errors="replace", newline="\n")
    writer = conn.makefile("w", encoding="utf-8", newline="\n")
    try:
        async with stdio_server(stdin=anyio.wrap_file(reader), stdout=anyio.wrap_file(writer)) as (r, w):
            await lowlevel.run(r, w, lowlevel.create_initialization_options())
    except Exception:  # one client's broken connection never takes the others down
        log.exception("a shared-server session ended with an error")
    finally:
        for part in (reader, writer, conn):
            with contextlib.suppress(OSError):
                part.close()
        clients.connected -= 1
        clients.idle_since = time.monotonic()


def _accept(listener: socket.socket) -> socket.socket | None:
    try:
        conn, _ = listener.accept()
    except TimeoutError:
        return None
    conn.settimeout(None)
    return conn


async def _serve(lowlevel: Any, listener: socket.socket, sock_path: Path, inode: int, idle_exit_s: float) -> None:
    clients = _Clients()
    async with anyio.create_task_group() as tg:
        while True:
            conn = await anyio.to_thread.run_sync(_accept, listener)
            if conn is not None:
                tg.start_soon(_session, lowlevel, conn, clients)
                continue
            if not _still_ours(sock_path, inode):
                log.warning("the socket %s was removed or replaced: this shared server stops accepting", sock_path)
                break
            if clients.connected == 0 and time.monotonic() - clients.idle_since >= idle_exit_s:
                log.info("no client for %.0f s: the shared server exits", idle_exit_s)
                break
    log.info("the shared server served %d client(s)", clients.served)


def _load_quietly(load_index: Callable[[Any], None], server: Any) -> None:
    try:
        load_index(server)
    except Exception:  # the first call reports the index's error to its client
        log.exception("the shared server could not load the index ahead of its first call")


def run_daemon(args: argparse.Namespace, build_stdio_server: Callable[[argparse.Namespace], Any],
               load_index: Callable[[Any], None]) -> int:
    """Build the server with ``build_stdio_server(args)`` (serve's own builder), listen on
    ``args.shared_daemon``, load the index in the background (``load_index(server)``) and serve until
    idle; the exit code."""
    from server.startup_gc import collector_paused

    sock_path = Path(args.shared_daemon)
    pid_path = sock_path.with_suffix(".pid")
    with collector_paused():
        server = build_stdio_server(args)
    runtime = getattr(server, "runtime", None)
    if runtime is not None and runtime.settings.enable_remediation:
        log.warning("remediation is enabled by the settings: the approval gate stays in the client's own process, "
                    "so this shared server does not start (the front serves in-process)")
        return 3
    lowlevel = getattr(server, "_lowlevel_server", None)
    if lowlevel is None or not hasattr(lowlevel, "run"):
        raise RuntimeError("this MCP SDK does not expose the low-level server the shared mode runs sessions on")
    listener, inode = _bind(sock_path)
    pid_path.write_text(f"{os.getpid()}\n")
    threading.Thread(target=_load_quietly, args=(load_index, server), name="mesh-shared-index", daemon=True).start()
    log.info("shared server pid %d listening on %s", os.getpid(), sock_path)
    try:
        anyio.run(_serve, lowlevel, listener, sock_path, inode, float(args.idle_exit))
    finally:
        listener.close()
        if _still_ours(sock_path, inode):
            sock_path.unlink(missing_ok=True)
            pid_path.unlink(missing_ok=True)
    return 0
