"""Fencing proven with SIGSTOP (issue 8, measured item 3), on SQLite and PostgreSQL.

An owner is stopped (``SIGSTOP``) while a task body of its run is in flight, and stays stopped
past its lease. A stopped process is alive, so nobody may treat it as dead: another process
waits for the lease to expire, takes the run over and finishes it. Then the first one is woken
(``SIGCONT``) with its task body released: it must notice that it lost the lease before its
next write, write nothing more (no checkpoint row, no second ``run_end``, no further task
body), and end with ``LeaseLost``: as an exception of the Python API, and as exit status 1
with a message naming the run from the ``tether`` command.

The workflow is a chain ``first -> middle -> last``; the owner is stopped inside ``middle``.
Its body of ``middle`` never commits, so the taker runs ``middle`` again (that body was in
flight, not committed: at-least-once is all a stalled owner allows). Every node has exactly
one completed checkpoint, and ``last``, which comes after the stall, ran once.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest
from harness import checks, launch
from harness.tasks import canonical, read_effects

from tether import open_checkpointer
from tether.runtime.history_build import build_history
from tether.stores.base import Checkpointer

CLI_LEASE = 3.0  # the tether command's lease, set with TETHER_LEASE_SECONDS


def _wait_blocked(gate: Path, process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 60
    while not (gate / "blocked").exists():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the owner never reached its blocking node"
        time.sleep(0.05)


def _wait_lease_expired(store: Checkpointer, execution_id: str, limit: float) -> None:
    """Wait until the run's lease, as written in the store, is in the past."""
    deadline = time.monotonic() + limit
    while True:
        run = store.get_run(execution_id)
        assert run is not None and run.lease_until is not None, run
        if run.lease_until < time.time() - 0.2:
            return
        assert time.monotonic() < deadline, f"the lease never expired: {run}"
        time.sleep(0.1)


def _completed_nodes(store: Checkpointer, execution_id: str) -> Counter[str]:
    return Counter(row.node_id for row in store.rows(execution_id)
                   if row.step_type == "node" and row.status == "completed")


def _row_ids(store: Checkpointer, execution_id: str) -> list[str]:
    return [row.checkpoint_id for row in store.rows(execution_id)]


@pytest.mark.slow
def test_a_stopped_owner_past_its_lease_writes_nothing_after_another_finished_the_run(
        shared_url: str, tmp_path: Path) -> None:
    """Python API: the owner (lease 1.5 s) is SIGSTOPped inside ``middle``; once its lease
    expired another process resumes and completes the run; SIGCONT: the owner raises
    LeaseLost naming the run, adds no row and runs no further body; one run_end."""
    plan_file = launch.compile_to("chain.yaml", tmp_path / "plans")[1]
    effects, gate, eid = tmp_path / "effects.jsonl", tmp_path / "gate", str(uuid.uuid4())
    holder, result = launch.start_fresh(
        {"url": shared_url, "action": "run", "plan": plan_file, "execution_id": eid,
         "crash": "block:middle", "gate": str(gate), "effects": str(effects),
         "lease_seconds": 1.5}, tmp_path)
    store = open_checkpointer(shared_url)
    try:
        _wait_blocked(gate, holder)
        os.kill(holder.pid, signal.SIGSTOP)
        try:
            _wait_lease_expired(store, eid, 60)
            taker = launch.run_fresh({"url": shared_url, "action": "resume",
                                      "execution_id": eid, "value": None,
                                      "effects": str(effects)}, tmp_path)
            assert taker.result is not None, taker.describe()
            assert taker.result["outcome"] == "completed", taker.result
            rows_before, effects_before = _row_ids(store, eid), read_effects(effects)
            (gate / "release").write_text("")
        finally:
            os.kill(holder.pid, signal.SIGCONT)
        done = launch.finish(holder, result)
        assert done.returncode == 0 and done.result is not None, done.describe()
        assert done.result["error_type"] == "LeaseLost", done.result
        assert eid in done.result["message"], done.result
        assert _row_ids(store, eid) == rows_before, checks.describe(store, eid)
        assert read_effects(effects) == effects_before
        assert checks.run_ends(store, eid) == ["completed"], checks.describe(store, eid)
        assert _completed_nodes(store, eid) == {"first": 1, "middle": 1, "last": 1}
        ran = checks.executions(read_effects(effects), eid=eid)
        assert ran == {("h.step", canonical({"name": "first"})): 1,
                       ("h.step", canonical({"name": "middle"})): 2,  # one never committed
                       ("h.step", canonical({"name": "last"})): 1}, ran
        by_holder = checks.executions(read_effects(effects), pids={holder.pid}, eid=eid)
        assert ("h.step", canonical({"name": "last"})) not in by_holder
    finally:
        store.close()


