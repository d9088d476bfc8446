"""The budget of one render, and the meter that enforces it.

A :class:`TemplateBudget` gives a render a deadline and a size cap. While a template renders,
its :class:`Meter` is in a ContextVar, where the sandbox's checks (operators, filters, calls,
loop steps, output chunks) find it. A value the template computes may hold at most
``max_size`` characters (text) or items (lists, mappings); everything it computes in one
render together at most :data:`WORK_FACTOR` times that, loop steps included; and the render
stops at its deadline. Values the template only reads pass through whatever their size.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from tether.errors import TemplateLimit

WORK_FACTOR = 8
MAX_INT_DIGITS = 4300  # Python's own limit for turning an int into text (sys.int_info)
MAX_INT_BITS = math.ceil(MAX_INT_DIGITS * math.log2(10))


@dataclass(frozen=True)
class TemplateBudget:
    """What one render may spend: ``seconds`` of time and ``max_size`` characters or items.

    Args:
        seconds: The render's deadline, from its start.
        max_size: The most characters of text (or items of a list or mapping) any value the
            template computes may hold, its output included; 1,000,000 is about 1 MB of text.
    """

    seconds: float = 1.0
    max_size: int = 1_000_000

    def __post_init__(self) -> None:
        if not self.seconds > 0 or not self.max_size > 0:
            raise ValueError("a template budget needs a positive time and size")


DEFAULT_BUDGET = TemplateBudget()


class Meter:
    """The spending of one render against its budget; every check raises TemplateLimit."""

    __slots__ = ("allowance", "budget", "deadline", "limit", "output", "work")

    def __init__(self, budget: TemplateBudget, *, timed: bool = True) -> None:
        self.budget = budget
        self.limit = budget.max_size
        self.allowance = budget.max_size * WORK_FACTOR
        self.deadline = time.monotonic() + budget.seconds if timed else math.inf
        self.work = 0
        self.output = 0

    def tick(self) -> None:
        """Stop the render if its deadline has passed."""
        if time.monotonic() > self.deadline:
            raise TemplateLimit("time", f"rendering took longer than {self.budget.seconds:g}s")

    def step(self) -> None:
        """One step of a loop: counts as work, and checks the deadline."""
        self.work += 1
        if self.work > self.allowance:
            raise TemplateLimit("size", f"the template did more than {self.allowance:,} "
                                "steps and values in one render")
        self.tick()

    def allow(self, size: int, what: str) -> None:
        """Refuse, before computing it, a value of ``size`` over the cap."""
        if size > self.limit:
            raise TemplateLimit("size", f"{what} would hold {size:,} characters or items; "
                                f"the limit is {self.limit:,}")

    def charge(self, value: Any, what: str) -> None:
        """Account for a value the template computed."""
        size = size_of(value)
        self.allow(size, what)
        self.work += size
        if self.work > self.allowance:
            raise TemplateLimit("size", f"the template computed more than {self.allowance:,} "
                                "characters or items in one render")
        self.tick()

    def emit(self, chunk: str) -> None:
        """Account for a chunk of rendered output."""
        self.output += len(chunk)
        if self.output > self.limit:
            raise TemplateLimit("size", f"the output is longer than {self.limit:,} characters")
        self.tick()


_ACTIVE: ContextVar[Meter | None] = ContextVar("tether_template_meter", default=None)


def current() -> Meter:
    """The meter of the render in progress (outside a render: the default caps, no deadline)."""
    meter = _ACTIVE.get()
    return meter if meter is not None else Meter(DEFAULT_BUDGET, timed=False)


@contextlib.contextmanager
def metering(budget: TemplateBudget) -> Iterator[Meter]:
    """Make a fresh meter for ``budget`` the current one for the duration of a render."""
    meter = Meter(budget)
    token = _ACTIVE.set(meter)
    try:
        yield meter
    finally:
        _ACTIVE.reset(token)


def size_of(value: Any) -> int:
    """Characters of a string, items of a container, 0 for anything else (shallow)."""
    if isinstance(value, str | bytes | bytearray | list | tuple | dict | set | frozenset):
        return len(value)
    return 0


def text_size(value: Any, limit: int) -> int:
    """About ``len(str(value))``, exact for strings; counting stops past ``limit``.

    Walks nested containers without building their text, so a list holding one large
    string a thousand times is measured in a thousand steps, not by writing it out.
    """
    total = 0
    stack = [value]
    while stack and total <= limit:
        item = stack.pop()
        if isinstance(item, str | bytes | bytearray):
            total += len(item) + 3  # quotes and a separator, inside a container
        elif isinstance(item, dict):
            total += 2 + 2 * len(item)
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple | set | frozenset):
            total += 2 + 2 * len(item)
            stack.extend(item)
        elif isinstance(item, int):
            total += item.bit_length() * 3 // 10 + 2
        else:
            total += 24
    return total if not isinstance(value, str) else len(value)
