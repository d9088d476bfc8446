"""Queue limits, plan versions and stuck runs with real `tether worker` processes on SQLite
and PostgreSQL.

Task bodies append `start RID WF` and `end RID WF` lines with O_APPEND (fleet_tasks.hold):
the file's order is the order the events happened across processes, so how many bodies ran at
once is counted from the records, never from timing. Rate limits are checked on the start
times the claims recorded in the store (`runs.started_at`), as a bound on counts.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from conftest import Fleet, wait_for
from tether.runtime.runner import Runner
from tether.stores.open import open_checkpointer

HOLD = """\
tether: 1
name: {name}
inputs:
  rid: {{type: string}}
nodes:
  only:
    task: {task}
    with: {{rid: "{{{{ inputs.rid }}}}"{extra}}}
output: "{{{{ nodes.only.output }}}}"
"""


def _workflow(directory: Path, name: str, task: str = "hold") -> Path:
    path = directory / f"{name}.yaml"
    extra = f', wf: "{name}"' if task == "hold" else ""
    path.write_text(HOLD.format(name=name, task=task, extra=extra), encoding="utf-8")
    return path


def _submit(url: str, workflow: Path, rids: list[str], queue: str = "default") -> list[str]:
    store = open_checkpointer(url)
    try:
        runner = Runner(workflow, store, {})
        return [runner.submit({"rid": rid}, queue=queue) for rid in rids]
    finally:
        store.close()


def _done(url: str, ids: list[str]) -> Callable[[], bool]:
    def check() -> bool:
        store = open_checkpointer(url, create=False)
        try:
            return all((r := store.get_run(i)) is not None and r.status == "completed"
                       for i in ids)
        finally:
            store.close()
    return check


def _tether(fleet: Fleet, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tether", *args, "--db", fleet.url],
                          env=fleet.env, cwd=fleet.directory, capture_output=True, text=True,
                          timeout=60, check=False)


def _overlap(lines: list[str], key: Callable[[list[str]], str]) -> Counter[str]:
    """The most bodies running at once, per ``key`` of a record (from the records' order)."""
    now: Counter[str] = Counter()
    most: Counter[str] = Counter()
    for line in lines:
        kind, *rest = line.split()
        group = key([kind, *rest])
        now[group] += 1 if kind == "start" else -1
        most[group] = max(most[group], now[group])
    return most


def _records(fleet: Fleet) -> list[str]:
    return fleet.effects.read_text(encoding="utf-8").splitlines()


def test_concurrency_2_with_4_workers_never_runs_more_than_2_at_once(
        shared_url: str, fleet_of: Callable[[str], Fleet], tmp_path: Path) -> None:
    """16 runs, 4 workers of concurrency 4 (16 slots), queue concurrency 2: at no point of
    the records are more than 2 bodies between start and end, and the limit was reached."""
    fleet = fleet_of(shared_url)
    result = _tether(fleet, "queues", "set", "default", "--concurrency", "2")
    assert result.returncode == 0, result.stderr
    assert "concurrency 2" in result.stdout
    ids = _submit(shared_url, _workflow(tmp_path, "held"), [f"r{i}" for i in range(16)])
    fleet.start(4)
    wait_for(_done(shared_url, ids), 120, "every run to complete")
    records = _records(fleet)
    assert len(records) == 32
    assert _overlap(records, lambda _: "all")["all"] == 2
    listed = json.loads(_tether(fleet, "queues", "--json").stdout)
    assert listed == [{"name": "default", "concurrency": 2, "per_workflow": None,
                       "rate_limit": None, "rate_window": None, "start_timeout": None,
                       "queued": 0, "running": 0}]


def test_per_workflow_limit_holds_per_workflow_across_workers(
        shared_url: str, fleet_of: Callable[[str], Fleet], tmp_path: Path) -> None:
    """Two workflows, 6 runs each, per-workflow 1: never two bodies of one workflow at once,
    while the two workflows did run at the same time (the limit is per workflow)."""
    fleet = fleet_of(shared_url)
    assert _tether(fleet, "queues", "set", "default", "--per-workflow", "1").returncode == 0
    ids = _submit(shared_url, _workflow(tmp_path, "alpha"), [f"a{i}" for i in range(6)])
    ids += _submit(shared_url, _workflow(tmp_path, "beta"), [f"b{i}" for i in range(6)])
    fleet.start(4)
    wait_for(_done(shared_url, ids), 120, "every run to complete")
    records = _records(fleet)
    per = _overlap(records, lambda r: r[2])
    assert per == Counter({"alpha": 1, "beta": 1})
    assert _overlap(records, lambda _: "all")["all"] == 2


def test_rate_limit_bounds_the_starts_in_every_window(
        shared_url: str, fleet_of: Callable[[str], Fleet], tmp_path: Path) -> None:
    """--rate-limit 3/s, 4 workers, 12 runs: among the start times the claims recorded, any
    4 consecutive starts span at least a second (no window of 1 s holds more than 3)."""
    fleet = fleet_of(shared_url)
    fleet.env["TETHER_TEST_HOLD"] = "0"
    assert _tether(fleet, "queues", "set", "default", "--rate-limit", "3/s").returncode == 0
    ids = _submit(shared_url, _workflow(tmp_path, "rated"), [f"r{i}" for i in range(12)])
    fleet.start(4)
    wait_for(_done(shared_url, ids), 120, "every run to complete")
    store = open_checkpointer(shared_url, create=False)
    starts = sorted(run.started_at for i in ids
                    if (run := store.get_run(i)) is not None and run.started_at is not None)
    store.close()
    assert len(starts) == 12
    assert all(starts[i + 3] - starts[i] >= 1.0 for i in range(len(starts) - 3))


def test_a_worker_lacking_the_tasks_leaves_the_run_queued_with_the_reason(
        shared_url: str, fleet_of: Callable[[str], Fleet], tmp_path: Path) -> None:
    """A worker without `special` never claims the run (attempt stays 0): it stays queued,
    `tether runs` and `--stuck` give the reason and `tether workers` the problem; a worker
    with the task completes it on its first attempt."""
    fleet = fleet_of(shared_url)
    [eid] = _submit(shared_url, _workflow(tmp_path, "needs_special", "special"), ["s1"])
    fleet.start(1)
    store = open_checkpointer(shared_url, create=False)

    def reason() -> str | None:
        run = store.get_run(eid)
        return run.blocked_reason if run is not None else None

    wait_for(lambda: reason() is not None, 60, "the worker to record why it waits")
    run = store.get_run(eid)
    assert run is not None and (run.status, run.attempt) == ("queued", 0)
    assert "lacks tasks: special" in (run.blocked_reason or "")
    listed = _tether(fleet, "runs", "--json")
    [shown] = json.loads(listed.stdout)
    assert "lacks tasks: special" in shown["blocked_reason"]
    stuck = json.loads(_tether(fleet, "runs", "--stuck", "--json").stdout)
    assert [s["execution_id"] for s in stuck] == [eid]
    assert any("lacks tasks: special" in r for r in stuck[0]["reasons"])
    assert "1 run(s) it lacks the tasks of" in _tether(fleet, "workers").stdout
    fleet.start(1, tasks=("fleet_tasks", "extra_tasks"))
    wait_for(_done(shared_url, [eid]), 60, "the worker with the task to complete it")
    run = store.get_run(eid)
    assert run is not None and (run.attempt, run.blocked_reason) == (1, None)
    store.close()
    assert "Traceback" not in (tmp_path / "worker0.log").read_text()


def test_runs_stuck_gives_each_reason(
        shared_url: str, fleet_of: Callable[[str], Fleet], tmp_path: Path) -> None:
    """No worker at all: a run of a queue with a 1 ms start timeout is reported for both the
    timeout and the missing worker; a run whose recovery failed (retry_later, as a worker
    records it) shows that reason; a completed run is not stuck."""
    fleet = fleet_of(shared_url)
    assert _tether(fleet, "queues", "set", "lonely", "--start-timeout", "1ms").returncode == 0
    flow = _workflow(tmp_path, "waiting")
    [late] = _submit(shared_url, flow, ["w1"], queue="lonely")
    [failing] = _submit(shared_url, flow, ["w2"], queue="other")
    store = open_checkpointer(shared_url, create=False)
    now = time.time()
    [claim] = store.claim_runs("test", ["other"], 1, now, now + 30)
    assert store.retry_later(failing, claim.owner, now + 3600,
                             "recovery failed 1 time(s), next try in 1 s: boom")
    store.close()
    result = _tether(fleet, "runs", "--stuck", "--json")
    assert result.returncode == 0, result.stderr
    reasons = {s["execution_id"]: s["reasons"] for s in json.loads(result.stdout)}
    assert set(reasons) == {late, failing}
    assert any("start timeout" in r and "queue lonely" in r for r in reasons[late])
    assert "no live worker serves queue lonely" in reasons[late]
    assert "no live worker serves queue other" in reasons[failing]
    assert any(r.startswith("recovery failed 1 time(s)") for r in reasons[failing])
    table = " ".join(_tether(fleet, "runs", "--stuck").stdout.split())  # (cells wrap)
    assert "no live worker serves queue lonely" in table


def test_queues_commands_round_trip_and_refuse_bad_input(tmp_path: Path) -> None:
    """set (replacing), list, remove; a bad rate or duration is a usage error (exit 2)
    naming the option; removing an unknown queue exits 1; no tracebacks."""
    fleet = Fleet(f"sqlite:///{tmp_path / 'q.db'}", tmp_path)
    bad = _tether(fleet, "queues", "set", "q", "--rate-limit", "5/x")
    assert bad.returncode == 2 and "--rate-limit" in bad.stderr
    bad = _tether(fleet, "queues", "set", "q", "--start-timeout", "soon")
    assert bad.returncode == 2 and "--start-timeout" in bad.stderr
    assert _tether(fleet, "queues", "set", "q", "--concurrency", "3",
                   "--rate-limit", "120/m").returncode == 0
    done = _tether(fleet, "queues", "set", "q", "--per-workflow", "2", "--start-timeout", "10m")
    assert done.stdout.strip() == "queue q: per workflow 2, start timeout 600 s"
    [row] = json.loads(_tether(fleet, "queues", "--json").stdout)
    assert (row["concurrency"], row["per_workflow"], row["rate_limit"],
            row["start_timeout"]) == (None, 2, None, 600.0)
    assert _tether(fleet, "queues", "remove", "q").returncode == 0
    gone = _tether(fleet, "queues", "remove", "q")
    assert gone.returncode == 1 and "no queue q is configured" in gone.stderr
    assert _tether(fleet, "queues").stdout.strip() == "no queues"
    assert "Traceback" not in bad.stderr + gone.stderr


NAPPING = """\
tether: 1
name: napping
inputs:
  rid: {type: string}
nodes:
  nap:
    sleep: 1s
  only:
    needs: [nap]
    task: hold
    with: {rid: "{{ inputs.rid }}", wf: napping}
"""


def test_fired_timers_continue_within_the_queue_concurrency(
        shared_url: str, fleet_of: Callable[[str], Fleet], tmp_path: Path) -> None:
    """8 runs sleep 1 s, then hold a body; 3 workers of concurrency 4, queue concurrency 2.
    The timers fall due together, and each fires once, but no more than 2 bodies ever run at
    once: a fired timer's continuation is claimed like an answered approval, within the
    limit (firing it in the worker that found it due would run up to 8 at once)."""
    fleet = fleet_of(shared_url)
    assert _tether(fleet, "queues", "set", "default", "--concurrency", "2").returncode == 0
    path = tmp_path / "napping.yaml"
    path.write_text(NAPPING, encoding="utf-8")
    ids = _submit(shared_url, path, [f"n{i}" for i in range(8)])
    fleet.start(3)
    wait_for(_done(shared_url, ids), 120, "every run to complete")
    records = _records(fleet)
    assert sorted(records) == sorted([f"{kind} n{i} napping" for i in range(8)
                                      for kind in ("start", "end")])
    assert _overlap(records, lambda _: "all")["all"] == 2
    store = open_checkpointer(shared_url, create=False)
    try:
        fired = [d for i in ids for d in store.decisions(i)]
    finally:
        store.close()
    assert len(fired) == 8 and {d.resolver for d in fired} == {"timer"}
