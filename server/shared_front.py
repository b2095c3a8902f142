"""``mesh-mcp serve`` over stdio as a thin front to one long-lived process per workspace.

Every editor window (every MCP client) of a workspace starts its own ``mesh-mcp serve``. Each
of them used to import the MCP SDK (about 0.6 s) and load the index before it could answer. In
shared mode (the default for stdio on systems with Unix sockets) the process the client starts
is a front that imports nothing heavy: it connects to the workspace's shared server over a Unix
socket, starting it when none answers, and copies bytes between its stdin/stdout and that
socket. The shared server (:mod:`server.shared_daemon`) holds one index for all its clients, so
an edit is seen by all of them, and exits after ``--idle-exit`` seconds without a client.

Which shared server a front uses is decided by a key over everything that shapes the server's
settings: the Python executable and package version, the working directory, ``--workspace``,
``--config``, every ``MESH_*``, ``PG*``, ``SSL_*`` and ``REDIS*`` variable, ``HOME`` / ``XDG_*``
and the size and modification time of each config file that could be read. Two clients whose
settings could differ never share a process. A shared server whose settings turn remediation on
(from the user's config or ``MESH_ENABLE_REMEDIATION``) refuses to serve, and the front serves
in-process.

Shared mode is not used (the front serves in-process, as before) with ``--standalone`` or
``MESH_STANDALONE=1`` (containers, CI), with ``--http``, with ``--enable-remediation`` (the
approval gate stays in the process the user started), where Unix sockets are missing, or when the
runtime folder is not private to this user. When the shared server cannot be started within
``START_DEADLINE_S`` the front serves in-process: shared mode is never a failure.
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import os
import socket
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

log = logging.getLogger("mesh.serve.shared")

DEFAULT_IDLE_EXIT_S = 600.0
START_DEADLINE_S = 60.0
_CONFIG_NAMES = ("mesh.toml",)
# environment variables that shape what the server connects to or reads: libpq's PG* (host, password file,
# SSL files...), OpenSSL's and Python's certificate locations, the user's folders; any MESH_* setting
_KEYED_ENV_PREFIXES = ("MESH_", "PG", "SSL_", "REDIS")
_KEYED_ENV = {"HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME", "REQUESTS_CA_BUNDLE", "TZ"}


def shared_mode_refused(args: argparse.Namespace) -> str | None:
    """Why this ``serve`` runs in-process rather than through a shared server, or None."""
    if getattr(args, "http", None):
        return "--http serves its own clients"
    if getattr(args, "enable_remediation", False):
        return "--enable-remediation keeps the approval gate in the process the user started"
    if getattr(args, "standalone", False):
        return "--standalone"
    if os.environ.get("MESH_STANDALONE", "").strip().lower() in {"1", "true", "yes", "on"}:
        return "MESH_STANDALONE is set"
    if sys.platform == "win32" or not hasattr(socket, "AF_UNIX") or not hasattr(os, "getuid"):
        return "this system has no Unix sockets with owners (the shared server is POSIX-only)"
    return None


def runtime_dir(args: argparse.Namespace) -> Path:
    """The private folder of the sockets: ``--runtime-dir``, ``$XDG_RUNTIME_DIR/mesh-mcp`` or a temp folder.

    Raises OSError when it exists but is a symbolic link, belongs to another user or is open to
    group or others (another user could then reach the shared server or plant a socket)."""
    chosen = getattr(args, "runtime_dir", None)
    if chosen:
        path = Path(chosen)
    elif os.environ.get("XDG_RUNTIME_DIR"):
        path = Path(os.environ["XDG_RUNTIME_DIR"]) / "mesh-mcp"
    else:
        path = Path(tempfile.gettempdir()) / f"mesh-mcp-{os.getuid()}"
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode):
        raise OSError(f"{path} is not a folder")
    if info.st_uid != os.getuid():
        raise OSError(f"{path} belongs to another user")
    if info.st_mode & 0o077:
        raise OSError(f"{path} is open to other users (mode {oct(info.st_mode & 0o777)})")
    return path


def _file_stamp(path: Path | None) -> str:
    if path is None:
        return "-"
    try:
        info = path.stat()
    except OSError:
        return f"{path}:absent"
    return f"{path.resolve()}:{info.st_size}:{info.st_mtime_ns}"


def daemon_key(args: argparse.Namespace) -> str:
    """A short hex key naming the shared server of exactly these settings' inputs."""
    from server import __version__

    workspace = getattr(args, "workspace", None)
    config = getattr(args, "config", None)
    env = sorted((k, v) for k, v in os.environ.items() if k.startswith(_KEYED_ENV_PREFIXES) or k in _KEYED_ENV)
    candidates: list[Path | None] = [Path(config).resolve() if config else None]
    if os.environ.get("MESH_CONFIG"):
        candidates.append(Path(os.environ["MESH_CONFIG"]))
    base = Path(workspace).resolve() if workspace else Path.cwd()
    candidates += [base / name for name in _CONFIG_NAMES]
    config_home = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "mesh-mcp"
    candidates += [config_home / name for name in (*_CONFIG_NAMES, "trust.toml")]
    parts = [
        sys.executable, __version__, str(Path.cwd()), str(base), str(config or "-"), repr(env),
        *(_file_stamp(c) for c in candidates),
    ]
    return hashlib.sha256("\0".join(parts).encode("utf-8", "surrogateescape")).hexdigest()[:20]


