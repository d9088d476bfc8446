"""Schedules fire exactly one run per tick: concurrent processes, catch-up, restarts, DST, CLI.

Every firing is given its ``now`` explicitly: nothing waits for the wall clock.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tether.compiler.compile import compile
from tether.compiler.plan import Plan
from tether.errors import ExecutionExists
from tether.runtime.runner import Runner
from tether.stores.base import Checkpointer
from tether.stores.open import open_checkpointer
from tether.stores.schedule_records import ScheduleRecord
from tether.trigger import Trigger
from tether.workers.schedules import (
    MAX_TICKS_PER_CALL,
    fire_schedules,
    tick_execution_id,
    tick_trigger,
)

CHILD = Path(__file__).with_name("schedule_child.py")
WORKFLOW = """\
tether: 1
name: nightly
inputs:
  region: {{type: string, enum: [eu, us]}}
schedule:
  cron: "{cron}"
  timezone: {timezone}
  catchup: {catchup}
  inputs: {{region: eu}}
nodes:
  report:
    task: reports.build
    with: {{region: "{{{{ inputs.region }}}}", run_id: "{{{{ run.id }}}}"}}
"""


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def plan_of(tmp_path: Path, cron: str = "0 3 * * *", timezone: str = "Europe/Paris",
            catchup: str = "latest") -> Plan:
    path = tmp_path / "nightly.yaml"
    path.write_text(WORKFLOW.format(cron=cron, timezone=timezone, catchup=catchup))
    return compile(path)


def register(store: Checkpointer, plan: Plan, last_tick: datetime) -> None:
    spec = plan.schedule
    assert spec is not None
    store.put_schedule(ScheduleRecord(
        name=plan.name, plan_fingerprint=plan.fingerprint, cron=spec.cron,
        timezone=spec.timezone, catchup=spec.catchup, inputs=spec.inputs,
        created_at=last_tick.timestamp(), updated_at=last_tick.timestamp(),
        last_tick=last_tick.timestamp()), plan.to_json())


class InPlace:
    """A submit that runs each run in this process and records the task's calls."""

    def __init__(self, store: Checkpointer) -> None:
        self.store = store
        self.calls: list[str] = []

    def build(self, region: str, run_id: str) -> str:
        self.calls.append(run_id)
        return region

    def __call__(self, plan: Plan, inputs: dict[str, Any], execution_id: str,
                 queue: str | None, trigger: Trigger) -> None:
        Runner(plan, self.store, {"reports.build": self.build}).run(
            inputs, execution_id=execution_id, trigger=trigger)


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[Checkpointer]:
    store = open_checkpointer(f"sqlite:///{tmp_path / 'tether.db'}")
    yield store
    store.close()


# -- catch-up policies ------------------------------------------------------------------------

@pytest.mark.parametrize(("catchup", "expected"), [
    ("none", []),
    ("latest", ["nightly@2024-01-05T02:00:00Z"]),
    ("all", [f"nightly@2024-01-0{d}T02:00:00Z" for d in range(1, 6)]),
])
def test_catchup_policies_after_an_outage(tmp_path: Path, sqlite_store: Checkpointer,
                                          catchup: str, expected: list[str]) -> None:
    """Five daily ticks missed (03:00 Paris = 02:00Z in winter): none skips them, latest
    fires the newest, all fires each; last_tick moves past all five either way."""
    register(sqlite_store, plan_of(tmp_path, catchup=catchup), utc("2024-01-01T00:00:00"))
    submit = InPlace(sqlite_store)
    now = utc("2024-01-05T12:00:00")
    assert fire_schedules(sqlite_store, now, submit) == expected
    assert submit.calls == expected
    for execution_id in expected:
        run = sqlite_store.get_run(execution_id)
        assert run is not None and run.status == "completed" and run.inputs == {"region": "eu"}
        assert run.trigger is not None  # the tick's run knows what started it
        assert (run.trigger.kind, run.trigger.actor) == ("schedule", "schedule:nightly")
        assert run.trigger.tick == execution_id.partition("@")[2]
    found = sqlite_store.get_schedule("nightly")
    assert found is not None
    assert found.last_tick == utc("2024-01-05T02:00:00").timestamp()
    assert found.next_tick == utc("2024-01-06T02:00:00").timestamp()
    assert fire_schedules(sqlite_store, now, submit) == []  # handled: nothing fires again


