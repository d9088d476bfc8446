"""Timers and schedules in a fleet of real `tether worker` processes (SQLite and PostgreSQL):
every worker is restarted while timers and schedule ticks are pending, and still each timer
fires once and each tick starts exactly one run.

A worker parks a sleeping run (it holds no slot while the timer waits); any worker fires the
timer when it is due (the claim of its pending row: one winner). A schedule's tick has a
deterministic execution id, so the tick's run exists once whichever workers race for it.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from conftest import Fleet, wait_for
from tether.runtime.runner import Runner
from tether.stores.open import open_checkpointer
from tether.stores.schedule_records import ScheduleRecord
from tether.workers.schedules import due_ticks, tick_execution_id

SLEEPY = """\
tether: 1
name: sleepy
inputs:
  rid: {type: string}
nodes:
  before:
    task: step
    with: {rid: "{{ inputs.rid }}", node: before}
  nap:
    needs: [before]
    sleep: 3s
  after:
    needs: [nap]
    task: step
    with: {rid: "{{ inputs.rid }}", node: after}
"""

TICKED = """\
tether: 1
name: ticked
inputs:
  rid: {type: string, default: tick}
schedule: {cron: "* * * * *", catchup: all}
nodes:
  only:
    task: step
    with: {rid: "{{ run.id }}", node: only}
"""


def _restart(fleet: Fleet, procs: list, count: int = 2) -> list:
    for proc in procs:
        proc.send_signal(signal.SIGTERM)
    assert [proc.wait(60) for proc in procs] == [0] * len(procs)
    started = fleet.start(count)
    fleet.wait_registered(count)
    return started


def test_timers_fire_once_across_a_restart_of_every_worker(
        shared_url: str, fleet_of: Callable[[str], Fleet], tmp_path: Path) -> None:
    """6 runs park on a 3 s sleep; both workers are stopped and two new ones started before
    it is due: each timer fires once (one `timer` decision per run), every node ran once."""
    (tmp_path / "sleepy.yaml").write_text(SLEEPY)
    fleet = fleet_of(shared_url)
    store = open_checkpointer(shared_url)
    try:
        runner = Runner(tmp_path / "sleepy.yaml", store, {})
        ids = [runner.submit({"rid": f"r{i}"}) for i in range(6)]
        workers = fleet.start(2)
        fleet.wait_registered(2)
        wait_for(lambda: all((r := store.get_run(e)) is not None and r.status == "paused"
                             for e in ids), 60, "every run to park on its timer")
        workers = _restart(fleet, workers)
        wait_for(lambda: all((r := store.get_run(e)) is not None and r.status == "completed"
                             for e in ids), 90, "the new workers to fire every timer")
        effects = fleet.lines(fleet.effects)
        assert effects == {f"r{i} {node}": 1 for i in range(6) for node in ("before", "after")}
        for eid in ids:
            assert [d.resolver for d in store.decisions(eid)] == ["timer"], eid
        _restart(fleet, workers, 0)
    finally:
        store.close()


def test_each_schedule_tick_starts_exactly_one_run_across_worker_restarts(
        shared_url: str, fleet_of: Callable[[str], Fleet], tmp_path: Path) -> None:
    """A per-minute schedule registered as if 3 minutes ago (catchup: all), 3 workers racing,
    then all restarted: every missed tick has exactly one run, each ran its node once."""
    (tmp_path / "ticked.yaml").write_text(TICKED)
    fleet = fleet_of(shared_url)
    store = open_checkpointer(shared_url)
    try:
        plan = Runner(tmp_path / "ticked.yaml", store, {}).plan
        assert plan is not None and plan.schedule is not None
        start = time.time() - 180
        store.put_schedule(ScheduleRecord(
            name="ticked", plan_fingerprint=plan.fingerprint, cron="* * * * *",
            timezone="UTC", catchup="all", created_at=start, updated_at=start,
            last_tick=start), plan.to_json())
        now = datetime.now(UTC)
        record = store.get_schedule("ticked")
        assert record is not None
        expected = [tick_execution_id("ticked", t) for t in due_ticks(record, now)]
        assert len(expected) >= 2
        workers = fleet.start(3)
        fleet.wait_registered(3)
        wait_for(lambda: all((r := store.get_run(e)) is not None and r.status == "completed"
                             for e in expected), 90, "a run of every missed tick")
        workers = _restart(fleet, workers, 3)
        wait_for(lambda: (s := store.get_schedule("ticked")) is not None
                 and s.last_tick is not None and s.last_tick >= now.timestamp() - 60, 30,
                 "the schedule to have moved past the missed ticks")
        _restart(fleet, workers, 0)
        # Counted against the schedule's own clock, not against how fast this machine ran:
        # a minute may turn while the test runs (slowly, under load), and its tick's run may
        # be fired and still be queued (or handed back) when the last workers stop.
        final = store.get_schedule("ticked")
        assert final is not None and final.last_tick is not None
        fired = {tick_execution_id("ticked", t) for t in due_ticks(
            record, datetime.fromtimestamp(final.last_tick, UTC))}
        listed = [r for r in store.list_runs(limit=100) if r.workflow == "ticked"]
        runs = {r.execution_id: r for r in listed}
        assert len(listed) == len(runs), "a tick's run exists once"
        assert set(expected) <= set(runs) <= fired, (sorted(runs), sorted(fired))
        ran = fleet.lines(fleet.effects)
        assert set(ran) <= {f"{eid} only" for eid in runs}, ran
        assert set(ran.values()) <= {1}, ran
        for eid, run in runs.items():
            if run.status == "completed":
                assert ran[f"{eid} only"] == 1, (eid, ran)
    finally:
        store.close()


TIMED_OUT = """\
tether: 1
name: timed_out
inputs:
  rid: {type: string}
nodes:
  ask:
    approval: {reason: sign off, timeout: 1s, on_timeout: skip}
  after:
    needs: [ask]
    trigger: all_done
    task: step
    with: {rid: "{{ inputs.rid }}", node: after}
"""


def test_a_worker_fires_the_timeout_of_a_run_paused_in_place_and_continues_it(
        shared_url: str, fleet_of: Callable[[str], Fleet], tmp_path: Path) -> None:
    """`tether run` pauses at an approval with a 1 s timeout (it ran in place, and belongs to
    queue `default` as every run does). A worker of that queue fires the timeout once it is
    due and finishes the run: the approval is skipped, `after` runs once."""
    import subprocess
    import sys

    (tmp_path / "timed_out.yaml").write_text(TIMED_OUT)
    fleet = fleet_of(shared_url)
    ran = subprocess.run([sys.executable, "-m", "tether", "run", "timed_out.yaml", "--input",
                          "rid=t", "--tasks", "fleet_tasks", "--db", shared_url, "--quiet",
                          "--execution-id", "timed-1"], env=fleet.env, cwd=tmp_path,
                         capture_output=True, text=True, timeout=60, check=False)
    assert ran.returncode == 4, ran.stderr
    store = open_checkpointer(shared_url)
    try:
        run = store.get_run("timed-1")
        assert run is not None and run.queue == "default"
        fleet.start(1)
        wait_for(lambda: (r := store.get_run("timed-1")) is not None
                 and r.status == "completed", 60, "the worker to fire the timeout")
        assert fleet.lines(fleet.effects) == {"t after": 1}
        assert [d.resolver for d in store.decisions("timed-1")] == ["timeout"]
        run = store.get_run("timed-1")
        assert run is not None and run.queue == "default"
    finally:
        store.close()
