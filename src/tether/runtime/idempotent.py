"""``@idempotent``: a function whose body runs at most once per key within one run.

The first call in a run executes the body and stores its JSON result under
``(execution_id, key)``; every later call with the same key in the same run (a resumed node
re-executing from its top, a retry, a process that crashed after the call) returns the stored
result instead. Outside a run, and in another run, it is a cache miss. The default key is the
sha256 of the function's module and qualified name and its bound arguments as canonical JSON,
so positional and keyword calls agree and keys are the same in every process. Results are
returned in their JSON form (a pydantic model comes back as a dict), the same on the first
call and on every cached one.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import inspect
import json
import threading
from collections.abc import Callable
from typing import Any, TypeVar, overload

from tether.errors import NotJSONError
from tether.runtime.context import RUN, RunContext
from tether.runtime.values import dumps, to_json

F = TypeVar("F", bound=Callable[..., Any])
KeyFunction = Callable[..., str]

_locks: dict[tuple[str, str], threading.Lock] = {}
_locks_guard = threading.Lock()


def qualified_name(fn: Callable[..., Any]) -> str:
    target = inspect.unwrap(fn)
    return f"{target.__module__}.{getattr(target, '__qualname__', repr(target))}"


def default_key(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    """sha256 of the function's qualified name and its bound arguments (canonical JSON)."""
    target = inspect.unwrap(fn)
    try:
        bound = inspect.signature(target).bind(*args, **kwargs)
        bound.apply_defaults()
        arguments: Any = bound.arguments
    except (TypeError, ValueError):
        arguments = {"args": list(args), "kwargs": kwargs}
    name = qualified_name(fn)
    try:
        canonical = json.dumps({"fn": name, "args": arguments}, sort_keys=True,
                               separators=(",", ":"), ensure_ascii=False, allow_nan=False,
                               default=_model_json)
    except (TypeError, ValueError) as exc:
        raise NotJSONError(f"the arguments of idempotent function {name}",
                           f"{exc}; pass key= to @idempotent") from None
    return hashlib.sha256(canonical.encode()).hexdigest()


def _model_json(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    raise TypeError(f"an argument of type {type(value).__name__} has no JSON form")


def _key_lock(run: RunContext, key: str) -> threading.Lock:
    with _locks_guard:
        return _locks.setdefault((run.execution_id, key), threading.Lock())


def forget_locks(execution_id: str) -> None:
    """Drop the per-key locks of a run that is no longer executing in this process."""
    with _locks_guard:
        for pair in [p for p in _locks if p[0] == execution_id]:
            del _locks[pair]


def _lookup(run: RunContext, key: str) -> str | None:
    if run.store is None:
        with run.lock:
            return run.memo.get(key)
    return run.store.get_idempotent(run.execution_id, key)


def _remember(run: RunContext, key: str, text: str) -> str:
    if run.masker is not None:  # masked as a value: the cached JSON stays valid and exact
        value = json.loads(text)
        shown = run.masker.value(value)
        text = text if shown is value else dumps(shown)
    if run.store is None:
        with run.lock:
            return run.memo.setdefault(key, text)
    return run.store.put_idempotent(run.execution_id, key, text, owner=run.owner)


def _key_of(fn: Callable[..., Any], key: KeyFunction | None, args: tuple[Any, ...],
            kwargs: dict[str, Any]) -> str:
    if key is None:
        return default_key(fn, args, kwargs)
    custom = key(*args, **kwargs)
    return hashlib.sha256(f"{qualified_name(fn)}:{custom}".encode()).hexdigest()


def _run_sync(fn: Callable[..., Any], key: KeyFunction | None, args: tuple[Any, ...],
              kwargs: dict[str, Any]) -> Any:
    run = RUN.get()
    if run is None:
        return fn(*args, **kwargs)
    k = _key_of(fn, key, args, kwargs)
    with _key_lock(run, k):
        hit = _lookup(run, k)
        if hit is not None:
            return json.loads(hit)
        result = fn(*args, **kwargs)
        _, text = to_json(result, f"the result of idempotent function {qualified_name(fn)}")
        return json.loads(_remember(run, k, text))


async def _run_async(fn: Callable[..., Any], key: KeyFunction | None, args: tuple[Any, ...],
                     kwargs: dict[str, Any]) -> Any:
    run = RUN.get()
    if run is None:
        return await fn(*args, **kwargs)
    k = _key_of(fn, key, args, kwargs)
    lock = _key_lock(run, k)
    while not lock.acquire(blocking=False):  # another coroutine or thread holds this key
        await asyncio.sleep(0.001)
    try:
        hit = _lookup(run, k)
        if hit is not None:
            return json.loads(hit)
        result = await fn(*args, **kwargs)
        _, text = to_json(result, f"the result of idempotent function {qualified_name(fn)}")
        return json.loads(_remember(run, k, text))
    finally:
        lock.release()


@overload
def idempotent(fn: F, /) -> F: ...
@overload
def idempotent(*, key: KeyFunction | None = None) -> Callable[[F], F]: ...


def idempotent(fn: Any = None, /, *, key: KeyFunction | None = None) -> Any:
    """Make a sync or async function run at most once per key within a run.

    Use as ``@idempotent`` or ``@idempotent(key=lambda order_id, **_: order_id)``.
    """
    def decorate(func: F) -> F:
        if inspect.iscoroutinefunction(func):
            @functools.wraps(func)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                return await _run_async(func, key, args, kwargs)
            wrapper: Any = async_wrapper
        else:
            @functools.wraps(func)
            def sync_wrapper(*args: Any, **kwargs: Any) -> Any:
                return _run_sync(func, key, args, kwargs)
            wrapper = sync_wrapper
        wrapper.__tether_idempotent__ = True
        wrapper.__tether_key__ = key
        return wrapper  # type: ignore[no-any-return]

    if fn is not None:
        return decorate(fn)
    return decorate


def cached_call(fn: Callable[..., Any], args: dict[str, Any], poll: int | None = None) -> Any:
    """Call a task for a node marked ``idempotent: true`` (sync result or awaitable).

    ``poll``: the attempt of a polling node (``until``); each attempt has its own key (the
    function's own ``@idempotent`` key, if any, plus the attempt), so a re-executed attempt
    returns its cached result and the next attempt calls the task again. An ``@idempotent``
    function polled by a node without ``idempotent: true`` comes here too.
    """
    decorated = getattr(fn, "__tether_idempotent__", False)
    if decorated and poll is None:
        return fn(**args)
    key: KeyFunction | None = None
    if poll is not None:
        own: KeyFunction | None = getattr(fn, "__tether_key__", None)

        def key(*_: Any, **kwargs: Any) -> str:
            base = own(**kwargs) if own is not None else json.dumps(
                kwargs, sort_keys=True, default=str)
            return f"{base}#poll:{poll}"
        if decorated:  # its own key (the arguments) is the same at every attempt: bypass it
            fn = inspect.unwrap(fn)
    target = inspect.unwrap(fn)
    if inspect.iscoroutinefunction(target):
        return _run_async(fn, key, (), args)
    return _run_sync(fn, key, (), args)
