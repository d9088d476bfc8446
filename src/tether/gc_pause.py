"""Pausing the cyclic garbage collector while a large document is read or compiled.

Parsing allocates hundreds of thousands of small objects that all stay alive; the collector
would scan them again and again (for a 10,000-node workflow that is most of the time spent).
None of them is cyclic garbage, so collection is paused for the duration and resumed after.

Pausing alone leaves every one of those objects in the youngest generation, so the first
collection after the block would still scan them all (a fifth of a 10,000-node check). On
the way out they are moved to the oldest generation instead (``gc.freeze`` then
``gc.unfreeze``: two list splices), where a full collection finds them, cyclic garbage
included, as it would have once they had survived two younger collections. This is skipped
when the process keeps objects frozen itself (``gc.unfreeze`` would release them).
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
            if gc.get_freeze_count() == 0:
                gc.freeze()
                gc.unfreeze()
            gc.enable()