TASKS = '''
import json, os, time
from pathlib import Path

import tether


@tether.task("fence.step")
def step(name: str) -> dict:
    with open(os.environ["FENCE_EFFECTS"], "a", encoding="utf-8") as handle:
        handle.write(json.dumps({"pid": os.getpid(), "name": name}) + "\\n")
        handle.flush()
        os.fsync(handle.fileno())
    gate = os.environ.get("FENCE_GATE")
    if gate and name == "middle":
        Path(gate).mkdir(exist_ok=True)
        Path(gate, "blocked").write_text(str(os.getpid()))
        while not Path(gate, "release").exists():
            time.sleep(0.05)
    return {"name": name}
'''

WORKFLOW = '''tether: 1
name: fenced
nodes:
  first: {task: fence.step, with: {name: first}}
  middle: {needs: [first], task: fence.step, with: {name: middle}}
  last: {needs: [middle], task: fence.step, with: {name: last}}
'''


@pytest.mark.slow
def test_the_tether_command_of_a_stopped_owner_exits_1_naming_the_run(
        shared_url: str, tmp_path: Path) -> None:
    """The same through ``tether run`` / ``tether resume`` (the command's lease is 3 s,
    from ``TETHER_LEASE_SECONDS``):
    the woken owner exits 1 with ``error: run <id>: lost its lease ...``, no traceback, and
    writes nothing more; the taker's ``tether resume`` completed the run."""
    (tmp_path / "fence_tasks.py").write_text(TASKS)
    (tmp_path / "fenced.yaml").write_text(WORKFLOW)
    effects, gate, eid = tmp_path / "effects.txt", tmp_path / "gate", str(uuid.uuid4())
    base = [sys.executable, "-m", "tether"]
    common = ["--tasks", "fence_tasks.py", "--db", shared_url]
    env = {**os.environ, "FENCE_EFFECTS": str(effects), "NO_COLOR": "1",
           "TETHER_LEASE_SECONDS": str(CLI_LEASE)}
    holder = subprocess.Popen([*base, "run", "fenced.yaml", "--execution-id", eid, "-q",
                               *common], cwd=tmp_path, env={**env, "FENCE_GATE": str(gate)},
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    store = open_checkpointer(shared_url)
    try:
        _wait_blocked(gate, holder)
        os.kill(holder.pid, signal.SIGSTOP)
        try:
            _wait_lease_expired(store, eid, CLI_LEASE + 30)
            taker = subprocess.run([*base, "resume", eid, *common], cwd=tmp_path, env=env,
                                   capture_output=True, text=True, timeout=120)
            assert taker.returncode == 0, (taker.stdout, taker.stderr)
            rows_before, effects_before = _row_ids(store, eid), effects.read_text()
            (gate / "release").write_text("")
        finally:
            os.kill(holder.pid, signal.SIGCONT)
        out, err = holder.communicate(timeout=120)
        assert holder.returncode == 1, (out, err)
        assert f"run {eid}: lost its lease" in err, err
        assert "Traceback" not in err + out, err
        assert _row_ids(store, eid) == rows_before, checks.describe(store, eid)
        assert effects.read_text() == effects_before
        assert checks.run_ends(store, eid) == ["completed"], checks.describe(store, eid)
        assert _completed_nodes(store, eid) == {"first": 1, "middle": 1, "last": 1}
        lines = [json.loads(line) for line in effects.read_text().splitlines()]
        assert Counter(line["name"] for line in lines) == {"first": 1, "middle": 2, "last": 1}
        assert [line["name"] for line in lines if line["pid"] == holder.pid] == [
            "first", "middle"]
        history = build_history(store, eid)  # the history tells it as it happened
        assert [(e.kind, e.attempt) for e in history.events if e.node == "middle"] == [
            ("node_started", 1), ("node_abandoned", 1), ("node_started", 2),
            ("node_completed", 2)]
        (lost,) = [e for e in history.events if e.kind == "lease_lost"]
        assert lost.pid == holder.pid and lost.reason is not None
        assert next(e.pid for e in history.events if e.kind == "claimed") == holder.pid
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.communicate()
        store.close()
