"""Task drift (issue 24): a worker whose task no longer fits a run's plan (a parameter removed,
a required one added) does not claim the run; `tether runs --stuck` names the task and the
parameter; a worker whose task fits completes it on its first attempt (real workers)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from conftest import Fleet, chain_workflow, wait_for, wait_stuck
from tether.runtime.runner import Runner
from tether.stores.open import open_checkpointer

DRIFTED = '''
import tether

@tether.task
def step(rid: str, node: str, region: str, x: int = 0) -> int:
    """The new code: needs `region`, which plans of the old code do not pass."""
    return 1
'''


def test_a_worker_whose_task_drifted_leaves_the_run_queued_naming_the_parameter(
        shared_url: str, fleet_of: Callable[[str], Fleet], tmp_path: Path) -> None:
    fleet = fleet_of(shared_url)
    (tmp_path / "drifted_tasks.py").write_text(DRIFTED, encoding="utf-8")
    fleet.env["PYTHONPATH"] = f"{tmp_path}{os.pathsep}{fleet.env['PYTHONPATH']}"
    store = open_checkpointer(shared_url)
    eid = Runner(chain_workflow(tmp_path, 2), store, {}).submit({"rid": "d1"})
    fleet.start(1, tasks=("drifted_tasks",))

    wait_stuck(fleet, eid, "task `step` (node `n0`) now needs argument `region`")
    fleet.start(1)  # the code the plan was made for
    wait_for(lambda: (r := store.get_run(eid)) is not None and r.status == "completed", 60,
             "a worker with the fitting task to complete it")
    run = store.get_run(eid)
    assert run is not None and run.attempt == 1
    store.close()
