"""Schedules declared in a workflow file are put into effect by the workers that load it
(``tether worker --workflows FILE``), as by ``tether deploy``: exactly one schedule however
many workers start at once (real processes racing, on SQLite and PostgreSQL, and 16 threads
at a barrier), updated when the file's schedule changes, the ticks already handled kept."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tether.compiler.compile import compile
from tether.stores.open import open_checkpointer
from tether.workers.schedules import declare_schedule

SRC = str(Path(__file__).resolve().parents[2] / "src")
WORKERS = 4
RACERS = 16

FILE = """\
tether: 1
name: nightly
inputs:
  region: {{type: string, default: eu}}
on:
  schedule: {{cron: "{cron}", timezone: Europe/Paris, inputs: {{region: eu}}}}
nodes:
  report: {{task: reports.build, with: {{region: "{{{{ inputs.region }}}}"}}}}
"""


def start_worker(tmp_path: Path, url: str, *extra: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": SRC}
    return subprocess.Popen(
        [sys.executable, "-m", "tether", "worker", "--db", url, "--workflows",
         str(tmp_path / "flows"), "--poll", "0.5", *extra],
        cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True)


def schedule_said(process: subprocess.Popen[str]) -> str:
    """The worker's line about the schedule (it prints it before serving)."""
    assert process.stderr is not None
    seen = []
    for line in process.stderr:
        seen.append(line)
        if "schedule nightly" in line:
            return line.strip()
    raise AssertionError("the worker exited without a word on the schedule: " + "".join(seen))


def stop(processes: list[subprocess.Popen[str]]) -> None:
    for process in processes:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    for process in processes:
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def write(tmp_path: Path, cron: str) -> None:
    flows = tmp_path / "flows"
    flows.mkdir(exist_ok=True)
    (flows / "nightly.yaml").write_text(FILE.format(cron=cron), encoding="utf-8")


def test_workers_starting_at_once_register_one_schedule_and_update_it(
        tmp_path: Path, shared_url: str) -> None:
    write(tmp_path, "0 3 * * *")
    workers = [start_worker(tmp_path, shared_url, "--queue", "reports")
               for _ in range(WORKERS)]
    try:
        said = [schedule_said(w) for w in workers]
    finally:
        stop(workers)
    assert any(s.startswith("worker: registered schedule nightly: 0 3 * * * "
                            "(Europe/Paris)") for s in said), said
    assert all(s.split()[1] in ("registered", "unchanged") for s in said), said
    store = open_checkpointer(shared_url)
    try:
        [first] = store.list_schedules()
        assert (first.name, first.cron, first.timezone, first.inputs, first.queue) == (
            "nightly", "0 3 * * *", "Europe/Paris", {"region": "eu"}, "reports")
        plan = compile(tmp_path / "flows" / "nightly.yaml")
        assert first.plan_fingerprint == plan.fingerprint
        write(tmp_path, "30 4 * * *")  # the file changes: the next worker updates it
        again = start_worker(tmp_path, shared_url)
        try:
            assert schedule_said(again).startswith("worker: updated schedule nightly: "
                                                   "30 4 * * *")
        finally:
            stop([again])
        [updated] = store.list_schedules()
        assert (updated.cron, updated.queue, updated.last_tick) == (
            "30 4 * * *", "reports", first.last_tick)
        assert updated.plan_fingerprint != first.plan_fingerprint
    finally:
        store.close()


def test_sixteen_declarations_at_a_barrier_make_one_schedule(
        tmp_path: Path, shared_url: str) -> None:
    write(tmp_path, "0 3 * * *")
    plan = compile(tmp_path / "flows" / "nightly.yaml")
    barrier = threading.Barrier(RACERS)
    changes: list[str] = []
    lock = threading.Lock()

    def declare() -> None:
        store = open_checkpointer(shared_url)
        try:
            barrier.wait(60)
            change = declare_schedule(store, plan, new_queue="default").change
        finally:
            store.close()
        with lock:
            changes.append(change)

    threads = [threading.Thread(target=declare) for _ in range(RACERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert len(changes) == RACERS and "registered" in changes
    assert set(changes) <= {"registered", "unchanged"}
    store = open_checkpointer(shared_url)
    try:
        [found] = store.list_schedules()
        assert found.plan_fingerprint == plan.fingerprint and found.last_tick is not None
        assert found.last_tick <= time.time()
    finally:
        store.close()


def test_a_broken_workflows_file_stops_the_worker_naming_it(tmp_path: Path) -> None:
    flows = tmp_path / "flows"
    flows.mkdir()
    (flows / "bad.yaml").write_text("tether: 1\nname: bad\nnodes: {}\n", encoding="utf-8")
    process = start_worker(tmp_path, f"sqlite:///{tmp_path / 'w.db'}")
    try:
        _, err = process.communicate(timeout=120)
    finally:
        stop([process])
    assert process.returncode == 2
    assert "--workflows" in err and "bad.yaml" in err and "Traceback" not in err


@pytest.mark.parametrize("missing", ["nope.yaml"])
def test_a_missing_path_is_exit_2(tmp_path: Path, missing: str) -> None:
    process = subprocess.run(
        [sys.executable, "-m", "tether", "worker", "--db", f"sqlite:///{tmp_path / 'w.db'}",
         "--workflows", str(tmp_path / missing)], cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": SRC}, capture_output=True, text=True, timeout=120)
    assert process.returncode == 2
    assert "neither a workflow file nor a directory" in process.stderr
