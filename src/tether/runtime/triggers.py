"""Trigger rules and switch gates: whether a node whose dependencies finished may run.

A rule maps the statuses of a node's ``needs`` to ``running`` (decide the guard next),
``skipped`` or ``upstream_failed``:

============================  ======================================  ========================
rule                          runs when                               otherwise
============================  ======================================  ========================
all_success (default)         every need completed                    upstream_failed if one
                                                                      failed, else skipped
any_success                   one need completed                      likewise
all_done                      always
none_failed                   no need failed (skipped is fine)        upstream_failed
none_failed_min_one_success   no need failed and one completed        upstream_failed if one
                                                                      failed, else skipped
============================  ======================================  ========================

A node listed in a case of a switch runs only when the switch completed and chose that case
(:func:`gated_off`); a switch chooses once per pass.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from tether.status import NOT_OK, UnitStatus

if TYPE_CHECKING:
    from tether.compiler.plan import Plan, PlanNode


def trigger_verdict(rule: str, statuses: Sequence[str]) -> UnitStatus:
    """``running``, ``skipped`` or ``upstream_failed`` for ``rule`` over the needs' statuses."""
    if not statuses or rule == "all_done":
        return UnitStatus.RUNNING
    completed = [s == UnitStatus.COMPLETED for s in statuses]
    failed = any(s in NOT_OK for s in statuses)
    if rule == "all_success":
        ok = all(completed)
    elif rule == "any_success":
        ok = any(completed)
    elif rule == "none_failed":
        ok = not failed
    elif rule == "none_failed_min_one_success":
        ok = not failed and any(completed)
    else:  # pragma: no cover - plans are validated
        raise ValueError(f"unknown trigger rule {rule!r}")
    if ok:
        return UnitStatus.RUNNING
    return UnitStatus.UPSTREAM_FAILED if failed else UnitStatus.SKIPPED


def gated_off(plan: Plan, node: PlanNode, status: Callable[[str], str],
              output: Callable[[str], Any]) -> bool:
    """Whether a switch keeps ``node`` from running: it did not complete, or chose another
    case."""
    for switch_id, case in plan.gates.get(node.id, ()):
        if status(switch_id) != UnitStatus.COMPLETED:
            return True
        chosen = output(switch_id)
        if not isinstance(chosen, dict) or chosen.get("case") != case:
            return True
    return False


__all__ = ["gated_off", "trigger_verdict"]
