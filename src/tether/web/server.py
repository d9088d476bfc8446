"""Running the console: bind the socket, build the app, serve it with uvicorn until stopped.

The socket is bound here, before the app is built, so ``--port 0`` works (the port the
kernel picked is printed and used in links). uvicorn handles SIGINT and SIGTERM: it stops
taking requests, lets the current ones finish, then the app's lifespan stops the worker and
the notifier and closes the store.
"""

from __future__ import annotations

import dataclasses
import socket
import sys
from collections.abc import Callable, Mapping
from typing import Any

from tether.runtime.lifecycle import DEFAULT_QUEUE
from tether.web.config import ConfigError, ServeConfig

WORKER_CONCURRENCY = 4


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (IPv6 when ``host`` is one)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP, not 0: only then does asyncio set TCP_NODELAY on each connection
    # (without it, Nagle and delayed ACKs add 40 ms to every response)
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as exc:
        sock.close()
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    sock.listen(256)
    sock.set_inheritable(True)
    return sock


def serve(config: ServeConfig, *, tasks: Mapping[str, Callable[..., Any]] | None = None,
          announce: Callable[[str], None] | None = None) -> None:
    """Serve the console until SIGINT/SIGTERM. With ``config.worker``, an ordinary worker of
    the ``default`` queue (:class:`tether.workers.Worker`, with ``tasks``) runs in this
    process while it serves."""
    import uvicorn

    from tether.web.app import create_app
    from tether.workers.loop import Worker

    sock = bind(config.host, config.port)
    config = dataclasses.replace(config, port=sock.getsockname()[1])
    worker = Worker(config.db, tasks, (DEFAULT_QUEUE,), WORKER_CONCURRENCY) \
        if config.worker else None
    app = create_app(config, worker=worker)
    (announce or _print)(f"tether console on {config.base_url} (auth: {config.auth.value}"
                         f"{', with a worker' if config.worker else ''})")
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False,
                                           timeout_graceful_shutdown=5, lifespan="on",
                                           log_config=None))  # the root handler formats
    # uvicorn's lines too (tether serve --log-format)
    server.run(sockets=[sock])


def _print(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
