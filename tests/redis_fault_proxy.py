"""A loopback TCP proxy in front of a real Redis that reads the commands passing through.

It plays two things a test cannot get from a healthy Redis, without touching the code under test:

- ``cut_at("TIME", nth=2)``: Redis goes away between two commands. The ``nth`` command of that
  name (counted over every connection, from the call on) is not forwarded: its connection is
  closed, so are the proxy's other connections, and every later connection is closed as soon as
  it is accepted (a server that died or a network that broke at that instant);
- ``pin_time(ms)``: Redis's clock reads ``ms``. Every ``TIME`` is still forwarded to the real
  server, and its reply is replaced by ``ms`` (seconds and microseconds) on its way back, so a
  comparison with Redis's clock can be put at an exact millisecond.

``commands`` lists the names of the commands forwarded, in order (upper case), for the tests'
own checks. RESP 2 and the reply types of RESP 3 (no push or attribute frames: the clients
used here subscribe to nothing) are parsed; a frame is forwarded once it is whole.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections import deque
from collections.abc import Iterator
from urllib.parse import urlsplit

from tests.tcp_proxy import LoopbackProxy


def _frame(buf: bytes, pos: int) -> tuple[int, list[bytes] | None] | None:
    """``(end, args)`` of the RESP frame at ``pos`` (args only for an array of bulk strings), None if incomplete."""
    line_end = buf.find(b"\r\n", pos)
    if line_end < 0:
        return None
    kind, head = buf[pos:pos + 1], buf[pos + 1:line_end]
    after = line_end + 2
    if kind in (b"$", b"!", b"="):  # bulk string / bulk error / verbatim
        size = int(head)
        if size < 0:
            return after, None
        if len(buf) < after + size + 2:
            return None
        return after + size + 2, [buf[after:after + size]]
    if kind in (b"*", b"%", b"~"):  # array / map / set
        count = int(head) * (2 if kind == b"%" else 1)
        args: list[bytes] = []
        for _ in range(max(count, 0)):
            inner = _frame(buf, after)
            if inner is None:
                return None
            after, value = inner
            args.extend(value or [])
        return after, args
    return after, None  # + - : _ , # ( : one line


def time_reply(ms: int) -> bytes:
    seconds, micros = str(ms // 1000).encode(), str((ms % 1000) * 1000).encode()
    return b"*2\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(seconds), seconds, len(micros), micros)


class RedisFaultProxy(LoopbackProxy):
    def __init__(self, target_host: str, target_port: int) -> None:
        self.commands: list[str] = []
        self._cut: tuple[str, int] | None = None
        self._seen = 0
        self.is_cut = False
        self._time_ms: int | None = None
        self.db = 0
        super().__init__(target_host, target_port)

    @classmethod
    def in_front_of(cls, redis_url: str) -> RedisFaultProxy:
        """A proxy to the Redis of ``redis_url``; :meth:`url` names the same logical database."""
        parts = urlsplit(redis_url)
        proxy = cls(parts.hostname or "127.0.0.1", parts.port or 6379)
        proxy.db = int(parts.path.strip("/") or 0)
        return proxy

    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/{self.db}"

    def cut_at(self, command: str, nth: int = 1) -> None:
        with self._lock:
            self._cut, self._seen = (command.upper(), nth), 0

    def pin_time(self, ms: int | None) -> None:
        self._time_ms = ms

    def _turn_away(self, client: socket.socket) -> bool:
        if self.is_cut:
            client.close()
        return self.is_cut

    def _serve(self, client: socket.socket, upstream: socket.socket) -> None:
        pending: deque[str] = deque()
        threading.Thread(target=self._requests, args=(client, upstream, pending), daemon=True).start()
        threading.Thread(target=self._replies, args=(upstream, client, pending), daemon=True).start()

    def _take_down(self) -> None:
        with self._lock:
            self.is_cut = True
            dead, self._sockets = self._sockets, []
        for sock in dead:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()

    def _frames(self, src: socket.socket) -> Iterator[tuple[bytes, list[bytes] | None]]:
        """Each whole RESP frame read from ``src`` (its bytes and, for a command, its arguments) until EOF."""
        buf = b""
        while not self._stopped.is_set():
            try:
                data = src.recv(65536)
            except OSError:
                return
            if not data:
                return
            buf += data
            while (parsed := _frame(buf, 0)) is not None:
                end, args = parsed
                raw, buf = buf[:end], buf[end:]
                yield raw, args

    def _requests(self, src: socket.socket, dst: socket.socket, pending: deque[str]) -> None:
        for raw, args in self._frames(src):
            if self.is_cut:
                return
            name = (args[0] if args else b"").decode(errors="replace").upper()
            with self._lock:
                cut = False
                if self._cut is not None and name == self._cut[0]:
                    self._seen += 1
                    cut = self._seen >= self._cut[1]
                if not cut:
                    self.commands.append(name)
                    pending.append(name)
            if cut:
                self._take_down()
                return
            try:
                dst.sendall(raw)
            except OSError:
                return
        self._close(src, dst)

    def _replies(self, src: socket.socket, dst: socket.socket, pending: deque[str]) -> None:
        for raw, _args in self._frames(src):
            name = pending.popleft() if pending else ""
            pinned = self._time_ms
            try:
                dst.sendall(time_reply(pinned) if name == "TIME" and pinned is not None else raw)
            except OSError:
                return
        self._close(src, dst)

    @staticmethod
    def _close(*socks: socket.socket) -> None:
        for sock in socks:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    _drop_all = _take_down
