"""The front's byte relay between its client (stdin/stdout) and a server: the shared server's
socket or, as a fallback, a ``mesh-mcp serve --standalone`` child; and the handshake answered
from a record while the shared server starts (:mod:`server.front_hello`)."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import subprocess
import threading
from collections.abc import Callable
from typing import Any

from server.front_hello import MAX_LINE_BYTES, OPENING, Recorder, canonical, start_standalone

log = logging.getLogger("mesh.serve.shared")

CHUNK = 65536


class Link:
    """A duplex byte stream to a server."""

    def send(self, data: bytes) -> None:
        raise NotImplementedError

    def recv(self) -> bytes:
        raise NotImplementedError

    def close_send(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


class SocketLink(Link):
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def recv(self) -> bytes:
        return self.sock.recv(CHUNK)

    def close_send(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        self.sock.close()


class ChildLink(Link):
    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc

    def send(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def recv(self) -> bytes:
        assert self.proc.stdout is not None
        return os.read(self.proc.stdout.fileno(), CHUNK)

    def close_send(self) -> None:
        with contextlib.suppress(OSError):
            if self.proc.stdin is not None:
                self.proc.stdin.close()

    def close(self) -> None:
        self.close_send()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def _write_out(data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(1, view)
        view = view[written:]


def pump(link: Link, recorder: Recorder | None = None, upstream_prefix: bytes = b"",
         downstream_prefix: bytes = b"") -> int:
    """Copy stdin to ``link`` and ``link`` to stdout until the server closes it (the prefixes first:
    bytes already read from either side). ``recorder`` taps the first messages of both."""

    def upstream() -> None:
        try:
            if upstream_prefix:
                link.send(upstream_prefix)
            while True:
                data = os.read(0, CHUNK)
                if not data:
                    break
                if recorder is not None:
                    recorder.upstream(data)
                link.send(data)
        except OSError:
            pass
        finally:
            link.close_send()

    threading.Thread(target=upstream, name="mesh-front-stdin", daemon=True).start()
    try:
        if downstream_prefix:
            _write_out(downstream_prefix)
        while True:
            data = link.recv()
            if not data:
                break
            _write_out(data)  # first: the record is written after the client has its answer
            if recorder is not None:
                recorder.downstream(data)
    except OSError as exc:
        log.warning("the server connection ended: %s", exc)
        return 1
    finally:
        link.close()
    return 0


class _StdinLines:
    """The client's messages, line by line, from fd 0 (what was read past the last line is kept)."""

    def __init__(self) -> None:
        self.buffer = b""
        self.oversized = False  # a message longer than MAX_LINE_BYTES: not looked at, relayed as it is

    def next_line(self) -> bytes | None:
        """The next message with its newline; None at the end of input or past :data:`MAX_LINE_BYTES`."""
        while b"\n" not in self.buffer:
            if len(self.buffer) > MAX_LINE_BYTES:
                self.oversized = True
                return None
            data = os.read(0, CHUNK)
            if not data:
                return None
            self.buffer += data
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line + b"\n"


def _message(line: bytes) -> dict[str, Any]:
    with contextlib.suppress(ValueError):
        message = json.loads(line)
        if isinstance(message, dict):
            return message
    return {}


def _answer(ident: Any, result: Any) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": ident, "result": result}, separators=(",", ":")).encode() + b"\n"


def _await_answer(link: Link, ident: Any, buffer: bytes = b"") -> bytes | None:
    """Read ``link`` until the answer to request ``ident`` (dropped: the client has it; an error
    answer: None); what came before it is forwarded to the client, what came after is returned."""
    while True:
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            message = _message(line)
            if message.get("id") == ident and ("result" in message or "error" in message):
                if "error" in message:
                    log.warning("the server refused a request the record had answered: %s", message["error"])
                    return None
                return buffer
            _write_out(line + b"\n")
        if len(buffer) > MAX_LINE_BYTES:
            return None
        data = link.recv()
        if not data:
            return None
        buffer += data


def serve_from_record(args: Any, record: dict[str, Any], start: Callable[[], socket.socket | None]) -> int:
    """Answer the handshake from ``record`` while ``start()`` brings the shared server up, then relay
    (to a ``--standalone`` child when it does not come up); the exit code."""
    started: dict[str, socket.socket | None] = {}

    def starting() -> None:
        try:
            started["sock"] = start()
        except Exception as exc:  # then a server of its own serves this client
            log.warning("the shared server could not be started: %s", exc)

    starter = threading.Thread(target=starting, name="mesh-front-start", daemon=True)
    starter.start()
    answers = {(a["method"], a["params"]): a["result"] for a in record["answers"]}
    stdin = _StdinLines()
    replay: list[tuple[bytes, Any]] = []  # opening requests answered here: sent to the server, answers dropped
    held: list[bytes] = []  # notifications, then the first request the record cannot answer
    while (line := stdin.next_line()) is not None:
        message = _message(line)
        method, ident = message.get("method"), message.get("id")
        key = (method, canonical(message.get("params")))
        if "id" in message and key in answers:
            _write_out(_answer(ident, answers[key]))
            if method in OPENING:
                replay.append((line, ident))
        elif "id" not in message and method is not None:
            held.append(line)
        else:
            held.append(line)
            break
    else:
        if not stdin.oversized:
            return 0  # the client closed after its handshake: the shared server starts for the next one
    starter.join()
    sock = started.get("sock")
    link: Link = SocketLink(sock) if sock is not None else ChildLink(start_standalone(args))
    after = b""
    try:
        for line, ident in replay:
            link.send(line)
            got = _await_answer(link, ident, after)
            if got is None:
                link.close()
                return 1
            after = got
        for line in held:
            link.send(line)
    except OSError as exc:
        log.warning("the server connection ended: %s", exc)
        link.close()
        return 1
    return pump(link, upstream_prefix=stdin.buffer, downstream_prefix=after)
