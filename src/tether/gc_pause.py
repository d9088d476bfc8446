"""Pausing the cyclic garbage collector while a large document is read or compiled.

Parsing allocates hundreds of thousands of small objects that all stay alive; the collector
would scan them again and again (for a 10,000-node workflow that is most of the time spent).
None of them is cyclic garbage, so collection is paused for the duration and resumed after.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """Disable the cyclic collector inside the block (re-enabled if it was on)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
