"""The console application: :func:`create_app` wires the store, the fleet, the notifier,
the pages and the JSON API into one FastAPI app.

Requests are served by FastAPI's thread pool; every handler is a short, synchronous call into
:class:`~tether.web.console.Console` over one shared store (each store serialises its own
connection with a lock). Background work (the embedded worker, the notifier) runs in its own
threads with their own store connections, started and stopped with the app.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import logging
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from importlib.resources import files
from typing import TYPE_CHECKING, Any, TypeVar

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from jinja2 import Environment, PackageLoader, StrictUndefined

from tether.errors import (
    DefinitionError,
    NotFoundError,
    RunStateError,
    StoreUnavailable,
    TetherError,
    UsageError,
)
from tether.runtime.history_text import describe
from tether.stores.base import Checkpointer
from tether.web import present
from tether.web.auth import CSRF_COOKIE, Forbidden, Guard, Identity, Unauthenticated
from tether.web.config import ServeConfig, is_loopback
from tether.web.console import Console
from tether.web.fleet import Fleet, FleetUnavailable
from tether.web.graph import graph_svg
from tether.web.links import LinkError, Links
from tether.web.notify import Notifier
from tether.web.security import SecurityHeaders, loopback_hosts
from tether.web.starts import Catalog
from tether.web.urls import RawPathRouting, approval_url, quote_id, run_url

if TYPE_CHECKING:
    from tether.workers.loop import Worker

log = logging.getLogger("tether.web")
T = TypeVar("T")
START_THREADS = 8
"""Threads for HTTP starts (``Web.starts``); more concurrent starts than the store has
connections for (``pool_size``, 5 by default) would only wait for one."""


def templates() -> Environment:
    """The page templates: every value autoescaped, undefined names an error."""
    env = Environment(loader=PackageLoader("tether.web", "templates"), autoescape=True,
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.globals.update(run_url=run_url, approval_url=approval_url, quote_id=quote_id,
                       json_tree=present.json_tree, pretty_json=present.pretty_json,
                       short=present.short, moment=present.moment, graph_svg=graph_svg,
                       describe=describe)
    return env


class Web:
    """What the handlers share: the console, the guard, the templates, the settings."""

    def __init__(self, config: ServeConfig, console: Console,
                 catalog: Catalog | None = None) -> None:
        self.config = config
        self.console = console
        self.catalog = catalog or Catalog({})
        self.guard = Guard(config)
        self.env = templates()
        self.starts = ThreadPoolExecutor(START_THREADS, thread_name_prefix="tether-start")
        """Where ``POST /api/workflows/{name}/runs`` runs its store call: a hop to it costs
        less than one through anyio's thread pool (bench/http_start.py); shut down with the
        app."""

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` on :attr:`starts`, in a copy of this context (its trace span)."""
        context = contextvars.copy_context()
        return await asyncio.get_running_loop().run_in_executor(
            self.starts, functools.partial(context.run, fn, *args))

    def page(self, request: Request, name: str, context: dict[str, Any],
             status: int = 200, who: Identity | None = None) -> HTMLResponse:
        """Render a page with the CSRF token of this browser (setting its cookie if new)."""
        nonce, new = self.guard.csrf_nonce(request)
        html = self.env.get_template(name).render(
            **context, csrf_token=self.guard.csrf_token(nonce), who=who,
            auth=self.config.auth.value, fleet=self.console.fleet)
        response = HTMLResponse(html, status_code=status)
        if new:
            response.set_cookie(CSRF_COOKIE, nonce, httponly=True, samesite="strict",
                                path="/")
        return response


def web_of(request: Request) -> Web:
    web: Web = request.app.state.web
    return web


def _is_api(request: Request) -> bool:
    """Machine routes: errors as JSON, 401 rather than the login page (a scraper too)."""
    return request.url.path.startswith("/api/") or request.url.path == "/metrics"


def _error(request: Request, status: int, message: str, **extra: Any) -> Response:
    if _is_api(request):
        headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
        return JSONResponse({"detail": message, **extra}, status_code=status, headers=headers)
    if status == 401:
        target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        return RedirectResponse(f"/login?next={quote_id(target)}", status_code=303)
    web = web_of(request)
    return web.page(request, "error.html", {"status": status, "message": message},
                    status=status)


