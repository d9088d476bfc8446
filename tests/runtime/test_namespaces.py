"""Two PID namespaces with one hostname (issue 8, measured item 2), on SQLite and PostgreSQL.

Two containers on one machine share the boot id and, often, the hostname, but not the PID
namespace: a pid seen in one means nothing in the other. Each child here runs in a PID
namespace of its own (``unshare --pid --fork --mount-proc``, same UTS name, same boot id), so
both are pid 1 there. The holder's owner token names ``pid 1`` on host ``<same host>``: a
racer in the other namespace that trusted host and pid alone would find "its own" pid 1 with
another start time, conclude the holder is dead and take the run over. The dead-owner rule
(``stores/owners.py: provably_dead``) requires the same boot id *and* the same PID namespace
*and* that pid with that start time gone, so the racer must wait for the lease instead.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from harness import WORKFLOWS, checks, launch, tasks
from harness.tasks import canonical, read_effects

import tether
from tether import Runner, open_checkpointer

APPROVAL = tether.compile(WORKFLOWS / "approval.yaml")
ANSWER = {"approved": True, "by": "namespace"}
UNSHARE = ["unshare", "--pid", "--fork", "--kill-child", "--mount-proc"]


def _probe() -> str | None:
    """Why PID namespaces cannot be used here (None when they can)."""
    if shutil.which("unshare") is None:
        return "the unshare command is not installed"
    try:
        done = subprocess.run([*UNSHARE, "sh", "-c", "echo $$; readlink /proc/self/ns/pid"],
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unshare failed: {exc}"
    if done.returncode != 0:
        return f"the kernel refuses a new PID namespace: {done.stderr.strip()}"
    return None


pytestmark = pytest.mark.skipif(_probe() is not None, reason=str(_probe()))


def _namespace(job: dict[str, Any], folder: Path) -> tuple[subprocess.Popen[str], Path]:
    """Start ``python -m harness.child JOB`` as pid 1 of a new PID namespace; it prints
    ``{"ready": pid}`` and waits for its start time on stdin (a barrier)."""
    job, result = launch._job_files({**job, "barrier": True}, folder)
    process = subprocess.Popen([*UNSHARE, sys.executable, "-m", "harness.child",
                                json.dumps(job)], env=launch.child_env(),
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    assert process.stdout is not None
    ready = process.stdout.readline()
    assert json.loads(ready or "{}").get("ready") == 1, (ready, process.communicate())
    return process, result


def _go(*processes: subprocess.Popen[str], delay: float = 0.2) -> None:
    go = json.dumps({"start_at": time.time() + delay}) + "\n"
    for process in processes:
        assert process.stdin is not None
        process.stdin.write(go)
        process.stdin.flush()


def _paused(url: str) -> str:
    store = open_checkpointer(url)
    try:
        paused = Runner(APPROVAL, store, tasks.TASKS).run({"subject": "ns"})
    finally:
        store.close()
    assert paused.status == "paused", paused
    return paused.execution_id


def _wait_lease_expired(url: str, execution_id: str) -> None:
    store = open_checkpointer(url)
    try:
        deadline = time.monotonic() + 60
        while True:
            run = store.get_run(execution_id)
            assert run is not None and run.lease_until is not None, run
            if run.lease_until < time.time() - 0.2:
                return
            assert time.monotonic() < deadline, f"the lease never expired: {run}"
            time.sleep(0.1)
    finally:
        store.close()


def test_the_probe_sees_two_pid_namespaces_sharing_one_hostname() -> None:
    """The premise: in a new PID namespace the child is pid 1, with another namespace id, the
    same hostname and the same boot id."""
    script = ("import os, socket; print(os.getpid(), os.readlink('/proc/self/ns/pid'), "
              "socket.gethostname(), open('/proc/sys/kernel/random/boot_id').read().strip())")
    inside = subprocess.run([*UNSHARE, sys.executable, "-c", script], capture_output=True,
                            text=True, timeout=60, check=True).stdout.split()
    outside = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                             timeout=60, check=True).stdout.split()
    assert inside[0] == "1" and inside[1] != outside[1], (inside, outside)
    assert inside[2:] == outside[2:], (inside, outside)


@pytest.mark.slow
def test_two_pid_namespaces_race_to_resume_one_paused_run_exactly_one_wins(
        shared_url: str, tmp_path: Path) -> None:
    """Two children, each pid 1 of its own PID namespace (one hostname), resume one paused run
    at the same instant, 2 trials: one completes, the other gets AlreadyResumed; the code
    after interrupt() ran once, one run_end."""
    effects = tmp_path / "effects.jsonl"
    for trial in range(2):
        eid = _paused(shared_url)
        job = {"url": shared_url, "action": "resume", "execution_id": eid, "value": ANSWER,
               "effects": str(effects)}
        started = [_namespace(job, tmp_path) for _ in range(2)]
        _go(*(process for process, _ in started))
        exits = [launch.finish(process, result) for process, result in started]
        answers = [done.result for done in exits]
        assert all(a is not None for a in answers), [done.describe() for done in exits]
        outcomes = Counter(a["outcome"] if a["outcome"] != "error" else a["error_type"]
                           for a in answers if a is not None)
        assert outcomes == {"completed": 1, "AlreadyResumed": 1}, (trial, answers)
        ran = checks.executions(read_effects(effects), eid=eid)
        assert sorted(task for task, _ in ran.elements()) == ["h.apply", "h.ask"], ran
        store = open_checkpointer(shared_url)
        try:
            assert checks.run_ends(store, eid) == ["completed"], checks.describe(store, eid)
        finally:
            store.close()


@pytest.mark.parametrize("paused", [False, True], ids=["crashed-run", "paused-run"])
def test_a_live_holder_in_another_pid_namespace_is_never_taken_for_dead(
        shared_url: str, tmp_path: Path, paused: bool) -> None:
    """A holder (pid 1 of its namespace, lease 300 s) is blocked inside a node; a second
    process, pid 1 of another namespace with the same hostname and boot id, resumes the run:
    AlreadyResumed, not a take-over. Released, the holder completes the run; every node
    executed once, one run_end."""
    effects, gate = tmp_path / "effects.jsonl", tmp_path / "gate"
    if paused:
        eid, value, spec = _paused(shared_url), ANSWER, "block:ask"
    else:  # a run killed before its first checkpoint, recovered without a value. Its owner
        # was in the root namespace: dead, but not provably so from another namespace, so the
        # holder may take the run only once that owner's lease (1 s) expired.
        plan_file = launch.compile_to("approval.yaml", tmp_path / "plans")[1]
        eid, value, spec = str(uuid.uuid4()), None, "block:prepare"
        crashed = launch.run_fresh({"url": shared_url, "action": "run", "plan": plan_file,
                                    "execution_id": eid, "crash": "before:prepare",
                                    "lease_seconds": 1}, tmp_path)
        assert crashed.killed, crashed.describe()
        _wait_lease_expired(shared_url, eid)
    job = {"url": shared_url, "action": "resume", "execution_id": eid, "value": value,
           "effects": str(effects), "lease_seconds": 300}
    holder, holder_result = _namespace({**job, "crash": spec, "gate": str(gate)}, tmp_path)
    try:
        _go(holder)
        deadline = time.monotonic() + 60
        while not (gate / "blocked").exists():
            assert holder.poll() is None, holder.communicate()
            assert time.monotonic() < deadline, "the holder never reached its node"
            time.sleep(0.05)
        racer, racer_result = _namespace(job, tmp_path)
        _go(racer)
        second = launch.finish(racer, racer_result)
        assert second.result is not None, second.describe()
        assert second.result.get("error_type") == "AlreadyResumed", second.result
        assert "pid 1 on host" in second.result["message"], second.result
        (gate / "release").write_text("")
        done = launch.finish(holder, holder_result)
    finally:
        if holder.poll() is None:  # a failure above: end the holder (--kill-child: its child)
            holder.kill()
            holder.communicate()
    assert done.result is not None, done.describe()
    assert done.result["outcome"] == ("completed" if paused else "paused"), done.result
    ran = checks.executions(read_effects(effects), eid=eid)
    expected = {("h.ask", canonical({"subject": "ns", "answer": ANSWER})): 1,
                ("h.apply", canonical({"decision": {"subject": "ns", **ANSWER}})): 1} \
        if paused else {("h.step", canonical({"name": "prepare"})): 1}
    assert ran == expected, ran
    store = open_checkpointer(shared_url)
    try:
        assert checks.run_ends(store, eid) == (["completed"] if paused else []), \
            checks.describe(store, eid)
    finally:
        store.close()
