"""Calling task functions: retries, backoff, timeouts, and every way a task can end.

A sync task runs in a worker thread when other units run beside it or it has a timeout, and
inline (in the event loop's thread, no thread hop) when it is the only unit that can run; an
async task is awaited. Whatever a task raises is recorded as the node's failure, named by its
type: ``Exception`` subclasses, and also ``SystemExit``, ``GeneratorExit``, other
``BaseException`` subclasses and a ``CancelledError`` the task raised itself. Only three
things pass through: the suspend signal of ``interrupt()``, ``KeyboardInterrupt`` (the
operator's Ctrl-C, which stops the attempt), and a cancellation of the run's own tasks (the
attempt lost its lease).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import functools
import inspect
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from tether.errors import InterruptSignal, NotJSONError, Picklable
from tether.observability.observer import next_attempt, retried
from tether.runtime.context import UNIT, UnitScope
from tether.runtime.idempotent import cached_call
from tether.runtime.input_values import Problem as Problem
from tether.runtime.input_values import check_values as check_values
from tether.runtime.state import NodeError
from tether.runtime.values import to_json

if TYPE_CHECKING:
    from tether.compiler.plan import TaskNode


class NodeFailure(Picklable, Exception):
    """A unit failed for good (retries exhausted, or a failure retrying cannot fix).

    ``tries``: the failed attempts of a node with a retry policy (see :func:`call_task`)."""

    def __init__(self, error: NodeError, tries: tuple[dict[str, Any], ...] = ()) -> None:
        self.error = error
        self.tries = tries
        super().__init__(error.message)


_ASYNC: dict[Any, bool] = {}
""":func:`is_async` of the task functions seen (inspecting a function costs more than calling
a trivial one; registries hold a few hundred functions at most)."""


PLAIN = frozenset({dict, list, str, int, float, bool, type(None)})
"""Result types that are never awaitable (a task's usual results skip the ABC check)."""


def is_async(fn: Callable[..., Any]) -> bool:
    """Whether calling ``fn`` gives a coroutine (async functions and async ``__call__``)."""
    try:
        return _ASYNC[fn]
    except (KeyError, TypeError):  # TypeError: an unhashable callable object
        pass
    target = inspect.unwrap(fn)
    found = inspect.iscoroutinefunction(target) or inspect.iscoroutinefunction(
        getattr(target, "__call__", None))  # noqa: B004 - callable objects with async __call__
    if len(_ASYNC) >= 4096:
        _ASYNC.clear()
    with contextlib.suppress(TypeError):
        _ASYNC[fn] = found
    return found


def _cancelled_by_us() -> bool:
    """Whether the current task is being cancelled by the runtime (not by the task's code)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


TASK_THREADS = ThreadPoolExecutor(256, thread_name_prefix="tether-task")
"""The threads sync task bodies run in (shared by every run of the process; threads are
started on demand and kept warm)."""


class Bodies:
    """The sync task bodies of one attempt that run in threads, so that an attempt stopped by
    Ctrl-C can let them finish (and record their idempotent results) before it lets the run
    go. Python cannot stop a thread."""

    def __init__(self) -> None:
        self.running: set[Future[Any]] = set()

    async def call(self, fn: Callable[[], Any]) -> Any:
        future = TASK_THREADS.submit(contextvars.copy_context().run, fn)
        self.running.add(future)
        future.add_done_callback(self.running.discard)
        return await asyncio.wrap_future(future)

    def wait(self) -> None:
        """Block until every body still running has returned."""
        concurrent.futures.wait(list(self.running))


async def call_task(fn: Callable[..., Any], node: TaskNode, args: dict[str, Any],
                    scope: UnitScope, semaphore: asyncio.Semaphore | None,
                    bodies: Bodies, *, spent: float = 0.0,
                    timeout: float | None = None,
                    tries: list[dict[str, Any]] | None = None) -> tuple[Any, str]:
    """Run a task unit to its JSON result, retrying per the node's policy.

    ``semaphore`` bounds concurrent bodies; None means the call is inline (the only unit
    running). ``spent``: seconds of the node's ``timeout`` (computed, when it is an
    expression) already used (rendering its arguments) before the first attempt.
    Suspensions pass through at once; results that are not JSON fail the unit without
    retrying (the same call would return the same value). ``tries`` collects each failed
    attempt (:func:`failed_try`); a final failure carries them too.
    """
    attempts = node.retry.max_attempts if node.retry else 1
    last: BaseException | None = None
    for attempt in range(1, attempts + 1):
        limit = None if timeout is None else timeout - (spent if attempt == 1 else 0.0)
        if attempt > 1:
            next_attempt(node.id, attempt)
        started = time.time()
        try:
            return await call_once(fn, node, args, scope, semaphore, bodies, limit,
                                   timeout=timeout)
        except BaseException as exc:
            last = retryable(exc)
        delay = node.retry.delay(attempt) if attempt < attempts and node.retry else None
        if tries is not None:
            tries.append(failed_try(attempt, last, node.id, started, delay))
        if delay is not None:
            retried(node.id, attempt, last, delay)
            await asyncio.sleep(delay)
    assert last is not None
    error = failure(last, node, attempts)
    error.tries = tuple(tries or ())
    raise error from None


def failed_try(attempt: int, exc: BaseException, node_id: str, started: float,
               backoff: float | None) -> dict[str, Any]:
    """One failed attempt as the node's state entry keeps it (``attempts``, for the run's
    history): its number, error, start and end, and the backoff before the next one."""
    return {"attempt": attempt, "error": NodeError.of(exc, node_id).to_json(),
            "timed_out": isinstance(exc, TimeoutError), "started_at": started,
            "ended_at": time.time(), "backoff": backoff}


def failure(exc: BaseException, node: TaskNode, attempts: int = 1) -> NodeFailure:
    """The failure of a task unit whose last attempt raised ``exc`` (a retryable one)."""
    return NodeFailure(NodeError.of(exc, node.id, attempts=attempts if attempts > 1 else None))


async def call_once(fn: Callable[..., Any], node: TaskNode, args: dict[str, Any],
                    scope: UnitScope, semaphore: asyncio.Semaphore | None, bodies: Bodies,
                    limit: float | None, *, timeout: float | None = None,
                    poll: int | None = None) -> tuple[Any, str]:
    """One call of a task: its JSON result and text, or whatever it raised."""
    scope.asked = 0
    token = UNIT.set(scope)
    try:
        if semaphore is None and limit is None and not node.idempotent and poll is None:
            # the hot path, without a frame of its own: the only unit running, no timeout
            result = fn(**args)
            if is_async(fn):
                result = await result
            if type(result) not in PLAIN and inspect.isawaitable(result):
                result = await result
        elif semaphore is None:
            result = await _attempt(fn, node, args, bodies, limit, inline=True,
                                    timeout=timeout, poll=poll)
        else:
            async with semaphore:
                result = await _attempt(fn, node, args, bodies, limit, inline=False,
                                        timeout=timeout, poll=poll)
        return to_json(result, f"the output of node '{node.id}'", node_id=node.id)
    finally:
        UNIT.reset(token)


def retryable(exc: BaseException) -> BaseException:
    """``exc`` if a failed attempt may be retried; re-raises what must pass through (a
    suspension, a value that is not JSON, Ctrl-C, the runtime's own cancellation)."""
    if isinstance(exc, InterruptSignal | NotJSONError | NodeFailure | KeyboardInterrupt):
        raise exc
    if isinstance(exc, asyncio.CancelledError) and _cancelled_by_us():
        raise exc
    return exc  # the task's own CancelledError too: a failure like any other


async def _attempt(fn: Callable[..., Any], node: TaskNode, args: dict[str, Any],
                   bodies: Bodies, limit: float | None, *, inline: bool,
                   timeout: float | None, poll: int | None) -> Any:
    cached = node.idempotent or (poll is not None and
                                 getattr(fn, "__tether_idempotent__", False))
    if inline and limit is None and not cached and not is_async(fn):
        result = fn(**args)  # the hot path: the only unit running, no timeout
        return await result if inspect.isawaitable(result) else result
    call = functools.partial(cached_call, fn, args, poll) if cached else \
        functools.partial(fn, **args)
    if is_async(fn):
        coroutine = call()
    elif inline and limit is None:
        result = call()
        return await result if inspect.isawaitable(result) else result
    else:
        coroutine = bodies.call(call)
    if limit is None:
        result = await coroutine
    else:
        try:
            if limit <= 0:
                coroutine.close()
                raise TimeoutError
            result = await asyncio.wait_for(coroutine, limit)
        except TimeoutError:
            raise TimeoutError(f"node '{node.id}' timed out after {timeout:g}s") from None
    if inspect.isawaitable(result):
        result = await result
    return result