def test_catchup_none_still_fires_a_tick_that_is_on_time(tmp_path: Path,
                                                         sqlite_store: Checkpointer) -> None:
    """`none` skips missed ticks, not the current one: a tick due seconds ago fires."""
    register(sqlite_store, plan_of(tmp_path, catchup="none"), utc("2024-01-04T12:00:00"))
    fired = fire_schedules(sqlite_store, utc("2024-01-05T02:00:05"), InPlace(sqlite_store))
    assert fired == ["nightly@2024-01-05T02:00:00Z"]


def test_catchup_all_is_capped_per_call(tmp_path: Path, sqlite_store: Checkpointer) -> None:
    """2,500 missed minutes with `all`: 1,000 per call, oldest first, none twice, none lost."""
    store = open_checkpointer("memory://")
    register(store, plan_of(tmp_path, cron="* * * * *", timezone="UTC", catchup="all"),
             utc("2024-01-01T00:00:00"))
    seen: list[str] = []

    def submit(plan: Plan, inputs: dict[str, Any], execution_id: str,
               queue: str | None,
               trigger: Trigger) -> None:
        seen.append(execution_id)

    now = utc("2024-01-02T17:40:00")  # 2,500 minutes later
    counts = [len(fire_schedules(store, now, submit)) for _ in range(4)]
    assert counts == [MAX_TICKS_PER_CALL, MAX_TICKS_PER_CALL, 500, 0]
    assert len(set(seen)) == 2500 and seen == sorted(seen)
    assert seen[0] == "nightly@2024-01-01T00:01:00Z" and seen[-1] == "nightly@2024-01-02T17:40:00Z"


# -- time zones and DST -----------------------------------------------------------------------

def test_dst_skipped_and_repeated_hours(tmp_path: Path) -> None:
    """Paris 02:30 daily: on 31 March 2024 02:30 does not exist, the tick fires at 03:00 local
    (01:00Z); on 27 October it happens twice, the tick fires once, at the first (00:30Z)."""
    store = open_checkpointer("memory://")
    register(store, plan_of(tmp_path, cron="30 2 * * *", catchup="all"),
             utc("2024-03-30T12:00:00"))
    fired: list[str] = []

    def submit(plan: Plan, inputs: dict[str, Any], execution_id: str,
               queue: str | None,
               trigger: Trigger) -> None:
        fired.append(execution_id)

    fire_schedules(store, utc("2024-04-01T12:00:00"), submit)
    assert fired == ["nightly@2024-03-31T01:00:00Z", "nightly@2024-04-01T00:30:00Z"]
    fired.clear()
    store.advance_schedule("nightly", utc("2024-04-01T00:30:00").timestamp(),
                           utc("2024-10-26T12:00:00").timestamp())
    fire_schedules(store, utc("2024-10-28T12:00:00"), submit)
    assert fired == ["nightly@2024-10-27T00:30:00Z", "nightly@2024-10-28T01:30:00Z"]


def test_submit_finding_the_tick_taken_counts_it_fired(tmp_path: Path,
                                                       sqlite_store: Checkpointer) -> None:
    """The run of a tick already exists (another process submitted it): no second run, and
    the schedule still advances."""
    plan = plan_of(tmp_path)
    register(sqlite_store, plan, utc("2024-01-04T12:00:00"))
    submit = InPlace(sqlite_store)
    tick = tick_trigger("nightly", utc("2024-01-05T02:00:00"))
    submit(plan, {"region": "eu"}, "nightly@2024-01-05T02:00:00Z", None, tick)
    with pytest.raises(ExecutionExists):
        submit(plan, {"region": "eu"}, "nightly@2024-01-05T02:00:00Z", None, tick)
    assert fire_schedules(sqlite_store, utc("2024-01-05T03:00:00"), submit) == []
    assert submit.calls == ["nightly@2024-01-05T02:00:00Z"]
    found = sqlite_store.get_schedule("nightly")
    assert found is not None and found.last_tick == utc("2024-01-05T02:00:00").timestamp()


def test_tick_execution_id_is_utc_iso() -> None:
    tick = datetime.fromisoformat("2024-03-31T03:00:00+02:00")
    assert tick_execution_id("nightly", tick) == "nightly@2024-03-31T01:00:00Z"


# -- real processes ---------------------------------------------------------------------------

def _child(url: str, now: datetime, effects: Path, *extra: str) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, str(CHILD), url, str(now.timestamp()), str(effects), *extra],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "ready", process.stderr
    return process


