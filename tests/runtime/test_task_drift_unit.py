"""task_drift: which registered task no longer fits a plan, and why (the first misfit)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import tether
from tether.runtime.drift import task_drift

FLOW = """\
tether: 1
name: drift
nodes:
  a: {task: t.pay, with: {amount: 3, note: hi}}
"""


def test_each_kind_of_misfit(tmp_path: Path) -> None:
    path = tmp_path / "w.yaml"
    path.write_text(FLOW, encoding="utf-8")
    plan = tether.compile(path)

    def fits(amount: int, note: str = "") -> None: ...
    def dropped(amount: int) -> None: ...
    def more(amount: int, note: str, currency: str) -> None: ...
    def open_ended(amount: int, **rest: Any) -> None: ...

    assert task_drift(plan, {"t.pay": fits}) is None
    assert task_drift(plan, {"t.pay": open_ended}) is None
    assert task_drift(plan, {}) is None  # a missing task is reported as such elsewhere
    assert task_drift(plan, {"t.pay": dropped}) == \
        "task `t.pay` (node `a`) has no parameter `note` any more"
    assert task_drift(plan, {"t.pay": more}) == \
        "task `t.pay` (node `a`) now needs argument `currency`, which the plan does not pass"