# The HTTP status of each family of errors (tether.errors), most specific first: the one
# place the console turns an exception into a status. The console's own NotFound, Conflict
# and BadRequest are members of the families, not entries here.
STATUS_OF: tuple[tuple[type[TetherError], int], ...] = (
    (FleetUnavailable, 503),
    (StoreUnavailable, 503),
    (NotFoundError, 404),
    (RunStateError, 409),
    (UsageError, 422),
    (DefinitionError, 422),
    (TetherError, 500),
)


def status_of(exc: TetherError) -> int:
    """The HTTP status of ``exc``, by its family (see :data:`STATUS_OF`)."""
    return next(status for family, status in STATUS_OF if isinstance(exc, family))


def _handlers() -> dict[Any, Callable[..., Any]]:
    def tether_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, TetherError)
        status = status_of(exc)
        if status >= 500:
            log.warning("%s %s: %s", request.method, request.url.path, exc)
        field = getattr(exc, "field", None)
        extra: dict[str, Any] = {"field": field, "errors": [
            {"field": field, "message": str(exc)}]} if isinstance(field, str) else {}
        return _error(request, status, str(exc), **extra)

    def denied(status: int) -> Callable[[Request, Exception], Response]:
        def handler(request: Request, exc: Exception) -> Response:
            return _error(request, status, str(exc))
        return handler

    def link_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, LinkError)
        return _error(request, 410 if exc.expired else 404, str(exc))

    def invalid(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        errors = [{"field": ".".join(str(p) for p in e.get("loc", ())[1:]) or "body",
                   "message": str(e.get("msg", ""))} for e in exc.errors()]
        return _error(request, 422, "the request does not match the API", errors=errors)

    return {Forbidden: denied(403), Unauthenticated: denied(401), LinkError: link_error,
            RequestValidationError: invalid, TetherError: tether_error}


def create_app(config: ServeConfig, store: Checkpointer | None = None,
               worker: Worker | None = None) -> FastAPI:
    """The console app for ``config``; ``store`` defaults to opening ``config.db``; with
    ``worker``, an ordinary worker runs in this process while the app is up (``fleet.py``).
    The app owns the store it opens."""
    from tether.stores.open import open_checkpointer
    from tether.workers.claims import lease_seconds

    catalog = Catalog.load(config.workflows)  # before the store: a bad file opens nothing
    owned = store is None
    shared = store if store is not None else open_checkpointer(config.db, create=False)
    links = Links(config.secret, config.base_url, config.link_max_age)
    console = Console(shared, Fleet(shared, lease_seconds(), worker), links)
    if worker is not None:  # an embedded worker loads the workflows: it declares their schedules
        from tether.workers.schedules import declare_schedule

        for plan in catalog.plans.values():
            if plan.schedule is not None:
                declare_schedule(shared, plan, new_queue="default")
    notifier = Notifier.from_config(config, shared, links) if config.notify_url else None

    @contextlib.asynccontextmanager
    async def lifespan(application: FastAPI) -> AsyncIterator[None]:
        console.fleet.start()
        if notifier is not None:
            notifier.start()
        try:
            yield
        finally:
            if notifier is not None:
                notifier.stop()
            console.fleet.stop()
            application.state.web.starts.shutdown(wait=True)
            if owned:
                shared.close()

    app = FastAPI(title="tether console", version="1", openapi_url="/api/openapi.json",
                  docs_url=None, redoc_url=None, lifespan=lifespan,
                  exception_handlers=_handlers(),
                  telemetry={"tracing": False, "metrics": False, "logs": False},
                  description="The approvals inbox and runs console of tether. Answer "
                  "pauses, list and inspect runs, start, resume, fork and cancel them. With "
                  "--auth token, send 'Authorization: Bearer <token>'.")
    app.state.web = Web(config, console, catalog)
    app.state.notifier = notifier
    from tether.web import api, hooks, pages, start_pages

    app.include_router(api.router)
    app.include_router(hooks.router)
    app.include_router(start_pages.router)
    app.include_router(pages.router)
    from tether.observability.web import add_metrics_route

    add_metrics_route(app, shared)
    app.mount("/static", StaticFiles(directory=str(files("tether.web") / "static")),
              name="static")
    hosts = loopback_hosts(config.host, config.port) if is_loopback(config.host) else None
    app.add_middleware(SecurityHeaders, hosts=hosts)
    app.add_middleware(RawPathRouting)  # routes match the path as sent (web/urls.py)
    return app