def _go(process: subprocess.Popen[str]) -> None:
    assert process.stdin is not None
    process.stdin.write("go\n")
    process.stdin.flush()


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_eight_processes_fire_one_tick_once(tmp_path: Path, backend: str,
                                            url_of: Any) -> None:
    """Eight processes fire the same due tick at the same instant (a barrier on their stdin):
    exactly one run, one task call, and the schedule advanced once."""
    url = url_of(backend)
    store = open_checkpointer(url)
    register(store, plan_of(tmp_path), utc("2024-01-04T12:00:00"))
    effects = tmp_path / "effects.txt"
    now = utc("2024-01-05T02:00:30")
    children = [_child(url, now, effects) for _ in range(8)]
    for child in children:
        _go(child)
    fired: list[str] = []
    for child in children:
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err
        fired += json.loads(out.strip().splitlines()[-1])
    tick = "nightly@2024-01-05T02:00:00Z"
    assert fired == [tick]
    assert effects.read_text().splitlines() == [tick]
    run = store.get_run(tick)
    assert run is not None and run.status == "completed"
    assert [r.execution_id for r in store.list_runs()] == [tick]
    found = store.get_schedule("nightly")
    assert found is not None and found.last_tick == utc("2024-01-05T02:00:00").timestamp()
    store.close()


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_process_killed_between_submit_and_advance(tmp_path: Path, backend: str,
                                                     url_of: Any) -> None:
    """SIGKILL after the tick's run was submitted but before the schedule advanced: the next
    process finds the run (ExecutionExists), starts none, and advances. One run for the tick."""
    url = url_of(backend)
    store = open_checkpointer(url)
    register(store, plan_of(tmp_path), utc("2024-01-04T12:00:00"))
    effects = tmp_path / "effects.txt"
    now = utc("2024-01-05T02:00:30")
    doomed = _child(url, now, effects, "kill")
    _go(doomed)
    assert doomed.stdout is not None and doomed.stdout.readline().strip() == "submitted"
    os.kill(doomed.pid, signal.SIGKILL)
    doomed.wait(timeout=60)
    found = store.get_schedule("nightly")
    assert found is not None and found.last_tick == utc("2024-01-04T12:00:00").timestamp()
    survivor = _child(url, now, effects)
    _go(survivor)
    out, err = survivor.communicate(timeout=120)
    assert survivor.returncode == 0, err
    tick = "nightly@2024-01-05T02:00:00Z"
    assert json.loads(out.strip().splitlines()[-1]) == []
    assert effects.read_text().splitlines() == [tick]
    assert [r.execution_id for r in store.list_runs()] == [tick]
    found = store.get_schedule("nightly")
    assert found is not None and found.last_tick == utc("2024-01-05T02:00:00").timestamp()
    store.close()


# -- the CLI and the two syntaxes ------------------------------------------------------------

def _tether(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tether", *args], capture_output=True,
                          text=True, timeout=120, check=False)


def test_cli_add_list_remove_round_trip(tmp_path: Path) -> None:
    """add registers (and updates, keeping last tick and queue), the list shows the next
    tick, remove removes; an unknown name and a file without a schedule are exit 1."""
    plan_of(tmp_path)
    db = f"sqlite:///{tmp_path / 'cli.db'}"
    added = _tether("schedules", "add", str(tmp_path / "nightly.yaml"), "--db", db,
                    "--queue", "reports")
    assert added.returncode == 0, added.stderr
    assert added.stdout.startswith("registered schedule nightly: 0 3 * * * (Europe/Paris)")
    listed = _tether("schedules", "--db", db, "--json")
    assert listed.returncode == 0, listed.stderr
    [entry] = json.loads(listed.stdout)
    assert (entry["name"], entry["cron"], entry["timezone"], entry["catchup"],
            entry["queue"], entry["inputs"]) == ("nightly", "0 3 * * *", "Europe/Paris",
                                                 "latest", "reports", {"region": "eu"})
    assert entry["next_tick"] > entry["last_tick"]
    plan_of(tmp_path, cron="0 4 * * *")
    again = _tether("schedules", "add", str(tmp_path / "nightly.yaml"), "--db", db)
    assert again.returncode == 0 and again.stdout.startswith("updated schedule nightly")
    [updated] = json.loads(_tether("schedules", "--db", db, "--json").stdout)
    assert (updated["cron"], updated["queue"], updated["last_tick"]) == (
        "0 4 * * *", "reports", entry["last_tick"])
    table = _tether("schedules", "--db", db)
    assert "nightly" in table.stdout and "0 4 * * *" in table.stdout
    unknown = _tether("schedules", "remove", "nope", "--db", db)
    assert unknown.returncode == 1 and "no schedule named nope" in unknown.stderr
    removed = _tether("schedules", "remove", "nightly", "--db", db)
    assert removed.returncode == 0 and removed.stdout.strip() == "removed schedule nightly"
    assert _tether("schedules", "--db", db).stdout.strip() == "no schedules"
    plain = tmp_path / "plain.yaml"
    plain.write_text("tether: 1\nname: plain\nnodes:\n  a: {noop: true}\n")
    refused = _tether("schedules", "add", str(plain), "--db", db)
    assert refused.returncode == 1 and "has no `schedule:`" in refused.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text(WORKFLOW.format(cron="0 25 * * *", timezone="UTC", catchup="all"))
    broken = _tether("schedules", "add", str(bad), "--db", db)
    assert broken.returncode == 1 and "E870" in broken.stderr
    assert "Traceback" not in broken.stderr + refused.stderr + unknown.stderr


