"""A deploy with a fleet running (issue 24): real `tether worker` processes drain a backlog
while `tether upgrade` moves it to a new plan, with kill -9 of a worker in the middle. Every
run finishes exactly once, on the plan it was on when its next node started: the runs a
worker held (parked inside n5) are never switched under it, the queued ones move."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

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
