"""Numeric settings given as expressions over the inputs, computed when they are used.

``concurrency``, ``timeout`` and ``loop.max_iterations`` may be templates
(``"{{ inputs.parallel }}"``); the compiler checks that they read only inputs. A value that is
not what the setting takes fails the node with a ``TemplateError`` naming the setting.
"""

from __future__ import annotations

import math
from typing import Any

from tether.durations import MAX_SECONDS, DurationError, parse_duration
from tether.jsontypes import json_type_name
from tether.runtime.render import RenderError, render
from tether.templating import TemplateBudget


def count_setting(value: int | str, names: dict[str, Any], where: str,
                  budget: TemplateBudget | None = None) -> int:
    """A positive integer setting (``concurrency``, ``max_iterations``)."""
    if isinstance(value, int):
        return value
    result = render(value, names, where, budget)
    if isinstance(result, bool) or not isinstance(result, int) or result < 1:
        shown = json_type_name(result) if not isinstance(result, int) else str(result)
        raise RenderError(where, f"must be a positive integer, not {shown}")
    return result


def seconds_setting(value: float | str | None, names: dict[str, Any], where: str,
                    budget: TemplateBudget | None = None) -> float | None:
    """A duration setting (``timeout``): seconds, or a duration text such as ``30s``."""
    if value is None or isinstance(value, int | float):
        return value
    result = render(value, names, where, budget)
    if isinstance(result, str):
        try:
            return parse_duration(result)
        except DurationError:
            raise RenderError(where, f"`{result[:40]}` is not a duration") from None
    if isinstance(result, int | float) and not isinstance(result, bool) and \
            math.isfinite(result) and 0 < result <= MAX_SECONDS:
        return float(result)
    raise RenderError(where, "must be a duration (30s, 5m) or a number of seconds above 0, "
                      f"not {json_type_name(result)}")


__all__ = ["count_setting", "seconds_setting"]