def test_flow_and_yaml_give_one_fingerprint(tmp_path: Path) -> None:
    yaml_plan = plan_of(tmp_path, catchup="all")
    flow = tmp_path / "nightly.flow"
    flow.write_text(
        'workflow nightly\ninput region: string enum ["eu", "us"]\n'
        'schedule {cron: "0 3 * * *", timezone: "Europe/Paris", catchup: "all", '
        'inputs: {region: "eu"}}\n\n'
        "task report = reports.build(region: {{ inputs.region }}, run_id: {{ run.id }})\n")
    flow_plan = compile(flow)
    assert flow_plan.schedule == yaml_plan.schedule
    assert flow_plan.fingerprint == yaml_plan.fingerprint


def test_a_plan_without_schedule_keeps_its_json(tmp_path: Path) -> None:
    path = tmp_path / "plain.yaml"
    path.write_text("tether: 1\nname: plain\nnodes:\n  a: {noop: true}\n")
    plan = compile(path)
    assert plan.schedule is None and '"schedule"' not in plan.to_json()


def test_a_tick_id_is_a_valid_new_id_for_any_workflow_name() -> None:
    """Names outside A-Za-z0-9_- are written =XX per UTF-8 byte: the id passes the new-id
    rule and two different names never share a tick's id."""
    from tether.runtime.ids import check_execution_id

    tick = datetime(2024, 1, 5, 2, 0, tzinfo=UTC)
    assert tick_execution_id("nightly", tick) == "nightly@2024-01-05T02:00:00Z"
    names = ["daily report", "daily=20report", "a/b", "..", "caf\u00e9", "a_b"]
    ids = [tick_execution_id(name, tick) for name in names]
    assert ids[0] == "daily=20report@2024-01-05T02:00:00Z" and len(set(ids)) == len(ids)
    for execution_id in ids:
        check_execution_id(execution_id)


def test_a_tick_a_reject_key_refuses_is_skipped_and_the_schedule_moves_on(
        tmp_path: Path, sqlite_store: Checkpointer) -> None:
    """A schedule of a workflow with ``concurrency: {key: nightly, on_conflict: reject}``:
    while the previous tick's run is still queued, the next tick is refused by the key; it
    starts no run, the schedule advances past it, and the other tick's run is untouched."""
    path = tmp_path / "nightly.yaml"
    path.write_text(WORKFLOW.format(cron="0 3 * * *", timezone="UTC", catchup="all")
                    .replace("nodes:", "concurrency: {key: nightly, on_conflict: reject}\n"
                             "nodes:"), encoding="utf-8")
    plan = compile(path)
    register(sqlite_store, plan, utc("2024-01-01T00:00:00"))

    def submit(plan: Plan, inputs: dict[str, Any], execution_id: str,
               queue: str | None, trigger: Trigger) -> None:
        Runner(plan, sqlite_store).submit(inputs, execution_id=execution_id, trigger=trigger)

    fired = fire_schedules(sqlite_store, utc("2024-01-02T12:00:00"), submit)
    assert fired == ["nightly@2024-01-01T03:00:00Z"]
    assert sqlite_store.get_run("nightly@2024-01-02T03:00:00Z") is None
    schedule = sqlite_store.get_schedule("nightly")
    assert schedule is not None and schedule.last_tick == utc("2024-01-02T03:00:00").timestamp()
