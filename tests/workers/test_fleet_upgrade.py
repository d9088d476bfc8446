"""A deploy with a fleet running (issue 24): real `tether worker` processes drain a backlog
while `tether upgrade` moves it to a new plan, with kill -9 of a worker in the middle. Every
run finishes exactly once, on the plan it was on when its next node started: the runs a
worker held (parked inside n5) are never switched under it, the queued ones move."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import tether
from conftest import NODES, Fleet, chain_workflow, wait_for
from tether.runtime.runner import Runner
from tether.stores.open import open_checkpointer

RUNS = 8


def _upgrade(fleet: Fleet, new: Path) -> dict[str, list[str]]:
    done = subprocess.run([sys.executable, "-m", "tether", "upgrade", str(new), "--db",
                           fleet.url, "--json"], env=fleet.env, cwd=fleet.directory,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    result: dict[str, list[str]] = json.loads(done.stdout)["compat"]
    return result


def test_upgrade_during_a_drain_with_kill_9(
        shared_url: str, fleet_of: Callable[[str], Fleet], tmp_path: Path) -> None:
    fleet = fleet_of(shared_url)
    old = chain_workflow(tmp_path)
    new = tmp_path / "chain_v2.yaml"
    new.write_text(old.read_text(encoding="utf-8").replace("node: n9,", "node: n9b,"),
                   encoding="utf-8")
    store = open_checkpointer(shared_url)
    try:
        runner = Runner(old, store, {})
        ids = [runner.submit({"rid": f"r{i}"}) for i in range(RUNS)]
    finally:
        store.close()
    rid = {eid: f"r{i}" for i, eid in enumerate(ids)}

    [first] = fleet.start(1, concurrency=4, gated=True)
    started = Path(str(fleet.gate) + ".started")
    wait_for(lambda: started.exists() and len(started.read_text().split()) == 4, 60,
             "the worker to hold 4 runs inside n5")
    parked = set(started.read_text().split())

    moved = _upgrade(fleet, new)
    held = {rid[eid] for eid in moved["held"]}
    assert held == parked  # never switched under the worker
    assert {rid[eid] for eid in moved["moved"]} == {rid[eid] for eid in ids} - parked

    first.kill()
    first.wait()
    again = _upgrade(fleet, new)  # the dead worker's leases still name it: still held
    assert {rid[eid] for eid in again["held"]} == parked and again["moved"] == []

    fleet.gate.write_text("open")
    fleet.start(1, concurrency=4, gated=True)
    store = open_checkpointer(shared_url)
    try:
        wait_for(lambda: {store.get_run(e).status for e in ids} == {"completed"},  # type: ignore[union-attr]
                 120, "every run to complete")
    finally:
        store.close()
    effects = fleet.lines(fleet.effects)
    expected = set()
    for name in (rid[eid] for eid in ids):
        last = "n9" if name in parked else "n9b"
        expected |= {f"{name} n{n}" for n in range(NODES - 1)} | {f"{name} {last}"}
    assert set(effects) == expected and set(effects.values()) == {1}


STEP_V2 = '''
import os

import tether
from fleet_tasks import _append


@tether.task
def step_v2(rid: str, node: str, x: int = 0) -> int:
    """The new code's last step: only the new workers have it."""
    _append(os.environ["TETHER_TEST_EFFECTS"], f"{rid} {node}")
    return x + 1
'''


def test_old_and_new_workers_drain_a_mixed_backlog_through_a_deploy(
        shared_url: str, fleet_of: Callable[[str], Fleet], tmp_path: Path) -> None:
    """A deploy as it happens: runs of the old and the new version queued; an old-code worker
    holds four old runs mid-node; `tether upgrade` moves the other old runs; a new-code worker
    (the only one with the new version's task) drains every new-plan run; the old worker is
    killed with SIGKILL and an old-code worker replaces it. Every run finishes exactly once,
    on the plan it was on when its next node started."""
    fleet = fleet_of(shared_url)
    (tmp_path / "fleet_tasks_v2.py").write_text(STEP_V2, encoding="utf-8")
    fleet.env["PYTHONPATH"] = f"{tmp_path}{os.pathsep}{fleet.env['PYTHONPATH']}"
    old = chain_workflow(tmp_path)
    new = tmp_path / "chain_v2.yaml"
    last = '    task: step\n    with: {rid: "{{ inputs.rid }}", node: n9,'
    text = old.read_text(encoding="utf-8")
    assert last in text
    new.write_text(text.replace(last, last.replace("step", "step_v2").replace("n9,", "n9b,")),
                   encoding="utf-8")
    store = open_checkpointer(shared_url)
    try:
        olds = [Runner(old, store, {}).submit({"rid": f"o{i}"}) for i in range(RUNS)]
        news = [Runner(new, store, {}).submit({"rid": f"w{i}"}) for i in range(4)]
    finally:
        store.close()
    rid = {eid: f"o{i}" for i, eid in enumerate(olds)} | \
        {eid: f"w{i}" for i, eid in enumerate(news)}

    [first] = fleet.start(1, concurrency=4, gated=True)  # the old code: no step_v2
    started = Path(str(fleet.gate) + ".started")
    wait_for(lambda: started.exists() and len(started.read_text().split()) == 4, 60,
             "the old worker to hold 4 old runs inside n5")
    parked = set(started.read_text().split())
    assert parked <= {f"o{i}" for i in range(RUNS)}

    moved = _upgrade(fleet, new)
    assert {rid[eid] for eid in moved["held"]} == parked
    assert {rid[eid] for eid in moved["moved"]} == {f"o{i}" for i in range(RUNS)} - parked
    assert {rid[eid] for eid in moved["current"]} == {f"w{i}" for i in range(4)}

    fleet.start(1, concurrency=4, tasks=("fleet_tasks", "fleet_tasks_v2"))  # the new code
    store = open_checkpointer(shared_url)
    try:
        on_new = [eid for eid in rid if rid[eid] not in parked]
        wait_for(lambda: {store.get_run(e).status for e in on_new} == {"completed"},  # type: ignore[union-attr]
                 120, "the new worker to drain the new plan's runs")
        first.kill()  # SIGKILL, four runs held inside n5
        first.wait()
        fleet.gate.write_text("open")
        fleet.start(1, concurrency=4)  # an old-code worker replaces it
        wait_for(lambda: {store.get_run(e).status for e in rid} == {"completed"},  # type: ignore[union-attr]
                 120, "every run to complete")
        new_fp = tether.compile(new).fingerprint
        for eid, name in rid.items():
            run = store.get_run(eid)
            assert run is not None
            assert (run.plan_fingerprint == new_fp) == (name not in parked), name
    finally:
        store.close()
    effects = fleet.lines(fleet.effects)
    expected = set()
    for name in rid.values():
        final = "n9" if name in parked else "n9b"
        expected |= {f"{name} n{n}" for n in range(NODES - 1)} | {f"{name} {final}"}
    assert set(effects) == expected and set(effects.values()) == {1}

