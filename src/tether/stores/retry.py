"""Riding out transient outages of the database (a restart, a dropped connection).

Store methods marked :func:`transient` are retried, with exponential backoff, for up to the
store's ``retry_seconds`` when they fail with :class:`~tether.errors.StoreUnavailable`
(the connection is replaced before each retry). A retry is safe: reads have no effect; each
write is one transaction, so a failed attempt either committed whole or not at all, and a
write whose effect is visible (``done``) is not repeated; the other writes are compare-and-set
updates that give the same result when run twice. When the outage outlasts the window, the
error reaches the caller and nothing is half-written.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar, cast

from tether.errors import StoreUnavailable


class Retrying(Protocol):
    """A store whose methods may be :func:`transient`: it says how long to retry."""

    retry_seconds: float


P = ParamSpec("P")
T = TypeVar("T")
S = TypeVar("S", bound=Retrying)

FIRST_DELAY = 0.05
MAX_DELAY = 1.0


def transient(done: Callable[..., bool] | None = None,
              window: Callable[..., float] | None = None) -> Callable[
        [Callable[Concatenate[S, P], T]], Callable[Concatenate[S, P], T]]:
    """Retry the method while the database is unreachable; before a retry of a write, ask
    ``done(self, *args)`` whether the failed attempt committed after all (then return None).
    ``window(*args)``, when given, caps the retry window (seconds) below ``retry_seconds``."""
    def decorate(method: Callable[Concatenate[S, P], T]) -> Callable[Concatenate[S, P], T]:
        @functools.wraps(method)
        def wrapper(self: S, /, *args: P.args, **kwargs: P.kwargs) -> T:
            try:
                return method(self, *args, **kwargs)
            except StoreUnavailable:
                return _retry(self, method, done, args, kwargs,
                              window(*args) if window is not None else None)

        return wrapper

    return decorate


def _retry(store: Any, method: Callable[..., T], done: Callable[..., bool] | None,
           args: Any, kwargs: Any, cap: float | None = None) -> T:
    seconds = store.retry_seconds if cap is None else max(0.0, min(store.retry_seconds, cap))
    deadline = time.monotonic() + seconds
    delay = FIRST_DELAY
    while True:
        if time.monotonic() + delay > deadline:
            raise StoreUnavailable(f"the database stayed unreachable for "
                                   f"{seconds:g}s (see the error above)")
        time.sleep(delay)
        delay = min(delay * 2, MAX_DELAY)
        try:
            if done is not None and done(store, *args, **kwargs):
                return cast(T, None)
            return method(store, *args, **kwargs)
        except StoreUnavailable:
            continue
