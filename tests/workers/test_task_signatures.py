"""Task signatures recorded with the plan (issue 24), with real processes: `tether submit
--tasks` imports the task module (v1) and records its signature beside the plan; a worker
whose PYTHONPATH holds v2 of the module (a parameter removed, made required, or given
another default) does not claim the run, and `tether runs --stuck` names the task and the
parameter; a worker with v1 then completes it on its first attempt."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import Fleet, wait_for, wait_stuck
from tether.runtime.runner import Runner
from tether.runtime.signatures import loads
from tether.stores.open import open_checkpointer

FLOW = """\
tether: 1
name: billing
inputs:
  rid: {type: string}
nodes:
  pay:
    task: charge
    with: {rid: "{{ inputs.rid }}", amount: 5}
output: "{{ nodes.pay.output }}"
"""

V1 = '''
import tether

@tether.task
def charge(rid: str, amount: int, currency: str = "EUR") -> str:
    return f"{amount} {currency}"
'''

V2 = {
    "removed": ("def charge(rid: str, amount: int) -> str:\n    return str(amount)\n",
                "task `charge` (node `pay`) has no parameter `currency` any more"),
    "required": ("def charge(rid: str, amount: int, currency: str) -> str:\n"
                 "    return currency\n",
                 "task `charge` (node `pay`) now needs argument `currency`"),
    "default": ('def charge(rid: str, amount: int, currency: str = "USD") -> str:\n'
                "    return currency\n",
                "task `charge` (node `pay`): parameter `currency` defaults to 'USD' now, "
                "not 'EUR'"),
}


def _module(directory: Path, body: str) -> None:
    directory.mkdir()
    (directory / "billing_tasks.py").write_text(body, encoding="utf-8")


@pytest.mark.parametrize("change", list(V2))
def test_a_worker_whose_task_no_longer_fits_the_recorded_signature_does_not_claim(
        shared_url: str, fleet_of: Callable[[str], Fleet], tmp_path: Path,
        change: str) -> None:
    fleet = fleet_of(shared_url)
    _module(tmp_path / "v1", V1)
    body, reason = V2[change]
    _module(tmp_path / "v2", "import tether\n\n@tether.task\n" + body)
    flow = tmp_path / "billing.yaml"
    flow.write_text(FLOW, encoding="utf-8")
    base = fleet.env["PYTHONPATH"]
    submitted = subprocess.run(
        [sys.executable, "-m", "tether", "submit", str(flow), "-i", "rid=r1", "--tasks",
         "billing_tasks", "--db", shared_url],
        env={**fleet.env, "PYTHONPATH": f"{tmp_path / 'v1'}{os.pathsep}{base}"},
        cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False)
    assert submitted.returncode == 0, submitted.stderr
    eid = submitted.stdout.strip()
    store = open_checkpointer(shared_url)
    try:
        run = store.get_run(eid)
        assert run is not None
        recorded = loads(store.get_plan_tasks(run.plan_fingerprint))
        assert [p.name for p in recorded["charge"].params] == ["rid", "amount", "currency"]
        assert recorded["charge"].returns == "str"

        fleet.env["PYTHONPATH"] = f"{tmp_path / 'v2'}{os.pathsep}{base}"
        fleet.start(1, tasks=("billing_tasks",))

        wait_stuck(fleet, eid, reason)

        fleet.env["PYTHONPATH"] = f"{tmp_path / 'v1'}{os.pathsep}{base}"
        fleet.start(1, tasks=("billing_tasks",))  # the code the run was submitted with
        wait_for(lambda: (r := store.get_run(eid)) is not None and r.status == "completed",
                 60, "a worker with the fitting task to complete it")
        run = store.get_run(eid)
        assert run is not None and run.attempt == 1
    finally:
        store.close()


def test_the_first_worker_to_claim_records_the_signatures_a_submitter_could_not(
        shared_url: str, fleet_of: Callable[[str], Fleet], tmp_path: Path) -> None:
    """Submitted without the task modules (nothing recorded), the plan's signatures are
    recorded by the first worker that claims its runs; a worker with other code then leaves
    the next run queued."""
    fleet = fleet_of(shared_url)
    _module(tmp_path / "v1", V1)
    body, reason = V2["removed"]
    _module(tmp_path / "v2", "import tether\n\n@tether.task\n" + body)
    flow = tmp_path / "billing.yaml"
    flow.write_text(FLOW, encoding="utf-8")
    base = fleet.env["PYTHONPATH"]
    store = open_checkpointer(shared_url)
    try:
        first = Runner(flow, store, {}).submit({"rid": "r1"})
        run = store.get_run(first)
        assert run is not None and store.get_plan_tasks(run.plan_fingerprint) is None
        fleet.env["PYTHONPATH"] = f"{tmp_path / 'v1'}{os.pathsep}{base}"
        [old] = fleet.start(1, tasks=("billing_tasks",))
        wait_for(lambda: (r := store.get_run(first)) is not None and r.status == "completed",
                 60, "the v1 worker to complete the first run")
        assert "currency" in (store.get_plan_tasks(run.plan_fingerprint) or "")
        old.terminate()
        old.wait(30)
        second = Runner(flow, store, {}).submit({"rid": "r2"})
        fleet.env["PYTHONPATH"] = f"{tmp_path / 'v2'}{os.pathsep}{base}"
        fleet.start(1, tasks=("billing_tasks",))
        wait_stuck(fleet, second, reason)
    finally:
        store.close()