def _connect(path: Path) -> socket.socket | None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(5.0)
        sock.connect(str(path))
        sock.settimeout(None)
        return sock
    except OSError:
        sock.close()
        return None


def _daemon_argv(args: argparse.Namespace, sock_path: Path) -> list[str]:
    argv = [sys.executable, "-m", "server.cli"]
    if getattr(args, "verbose", False):
        argv.append("--verbose")
    argv += ["serve", "--shared-daemon", str(sock_path), "--idle-exit", str(args.idle_exit)]
    if getattr(args, "workspace", None):
        argv += ["--workspace", str(Path(args.workspace).resolve())]
    if getattr(args, "config", None):
        argv += ["--config", str(Path(args.config).resolve())]
    return argv


def _start_daemon(args: argparse.Namespace, folder: Path, key: str) -> socket.socket | None:
    """Start the shared server (one at a time per key, under a lock file) and connect to it."""
    from filelock import FileLock, Timeout

    sock_path = folder / f"{key}.sock"
    try:
        with FileLock(str(folder / f"{key}.lock"), timeout=START_DEADLINE_S):
            sock = _connect(sock_path)  # another front may have started it while we waited
            if sock is not None:
                return sock
            sock_path.unlink(missing_ok=True)  # a socket nobody answers on (its process was killed)
            with open(folder / f"{key}.log", "wb") as err:  # the latest start's log only
                proc = subprocess.Popen(
                    _daemon_argv(args, sock_path), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                    stderr=err, cwd=os.getcwd(), start_new_session=True, close_fds=True,
                )
            deadline = time.monotonic() + START_DEADLINE_S
            while time.monotonic() < deadline:
                if proc.poll() is not None:
                    # a config the server refuses: the in-process start says why, on this stderr
                    log.debug("the shared server exited at start (code %s, log %s): serving in-process",
                              proc.returncode, folder / f"{key}.log")
                    return None
                if sock_path.exists():
                    sock = _connect(sock_path)
                    if sock is not None:
                        return sock
                time.sleep(0.02)
            log.warning("the shared server did not answer within %.0f s: serving in-process", START_DEADLINE_S)
            return None
    except Timeout:
        log.warning("another client held the start lock for %.0f s: serving in-process", START_DEADLINE_S)
        return None


def serve_through_shared(args: argparse.Namespace) -> int | None:
    """Serve this stdio client through the workspace's shared server; None to serve in-process."""
    reason = shared_mode_refused(args)
    if reason is not None:
        log.debug("serving in-process: %s", reason)
        return None
    try:
        folder = runtime_dir(args)
    except OSError as exc:
        log.warning("serving in-process: the runtime folder cannot be used (%s)", exc)
        return None
    from server.front_hello import Recorder, code_stamp, load_record
    from server.front_relay import SocketLink, pump, serve_from_record

    key = daemon_key(args)
    sock = _connect(folder / f"{key}.sock")
    if sock is None:
        record = load_record(folder, key, code_stamp())
        if record is not None:  # answered from the last session's handshake while the shared server starts
            return serve_from_record(args, record, lambda: _start_daemon(args, folder, key))
        sock = _start_daemon(args, folder, key)
    if sock is None:
        return None
    return pump(SocketLink(sock), Recorder(folder, key, code_stamp))
