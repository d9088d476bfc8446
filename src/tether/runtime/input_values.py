"""Checking given values against declared ones: a run's inputs, an approval form's fields.

Kept apart from ``invoke.py`` (which calls tasks, and imports asyncio) so that ``tether
submit`` checks a run's inputs without importing the runtime (issue 25, fast start).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from tether.jsontypes import article, json_type_name, matches_type

if TYPE_CHECKING:
    from tether.compiler.plan import PlanInput

__all__ = ["Problem", "check_values"]


class Problem(str):
    """One problem :func:`check_values` found: its message, which also names ``field``, the
    value's name (so a form can show each message by its field)."""

    field: str

    def __new__(cls, field: str, message: str) -> Problem:
        problem = super().__new__(cls, message)
        problem.field = field
        return problem


def check_values(specs: tuple[PlanInput, ...], given: dict[str, Any] | None,
                 what: str) -> tuple[dict[str, Any], list[Problem]]:
    """Values completed with defaults, and the problems found (missing, unknown, mistyped)."""
    given = dict(given or {})
    problems: list[Problem] = []
    result: dict[str, Any] = {}
    declared = {spec.name: spec for spec in specs}
    for name in given:
        if name not in declared:
            problems.append(Problem(name, f"unknown {what} '{name}'" + (
                f" (declared: {', '.join(declared)})" if declared else "")))
    for spec in specs:
        if spec.name in given:
            value = given[spec.name]
            if value is not None and not matches_type(value, spec.type):
                problems.append(Problem(spec.name, f"{what} '{spec.name}' must be "
                                        f"{article(spec.type)}, not {json_type_name(value)}"))
            elif value is not None and spec.enum is not None and not _listed(value, spec.enum):
                problems.append(Problem(spec.name, f"{what} '{spec.name}' must be one of "
                                        f"{_choices(spec.enum)}"))
            result[spec.name] = value
        elif spec.required:
            problems.append(Problem(spec.name, f"missing required {what} '{spec.name}'"))
        else:
            result[spec.name] = spec.default
    return result, problems


def _listed(value: Any, allowed: tuple[Any, ...]) -> bool:
    """Whether ``value`` is one of ``allowed`` (``True`` is not ``1``)."""
    if isinstance(value, bool):
        return any(a is value for a in allowed)
    return any(value == a and not isinstance(a, bool) for a in allowed)


def _choices(allowed: tuple[Any, ...]) -> str:
    shown = [json.dumps(a, ensure_ascii=False)[:60] for a in allowed[:20]]
    return ", ".join(shown) + (", ..." if len(allowed) > 20 else "")
