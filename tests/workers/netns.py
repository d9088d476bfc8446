"""Separate hosts for tests: network namespaces joined to this one by veth pairs, and a TCP
relay in this namespace that carries their connections to the local PostgreSQL.

``Hosts`` makes ``n`` namespaces (``ip netns add``), each with a veth pair whose host end is
``10.<a>.<i>.1`` and whose namespace end is ``10.<a>.<i>.2``; the relay listens on every host
end and forwards to ``127.0.0.1:5432`` (PostgreSQL keeps listening on loopback only, and its
trust rule for 127.0.0.1 applies). ``cut(i)`` takes host ``i``'s link down (its connections
stall, new ones fail), ``restore(i)`` brings it back. Everything is removed on ``close``.
Needs root and a kernel that allows network namespaces; ``unavailable()`` says why not.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import selectors
import socket
import subprocess
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit, urlunsplit


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30,
                          check=check)


def unavailable() -> str | None:
    """Why separate network namespaces cannot be made here, or None when they can."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    name = "tprobe" + secrets.token_hex(3)
    made = _ip("netns", "add", name, check=False)
    if made.returncode != 0:
        return f"the kernel refuses network namespaces: {made.stderr.strip()}"
    _ip("netns", "del", name, check=False)
    return None


@dataclass
class Relay:
    """A TCP relay: accepts on ``(address, port)`` pairs, forwards each connection to
    ``target``. One thread, selectors; closing a side closes the other."""

    target: tuple[str, int]
    listeners: list[socket.socket] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def listen(self, address: str, port: int) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((address, port))
        sock.listen(64)
        sock.setblocking(False)
        self.listeners.append(sock)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._serve, name="netns-relay", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        selector = selectors.DefaultSelector()
        for sock in self.listeners:
            selector.register(sock, selectors.EVENT_READ, None)
        while not self._stop.is_set():
            for key, _ in selector.select(timeout=0.2):
                if key.data is None:
                    self._accept(selector, key.fileobj)  # type: ignore[arg-type]
                else:
                    self._pump(selector, key.fileobj, key.data)  # type: ignore[arg-type]
        for key in list(selector.get_map().values()):
            key.fileobj.close()  # type: ignore[union-attr]
        selector.close()

    def _accept(self, selector: selectors.BaseSelector, listener: socket.socket) -> None:
        try:
            client, _ = listener.accept()
        except BlockingIOError:
            return
        upstream = socket.create_connection(self.target, timeout=10)
        for sock in (client, upstream):
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        selector.register(client, selectors.EVENT_READ, upstream)
        selector.register(upstream, selectors.EVENT_READ, client)

    @staticmethod
    def _pump(selector: selectors.BaseSelector, source: socket.socket,
              sink: socket.socket) -> None:
        try:
            data = source.recv(65536)
            if data:
                sink.setblocking(True)
                sink.sendall(data)
                sink.setblocking(False)
                return
        except OSError:
            pass
        for sock in (source, sink):
            with contextlib.suppress(KeyError, ValueError):
                selector.unregister(sock)
            sock.close()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)


class Hosts:
    """``count`` network namespaces, each a "host" reaching PostgreSQL through the relay."""

    def __init__(self, count: int, pg_port: int = 5432) -> None:
        self.tag = secrets.token_hex(2)
        self.block = 100 + secrets.randbelow(150)
        self.names = [f"tw{self.tag}h{i}" for i in range(count)]
        self.port = 20000 + secrets.randbelow(20000)
        self.relay = Relay(("127.0.0.1", pg_port))
        try:
            for i, name in enumerate(self.names):
                self._make(i, name)
                self.relay.listen(self.gateway(i), self.port)
            self.relay.start()
        except BaseException:
            self.close()
            raise

    def gateway(self, i: int) -> str:
        """The host end of host ``i``'s link: where it finds PostgreSQL."""
        return f"10.{self.block}.{i}.1"

    def _veth(self, i: int) -> str:
        return f"tw{self.tag}v{i}"

    def _make(self, i: int, name: str) -> None:
        outer, inner = self._veth(i), self._veth(i) + "p"
        _ip("netns", "add", name)
        _ip("link", "add", outer, "type", "veth", "peer", "name", inner)
        _ip("link", "set", inner, "netns", name)
        _ip("addr", "add", f"{self.gateway(i)}/30", "dev", outer)
        _ip("link", "set", outer, "up")
        _ip("netns", "exec", name, "ip", "addr", "add", f"10.{self.block}.{i}.2/30",
            "dev", inner)
        _ip("netns", "exec", name, "ip", "link", "set", inner, "up")
        _ip("netns", "exec", name, "ip", "link", "set", "lo", "up")

    def url(self, i: int, database: str = "test", query: str = "") -> str:
        """A PostgreSQL URL as host ``i`` sees the server."""
        return f"postgresql://postgres@{self.gateway(i)}:{self.port}/{database}{query}"

    def translate(self, i: int, url: str) -> str:
        """``url`` (a URL of the local server) as host ``i`` sees it: same user, password,
        database and query (``?schema=``, libpq options), host and port of the relay."""
        parts = urlsplit(url)
        user = parts.netloc.rpartition("@")[0]
        netloc = f"{user}@{self.gateway(i)}:{self.port}" if user else \
            f"{self.gateway(i)}:{self.port}"
        return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))

    def command(self, i: int, argv: Sequence[str]) -> list[str]:
        """``argv`` run inside host ``i``'s namespace."""
        return ["ip", "netns", "exec", self.names[i], *argv]

    def cut(self, i: int) -> None:
        """Host ``i`` loses its link: packets stop both ways, nothing is reset."""
        _ip("netns", "exec", self.names[i], "ip", "link", "set", self._veth(i) + "p", "down")

    def restore(self, i: int) -> None:
        _ip("netns", "exec", self.names[i], "ip", "link", "set", self._veth(i) + "p", "up")

    def close(self) -> None:
        """Remove the relay, the links and the namespaces (each step even if one fails)."""
        try:
            self.relay.close()
        finally:
            for i, name in enumerate(self.names):
                _ip("link", "del", self._veth(i), check=False)
                _ip("netns", "del", name, check=False)

    def __enter__(self) -> Hosts:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
