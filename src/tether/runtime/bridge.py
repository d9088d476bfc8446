"""The sync API over the async one: one event loop per thread, kept between calls.

After a call that ended with an exception (Ctrl-C raised inside the loop), what is left of it
is cancelled and awaited, so nothing of that call runs on afterwards (the driver lets sync
bodies in threads return first; see ``driver.py``).
"""

from __future__ import annotations

import asyncio
import atexit
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from tether.errors import TetherError

T = TypeVar("T")
_LOOPS = threading.local()


def _event_loop_runner() -> asyncio.Runner:
    runner: asyncio.Runner | None = getattr(_LOOPS, "runner", None)
    if runner is None:
        runner = asyncio.Runner()
        _LOOPS.runner = runner
        if threading.current_thread() is threading.main_thread():
            atexit.register(runner.close)
    return runner


def _abandon(loop: asyncio.AbstractEventLoop) -> None:
    tasks = asyncio.all_tasks(loop)
    for task in tasks:
        task.cancel()
    if tasks:
        loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))


def run_sync(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run ``coroutine`` on this thread's loop; refuse inside a running loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        runner = _event_loop_runner()
        try:
            return runner.run(coroutine)
        except BaseException:
            _abandon(runner.get_loop())
            raise
    coroutine.close()
    raise TetherError("the sync API cannot be called from a running event loop; "
                      "await arun/aresume/afork instead")
