"""The first client of a workspace answered while its shared server starts.

A front that finds the workspace's shared server running answers ``tools/list`` in a tenth of the
SDK's import time; the first client after the shared server's idle exit used to wait for a new
one to import the SDK and bind its socket (1.3-1.5x that import). Every session relayed through a
shared server now leaves a **record** of its handshake next to the socket: the first
``initialize`` or ``server/discover`` request (the stateless protocol's) and ``tools/list``
request of the client, each with the server's answer (``<key>.hello.json``, in the private runtime
folder; the key names the settings' inputs, see :func:`server.shared_front.daemon_key`, and the
record also carries a stamp of the installed code).

When no shared server answers and a record of the same key and code exists, the front starts the
shared server in the background and meanwhile:

- answers each handshake request whose method and parameters are byte for byte a recorded one
  (same client, same protocol version and capabilities); anything else is relayed as before,
  once the server is up;
- holds notifications (``notifications/initialized``);
- at the first other request, connects: sends the client's own ``initialize`` / ``server/discover``
  requests to the server and drops their answers (the client has them), sends what it held, then
  copies bytes both ways.

If the shared server cannot start, the front relays to a ``mesh-mcp serve --standalone`` child
instead (the same handshake): the client never sees the difference.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

log = logging.getLogger("mesh.serve.shared")

RECORD_FORMAT = 2
HANDSHAKE = ("initialize", "server/discover", "tools/list")  # the requests a record answers
OPENING = ("initialize", "server/discover")  # answered from a record: sent again to the server, its answer dropped
MAX_RECORD_BYTES = 4_000_000
MAX_LINE_BYTES = 4_000_000
_WATCHED_MESSAGES = 16  # a record is made from the first messages of a session, or not at all
_CODE_ROOTS = ("server", "tools", "resources")


def record_path(folder: Path, key: str) -> Path:
    return folder / f"{key}.hello.json"


def code_stamp() -> str:
    """A digest of the size and mtime of every Python module of this installation (a changed tool
    description, a new tool: a record made by other code is not used)."""
    root = Path(__file__).resolve().parent.parent
    h = hashlib.sha256()
    for top in _CODE_ROOTS:
        for dirpath, dirnames, filenames in os.walk(root / top):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            for name in sorted(filenames):
                if name.endswith(".py"):
                    with contextlib.suppress(OSError):
                        st = os.stat(os.path.join(dirpath, name))
                        h.update(f"{dirpath}/{name}:{st.st_size}:{st.st_mtime_ns}\n".encode("utf-8", "replace"))
    return h.hexdigest()[:24]


def canonical(params: Any) -> str:
    return json.dumps(params, sort_keys=True, separators=(",", ":"))


def load_record(folder: Path, key: str, stamp: str) -> dict[str, Any] | None:
    """The record of ``key`` made by this code, or None (absent, unreadable, another code's, too large)."""
    try:
        fd = os.open(record_path(folder, key), os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid() or info.st_size > MAX_RECORD_BYTES:
            return None
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = json.loads(fh.read(MAX_RECORD_BYTES + 1))
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)
    if not isinstance(data, dict) or data.get("format") != RECORD_FORMAT or data.get("code") != stamp:
        return None
    answers = data.get("answers")
    if not isinstance(answers, list) or not all(
            isinstance(a, dict) and a.get("method") in HANDSHAKE and isinstance(a.get("params"), str) and "result" in a
            for a in answers):
        return None
    return data


def _write_record(folder: Path, key: str, record: dict[str, Any]) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{key}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(record, fh, separators=(",", ":"))
        os.replace(tmp, record_path(folder, key))
    except OSError as exc:
        log.debug("the handshake record could not be written: %s", exc)
        with contextlib.suppress(OSError):
            os.unlink(tmp)


class _Lines:
    """Complete newline-delimited JSON objects out of a byte stream (longer lines are given up on)."""

    def __init__(self) -> None:
        self.buffer = b""
        self.broken = False

    def feed(self, data: bytes) -> list[dict[str, Any]]:
        if self.broken:
            return []
        self.buffer += data
        out = []
        while b"\n" in self.buffer:
            line, self.buffer = self.buffer.split(b"\n", 1)
            with contextlib.suppress(ValueError):
                message = json.loads(line)
                if isinstance(message, dict):
                    out.append(message)
        if len(self.buffer) > MAX_LINE_BYTES:
            self.broken = True
        return out


class Recorder:
    """Taps a relayed session's first messages; writes the record once ``tools/list`` was answered."""

    def __init__(self, folder: Path, key: str, stamp: Callable[[], str]) -> None:
        """``stamp``: :func:`code_stamp`, called when the record is written (not at the start)."""
        self.folder, self.key, self.stamp = folder, key, stamp
        self._up, self._down = _Lines(), _Lines()
        self._asked: dict[str, tuple[Any, Any]] = {}  # method -> (id, params) of its first request
        self._answers: dict[str, Any] = {}
        self._seen = 0
        self.done = False

    def upstream(self, data: bytes) -> None:
        if self.done:
            return
        for message in self._up.feed(data):
            self._seen += 1
            method, params = message.get("method"), message.get("params")
            if method in HANDSHAKE and method not in self._asked and "id" in message \
                    and not (isinstance(params, dict) and params.get("cursor")):
                self._asked[method] = (message["id"], params)
        if self._seen > _WATCHED_MESSAGES or self._up.broken:
            self.done = True

    def downstream(self, data: bytes) -> None:
        if self.done:
            return
        for message in self._down.feed(data):
            for method, (ident, _params) in list(self._asked.items()):
                if message.get("id") == ident and "result" in message and method not in self._answers:
                    self._answers[method] = message["result"]
        if "tools/list" in self._answers:
            self.done = True
            _write_record(self.folder, self.key, {"format": RECORD_FORMAT, "code": self.stamp(), "answers": [
                {"method": method, "params": canonical(self._asked[method][1]), "result": result}
                for method, result in self._answers.items()]})
        elif self._down.broken:
            self.done = True


def standalone_argv(args: Any) -> list[str]:
    """``mesh-mcp serve --standalone`` with the front's own options (the fallback when no shared server starts)."""
    argv = [sys.executable, "-m", "server.cli"]
    if getattr(args, "verbose", False):
        argv.append("--verbose")
    argv += ["serve", "--standalone"]
    if getattr(args, "workspace", None):
        argv += ["--workspace", str(Path(args.workspace).resolve())]
    if getattr(args, "config", None):
        argv += ["--config", str(Path(args.config).resolve())]
    if getattr(args, "allow_unprotected_approvers", False):
        argv.append("--allow-unprotected-approvers")
    return argv


def start_standalone(args: Any) -> subprocess.Popen[bytes]:
    return subprocess.Popen(standalone_argv(args), stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=os.getcwd())
