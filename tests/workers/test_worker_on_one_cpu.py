"""``tether worker --cpu N`` confines every thread of the worker to CPU N (Linux): its
slots then hand the interpreter lock over on one core (docs/workers.md, "One CPU per
worker"). A real worker process: every thread it runs is allowed only that CPU
(``/proc/<pid>/task/*/status``), and it drains its runs; a CPU it may not use is refused
with exit 2 and a message, no traceback.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import chain_workflow
from tether.runtime.plans import load_plan
from tether.runtime.runner import Runner
from tether.stores.open import open_checkpointer

pytestmark = pytest.mark.skipif(not hasattr(os, "sched_setaffinity"),
                                reason="CPU affinity is Linux's (os.sched_setaffinity)")

TASKS = "import tether\n\n\n@tether.task\ndef step(rid, node, x=0):\n    return x + 1\n"


def _allowed(pid: int) -> dict[int, str]:
    """Each thread of ``pid``: the CPUs it may run on (``Cpus_allowed_list``)."""
    found = {}
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            text = Path(f"/proc/{pid}/task/{task}/status").read_text()
        except OSError:
            continue  # the thread ended meanwhile
        for line in text.splitlines():
            if line.startswith("Cpus_allowed_list:"):
                found[int(task)] = line.split(":", 1)[1].strip()
    return found


def test_a_worker_given_a_cpu_runs_every_thread_there_and_drains_its_runs(
        tmp_path: Path) -> None:
    cpu = max(os.sched_getaffinity(0))
    (tmp_path / "cpu_tasks.py").write_text(TASKS, encoding="utf-8")
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    store = open_checkpointer(url)
    try:
        runner = Runner(load_plan(str(chain_workflow(tmp_path, 3))), store)
        runs = [runner.submit({"rid": f"r{i}"}) for i in range(4)]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            [str(tmp_path), os.environ.get("PYTHONPATH", "")])}
        worker = subprocess.Popen(
            [sys.executable, "-m", "tether", "worker", "--tasks", "cpu_tasks", "--db", url,
             "--poll", "0.05", "--concurrency", "2", "--cpu", str(cpu)],
            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        seen: dict[int, str] = {}
        try:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                seen.update(_allowed(worker.pid))
                done = [store.get_run(eid) for eid in runs]
                if all(run is not None and run.status == "completed" for run in done):
                    break
                assert worker.poll() is None, worker.communicate()
                time.sleep(0.05)
            seen.update(_allowed(worker.pid))
        finally:
            worker.send_signal(signal.SIGTERM)
            _, err = worker.communicate(timeout=60)
        assert worker.returncode == 0, err
        for eid in runs:
            run = store.get_run(eid)
            assert run is not None and run.status == "completed", err
        assert len(seen) > 1, seen  # the worker's loop and more threads were looked at
        assert set(seen.values()) == {str(cpu)}, seen
    finally:
        store.close()


def test_a_cpu_the_worker_may_not_use_is_refused(tmp_path: Path) -> None:
    allowed = sorted(os.sched_getaffinity(0))
    outside = max(allowed) + 1000
    done = subprocess.run(
        [sys.executable, "-m", "tether", "worker", "--db", f"sqlite:///{tmp_path / 'x.db'}",
         "--cpu", str(outside)], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done
    assert "--cpu" in done.stderr and f"not {outside}" in done.stderr, done.stderr
    assert ", ".join(map(str, allowed)) in done.stderr
    assert "Traceback" not in done.stderr
