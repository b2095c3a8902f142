"""Loopback TCP proxies for tests: :class:`LoopbackProxy` (listen, accept, forward, close), shared with
:mod:`tests.redis_fault_proxy`, and :class:`FreezingProxy`, which plays a frozen network.

It listens on a free port picked by the kernel and forwards bytes both ways to a target.
``freeze()`` stops forwarding on every connection (bytes are read and held, nothing is
closed: to the client the peer simply stops answering, as in a network partition or a
failover) and new connections are accepted but never forwarded. ``thaw()`` drops the held
connections (a partitioned TCP connection does not come back) and forwards again.
"""

from __future__ import annotations

import contextlib
import socket
import threading


class LoopbackProxy:
    """Listens on a free loopback port; each accepted connection gets its own upstream to the target.

    Subclasses say what to do with a new connection (:meth:`_turn_away`, :meth:`_serve`) and how to drop
    every connection (:meth:`_drop_all`); they set their own state before calling ``__init__``, which
    starts the accepting thread."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self._server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._server.bind(("127.0.0.1", 0))
        self._server.listen(64)
        self.port = int(self._server.getsockname()[1])
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _turn_away(self, client: socket.socket) -> bool:
        """True when ``client`` is not forwarded (the subclass closed or holds it)."""
        return False

    def _serve(self, client: socket.socket, upstream: socket.socket) -> None:
        raise NotImplementedError

    def _drop_all(self) -> None:
        raise NotImplementedError

    def _accept(self) -> None:
        while not self._stopped.is_set():
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            if self._stopped.is_set():
                client.close()
                continue
            if self._turn_away(client):
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._sockets += [client, upstream]
            self._serve(client, upstream)

    def close(self) -> None:
        self._stopped.set()
        with contextlib.suppress(OSError):  # wake the blocked accept()
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
        with contextlib.suppress(OSError):
            self._server.close()
        self._drop_all()
        self._thread.join(timeout=5)


class FreezingProxy(LoopbackProxy):
    def __init__(self, target_host: str, target_port: int) -> None:
        self.frozen = threading.Event()
        self._held: list[socket.socket] = []
        super().__init__(target_host, target_port)

    def _turn_away(self, client: socket.socket) -> bool:
        if not self.frozen.is_set():
            return False
        with self._lock:
            self._held.append(client)
        return True

    def _serve(self, client: socket.socket, upstream: socket.socket) -> None:
        for a, b in ((client, upstream), (upstream, client)):
            threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        while not self._stopped.is_set():
            try:
                data = src.recv(65536)
            except OSError:
                break
            if not data:
                break
            if self.frozen.is_set():
                continue  # swallowed: the peer "stops answering"
            try:
                dst.sendall(data)
            except OSError:
                break
        for sock in (src, dst):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def freeze(self) -> None:
        self.frozen.set()

    def refuse_new(self) -> None:
        """Stop listening: new connections are refused (a host that is gone); frozen ones stay frozen."""
        with contextlib.suppress(OSError):
            self._server.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept()
        with contextlib.suppress(OSError):
            self._server.close()

    def thaw(self) -> None:
        """Forward again; connections opened or used while frozen are dropped."""
        with self._lock:
            dead, self._sockets, held, self._held = self._sockets, [], self._held, []
        for sock in dead + held:
            with contextlib.suppress(OSError):
                sock.close()
        self.frozen.clear()

    _drop_all = thaw
