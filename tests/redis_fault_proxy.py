"""A loopback TCP proxy in front of a real Redis that reads the commands passing through.

It plays what a test cannot get from a healthy Redis, without touching the code under test:

- ``cut_at("TIME", nth=2)``: Redis goes away between two commands. The ``nth`` command of that
  name (counted over every connection, from the call on) is not forwarded: its connection is
  closed, so are the proxy's other connections, and every later connection is closed as soon as
  it is accepted (a server that died or a network that broke at that instant);
- ``pin_time(ms)``: Redis's clock reads ``ms``. Every ``TIME`` is still forwarded to the real
  server, and its reply is replaced by ``ms`` (seconds and microseconds) on its way back, so a
  comparison with Redis's clock can be put at an exact millisecond;
- ``pin_idle(entries=ms, consumers=ms or {name: ms})``: the idle times Redis reports read ``ms``:
  the per-entry idle of an extended ``XPENDING`` (``XPENDING key group start end count ...``), and
  the ``idle`` and ``inactive`` (when not -1) of ``XINFO CONSUMERS``, for every consumer or by name.
  Redis still keeps and filters by its own idle times (``XPENDING ... IDLE``, ``XCLAIM`` min-idle);
  only what the client reads is replaced, so a limit compared by the code under test can be hit
  to the millisecond, which Redis's moving clock never allows;
- ``pin_pttl(ms)``: a ``PTTL`` of a key that has a time to live (a reply >= 0) reads ``ms``;
- ``report_inactive(ms or {name: ms})``: ``XINFO CONSUMERS`` reads the way Redis >= 7.2 answers it,
  each consumer with an ``inactive`` field (ms since its last successful read, -1 if it never read)
  next to ``idle``: the machine's Redis (7.0) has no such field, the reply shape is 7.2's documented one.

Replies are rewritten only when they come back directly, not inside a ``MULTI`` / ``EXEC``.

``commands`` lists the names of the commands forwarded, in order (upper case), for the tests'
own checks. RESP 2 and the reply types of RESP 3 (no push or attribute frames: the clients
used here subscribe to nothing) are parsed; a frame is forwarded once it is whole.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from typing import Any
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


def _node(buf: bytes, pos: int) -> tuple[int, tuple[bytes, Any]]:
    """``(end, (kind, payload))`` of the whole RESP frame at ``pos``: payload is the line or bulk bytes,
    or the list of child nodes of an aggregate (a map's keys and values in turn)."""
    line_end = buf.index(b"\r\n", pos)
    kind, head, after = buf[pos:pos + 1], buf[pos + 1:line_end], line_end + 2
    if kind in (b"$", b"!", b"="):
        size = int(head)
        return (after, (kind, None)) if size < 0 else (after + size + 2, (kind, buf[after:after + size]))
    if kind in (b"*", b"%", b"~"):
        children = []
        for _ in range(max(int(head), 0) * (2 if kind == b"%" else 1)):
            after, child = _node(buf, after)
            children.append(child)
        return after, (kind, children if int(head) >= 0 else None)
    return after, (kind, head)


def _encode(node: tuple[bytes, Any]) -> bytes:
    kind, payload = node
    if kind in (b"$", b"!", b"="):
        return kind + b"-1\r\n" if payload is None else b"%s%d\r\n%s\r\n" % (kind, len(payload), payload)
    if kind in (b"*", b"%", b"~"):
        if payload is None:
            return kind + b"-1\r\n"
        count = len(payload) // 2 if kind == b"%" else len(payload)
        return b"%s%d\r\n" % (kind, count) + b"".join(_encode(child) for child in payload)
    return kind + payload + b"\r\n"


def _integer(value: int) -> tuple[bytes, bytes]:
    return b":", str(value).encode()


def _rewrite_rows(raw: bytes, edit: Callable[[list[Any], dict[bytes, int], str], None]) -> bytes:
    """``raw``, an array reply of rows (arrays or maps), with ``edit(fields, value_index_by_field, name)``
    applied to each row in place (``name``: the row's ``name`` field, "" when it has none)."""
    _, (kind, rows) = _node(raw, 0)
    if kind != b"*" or not rows:
        return raw
    for row_kind, fields in rows:
        if row_kind in (b"*", b"%"):
            pairs = {fields[i][1]: i + 1 for i in range(0, len(fields) - 1, 2)}
            name = fields[pairs[b"name"]][1].decode(errors="replace") if b"name" in pairs else ""
            edit(fields, pairs, name)
    return _encode((kind, rows))


def _for(ms: int | Mapping[str, int] | None, name: str) -> int | None:
    return ms if ms is None or isinstance(ms, int) else ms.get(name)


def pin_idle_reply(raw: bytes, command: str, entries: int | None, consumers: int | Mapping[str, int] | None) -> bytes:
    """``raw``, the reply to ``command`` (``"XPENDING+"``: the extended form; ``"XINFO CONSUMERS"``), with its
    entries' idle times set to ``entries`` and its consumers' to ``consumers`` (one value, or one per name)."""

    def edit(fields: list[Any], pairs: dict[bytes, int], name: str) -> None:
        if command == "XPENDING+":
            if entries is not None and len(fields) == 4:  # [id, consumer, idle, deliveries]
                fields[2] = _integer(entries)
            return
        ms = _for(consumers, name)
        for field in (b"idle", b"inactive"):
            at = pairs.get(field)
            if ms is not None and at is not None and fields[at][0] == b":" and int(fields[at][1]) >= 0:
                fields[at] = _integer(ms)

    return _rewrite_rows(raw, edit)


def inactive_reply(raw: bytes, inactive: int | Mapping[str, int]) -> bytes:
    """``raw``, a reply to ``XINFO CONSUMERS``, as Redis >= 7.2 gives it: every consumer with its ``inactive``
    field (ms since its last successful read; -1: never read), added after ``idle`` when the server is older:
    ``inactive`` for every consumer or those named, the others' equal to their ``idle``."""

    def edit(fields: list[Any], pairs: dict[bytes, int], name: str) -> None:
        ms = _for(inactive, name)
        if ms is None and b"inactive" in pairs:
            return  # a Redis >= 7.2 said it already
        value = _integer(ms) if ms is not None else fields[pairs[b"idle"]] if b"idle" in pairs else _integer(-1)
        if b"inactive" in pairs:
            fields[pairs[b"inactive"]] = value
        else:
            at = pairs.get(b"idle", len(fields) - 1) + 1
            fields[at:at] = [(b"$", b"inactive"), value]

    return _rewrite_rows(raw, edit)


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
        self._idle: tuple[int | None, int | Mapping[str, int] | None] = (None, None)
        self._pttl_ms: int | None = None
        self._inactive: int | Mapping[str, int] | None = None
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

    def pin_idle(self, entries: int | None = None, consumers: int | Mapping[str, int] | None = None) -> None:
        """Pending entries read idle ``entries`` ms, consumers ``consumers`` ms (or per name); None: as Redis says."""
        self._idle = (entries, consumers)

    def pin_pttl(self, ms: int | None) -> None:
        self._pttl_ms = ms

    def report_inactive(self, ms: int | Mapping[str, int] | None) -> None:
        """``XINFO CONSUMERS`` reads as on Redis >= 7.2: each consumer's ``inactive`` is ``ms`` (or per name)."""
        self._inactive = ms

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
            reply = name
            if name == "XINFO" and len(args) > 1:
                reply = f"XINFO {args[1].decode(errors='replace').upper()}"
            elif name == "XPENDING" and len(args) >= 6:
                reply = "XPENDING+"  # the extended form: one row per entry, with its idle time
            with self._lock:
                cut = False
                if self._cut is not None and name == self._cut[0]:
                    self._seen += 1
                    cut = self._seen >= self._cut[1]
                if not cut:
                    self.commands.append(name)
                    pending.append(reply)
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
            try:
                dst.sendall(self._rewritten(name, raw))
            except OSError:
                return
        self._close(src, dst)

    def _rewritten(self, name: str, raw: bytes) -> bytes:
        time_ms, idle, pttl_ms = self._time_ms, self._idle, self._pttl_ms
        if name == "TIME" and time_ms is not None:
            return time_reply(time_ms)
        if name in ("XPENDING+", "XINFO CONSUMERS") and idle != (None, None):
            raw = pin_idle_reply(raw, name, *idle)
        if name == "XINFO CONSUMERS" and self._inactive is not None:
            raw = inactive_reply(raw, self._inactive)
        if name == "PTTL" and pttl_ms is not None and raw.startswith(b":") and int(raw[1:-2]) >= 0:
            return b":%d\r\n" % pttl_ms
        return raw

    @staticmethod
    def _close(*socks: socket.socket) -> None:
        for sock in socks:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    _drop_all = _take_down
