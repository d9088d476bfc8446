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


def test_each_kind_of_misfit_with_the_signature_recorded_with_the_plan(tmp_path: Path) -> None:
    """With the task's signature recorded at submit, the worker's code must still have each
    parameter, keep the default of one the plan does not pass, and return the same type."""
    from tether.runtime.signatures import TaskSignature

    path = tmp_path / "w.yaml"
    path.write_text(FLOW.replace(", note: hi", ""), encoding="utf-8")
    plan = tether.compile(path)

    def v1(amount: int, note: str = "", retries: int = 3) -> str: ...
    def same(amount: int, note: str = "", retries: int = 3) -> str: ...
    def more(amount: int, note: str = "", retries: int = 3, tag: str = "") -> str: ...
    def dropped(amount: int, note: str = "") -> str: ...
    def other_default(amount: int, note: str = "", retries: int = 5) -> str: ...
    def other_return(amount: int, note: str = "", retries: int = 3) -> int: ...
    def open_ended(amount: int, **rest: Any) -> str: ...

    recorded = {"t.pay": TaskSignature.of(v1)}
    assert recorded["t.pay"] is not None
    fits = {"t.pay": recorded["t.pay"]}
    assert task_drift(plan, {"t.pay": same}, fits) is None
    assert task_drift(plan, {"t.pay": more}, fits) is None  # an optional parameter added
    assert task_drift(plan, {"t.pay": open_ended}, fits) is None
    assert task_drift(plan, {"t.pay": dropped}, fits) == \
        "task `t.pay` (node `a`) has no parameter `retries` any more (the plan was " \
        "submitted with it)"
    assert task_drift(plan, {"t.pay": dropped}) is None  # unrecorded: only the call is checked
    assert task_drift(plan, {"t.pay": other_default}, fits) == \
        "task `t.pay` (node `a`): parameter `retries` defaults to 5 now, not 3 as when the " \
        "plan was submitted"
    assert task_drift(plan, {"t.pay": other_return}, fits) == \
        "task `t.pay` (node `a`) returns `int` now, not `str` as when the plan was submitted"


def test_run_and_submit_record_the_signatures_of_the_tasks_they_have(tmp_path: Path) -> None:
    from tether.runtime.signatures import loads
    from tether.stores.open import open_checkpointer

    path = tmp_path / "w.yaml"
    path.write_text(FLOW, encoding="utf-8")

    def pay(amount: int, note: str = "") -> str:
        return f"{amount}{note}"

    with open_checkpointer(f"sqlite:///{tmp_path / 'a.db'}") as store:
        eid = tether.Runner(path, store, {}).submit()  # no tasks here: nothing recorded
        run = store.get_run(eid)
        assert run is not None and store.get_plan_tasks(run.plan_fingerprint) is None
        tether.Runner(path, store, {"t.pay": pay}).submit()
        recorded = loads(store.get_plan_tasks(run.plan_fingerprint))
        assert [(p.name, p.default) for p in recorded["t.pay"].params] == \
            [("amount", None), ("note", "''")]
        assert recorded["t.pay"].returns == "str"
    with open_checkpointer(f"sqlite:///{tmp_path / 'b.db'}") as store:
        result = tether.Runner(path, store, {"t.pay": pay}).run()
        run = store.get_run(result.execution_id)
        assert run is not None and "t.pay" in loads(store.get_plan_tasks(run.plan_fingerprint))
