"""Durable timers with real processes on SQLite and PostgreSQL: a ``sleep`` node in place,
a SIGKILL while sleeping then ``tether resume`` after the due time (fires once, the due time
is the one first recorded), eight processes firing the same timer at one instant (one
continuation), approval timeouts (fail, skip, an answer; a late human answer refused) and a
branch that keeps running while another sleeps. Steps are ordered by rows in the store and
files, never by sleeping."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tether import open_checkpointer
from tether.errors import AlreadyResumed, ResumeError
from tether.runtime.runner import Runner
from tether.runtime.timers import fire_due
from tether.stores.base import Checkpointer

TASKS = '''
import os, pathlib, time
import tether

@tether.task
def mark(name: str) -> str:
    with open(os.environ["TIMER_EFFECTS"], "a") as f:
        f.write(name + "\\n")
    return name

@tether.task
def wait_for_timer(db: str) -> str:
    # the other branch: finishes only once the sleep's timer row exists (it slept durably)
    store = tether.open_checkpointer(db)
    while not store.list_pending():
        time.sleep(0.01)
    store.close()
    return "ran while the other branch slept"
'''

SLEEPY = """
tether: 1
name: sleepy
nodes:
  nap:
    sleep: {duration}
  after:
    task: timer_tasks.mark
    with: {{name: after}}
    needs: [nap]
"""


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "timer_tasks.py").write_text(TASKS)
    values = dict(os.environ)
    values["PYTHONPATH"] = f"{tmp_path}{os.pathsep}{values.get('PYTHONPATH', '')}"
    values["TIMER_EFFECTS"] = str(tmp_path / "effects.txt")
    return values


def _tether(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tether", *args], env=env, text=True,
                          capture_output=True, timeout=120, check=False)


def _effects(env: dict[str, str]) -> list[str]:
    path = Path(env["TIMER_EFFECTS"])
    return path.read_text().split() if path.exists() else []


def _wait_for(condition: object, what: str) -> None:
    deadline = time.monotonic() + 60
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def _workflow(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "wf.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def _store(url: str) -> Checkpointer:
    return open_checkpointer(url)


def test_a_sleep_node_completes_after_its_duration_in_place(
        shared_url: str, tmp_path: Path, env: dict[str, str]) -> None:
    wf = _workflow(tmp_path, SLEEPY.format(duration="1s"))
    done = _tether(env, "run", str(wf), "--db", shared_url, "--tasks", "timer_tasks")
    assert done.returncode == 0, done.stderr
    assert _effects(env) == ["after"]
    with _store(shared_url) as store:
        run = store.list_runs()[0]
        assert run.status == "completed"
        assert [d.resolver for d in store.decisions(run.execution_id)] == ["timer"]
        assert store.list_pending() == []


def test_kill_while_sleeping_then_resume_after_due_fires_once(
        shared_url: str, tmp_path: Path, env: dict[str, str]) -> None:
    wf = _workflow(tmp_path, SLEEPY.format(duration="2s"))
    child = subprocess.Popen([sys.executable, "-m", "tether", "run", str(wf), "--db",
                              shared_url, "--tasks", "timer_tasks"], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    store = _store(shared_url)
    try:
        _wait_for(lambda: store.list_pending(), "the sleep recorded its timer")
        row = store.list_pending()[0]
        child.send_signal(signal.SIGKILL)
        child.wait()
        assert row.due_at is not None
        # in place, before or after the due time: it waits only what is left of the time
        # first recorded, and fires once
        done = _tether(env, "resume", row.execution_id, "--db", shared_url,
                       "--tasks", "timer_tasks")
        assert done.returncode == 0, done.stderr
        assert _effects(env) == ["after"]
        decisions = store.decisions(row.execution_id)
        assert [d.resolver for d in decisions] == ["timer"]
        checkpoint = store.get_last(row.execution_id)
        assert checkpoint is not None
        nap = checkpoint.state_snapshot["nodes"]["nap"]
        assert nap["status"] == "completed"
        assert nap["output"]["due_at"] == row.due.isoformat(timespec="milliseconds")  # type: ignore[union-attr]
        again = _tether(env, "resume", row.execution_id, "--db", shared_url,
                        "--tasks", "timer_tasks")
        assert again.returncode != 0 and _effects(env) == ["after"]
    finally:
        store.close()


FIRE = '''
import os, sys, time
from pathlib import Path
import tether
from tether.runtime.runner import Runner
from tether.runtime.timers import fire_due
import timer_tasks  # registers the tasks
url, barrier, me = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
Path(barrier, me).touch()
while not Path(barrier, "go").exists():
    pass
store = tether.open_checkpointer(url)
results = fire_due(store, lambda s: Runner(checkpointer=s, park_timers=True))
print(len(results))
store.close()
'''


def test_eight_processes_firing_at_once_fire_the_timer_once(
        shared_url: str, tmp_path: Path, env: dict[str, str]) -> None:
    wf = _workflow(tmp_path, SLEEPY.format(duration="1s"))
    import importlib
    sys.path.insert(0, str(tmp_path))
    os.environ["TIMER_EFFECTS"] = env["TIMER_EFFECTS"]
    try:
        from tether.runtime.registry import REGISTRY

        if "timer_tasks.mark" not in REGISTRY:  # once per process: the backends share it
            importlib.import_module("timer_tasks")
        store = _store(shared_url)
        paused = Runner(str(wf), store, park_timers=True).run()
        assert paused.status == "paused"
        row = store.list_pending()[0]
        assert row.due_at is not None
        _wait_for(lambda: time.time() >= row.due_at, "the timer is due")  # type: ignore[operator]
        script = tmp_path / "fire.py"
        script.write_text(FIRE)
        barrier = tmp_path / "barrier"
        barrier.mkdir()
        children = [subprocess.Popen([sys.executable, str(script), shared_url, str(barrier),
                                      str(i)], env=env, text=True, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE) for i in range(8)]
        _wait_for(lambda: len(list(barrier.iterdir())) == 8, "all eight are ready")
        (barrier / "go").touch()
        outputs = [child.communicate(timeout=120) for child in children]
        assert all(child.returncode == 0 for child in children), outputs
        assert sorted(int(out) for out, _ in outputs) == [0] * 7 + [1]
        assert _effects(env) == ["after"]
        assert [d.resolver for d in store.decisions(row.execution_id)] == ["timer"]
        assert store.get_run(row.execution_id).status == "completed"  # type: ignore[union-attr]
        store.close()
    finally:
        sys.path.remove(str(tmp_path))


APPROVAL = """
tether: 1
name: gated
nodes:
  review:
    approval:
      reason: ship it?
      form: {{approved: {{type: boolean}}}}
      timeout: 1s
      on_timeout: {on_timeout}
  ship:
    noop: true
    needs: [review]
    trigger: {trigger}
"""


@pytest.mark.parametrize(("on_timeout", "trigger", "run_status", "review", "ship"), [
    ("fail", "all_success", "failed", "failed", "upstream_failed"),
    ("skip", "all_done", "completed", "skipped", "completed"),
    ("{approved: false}", "all_success", "completed", "completed", "completed"),
])
def test_an_approval_times_out_with_its_on_timeout(
        shared_url: str, tmp_path: Path, on_timeout: str, trigger: str, run_status: str,
        review: str, ship: str) -> None:
    wf = _workflow(tmp_path, APPROVAL.format(on_timeout=on_timeout, trigger=trigger))
    with _store(shared_url) as store:
        paused = Runner(str(wf), store).run()
        assert paused.status == "paused"
        row = store.list_pending()[0]
        assert row.due_at is not None
        _wait_for(lambda: time.time() >= row.due_at, "the deadline passed")  # type: ignore[operator]
        with pytest.raises(ResumeError, match="timed out at"):
            Runner(checkpointer=store).resume(row.execution_id, {"approved": True})
        results = fire_due(store)
        assert [r.status for r in results] == [run_status]
        nodes = results[0].state["nodes"]
        assert (nodes["review"]["status"], nodes["ship"]["status"]) == (review, ship)
        if on_timeout == "fail":
            assert nodes["review"]["error"]["message"] == "approval 'review' timed out after 1s"
        if review == "completed":
            assert nodes["review"]["output"] == {"approved": False}
        assert [d.resolver for d in store.decisions(row.execution_id)] == ["timeout"]
        assert fire_due(store) == []


def test_a_branch_keeps_running_while_another_sleeps(
        shared_url: str, tmp_path: Path, env: dict[str, str]) -> None:
    wf = _workflow(tmp_path, f"""
        tether: 1
        name: branches
        nodes:
          nap: {{sleep: 1s}}
          other:
            task: timer_tasks.wait_for_timer
            with: {{db: "{shared_url}"}}
          after:
            task: timer_tasks.mark
            with: {{name: after}}
            needs: [nap, other]
        """)
    done = _tether(env, "run", str(wf), "--db", shared_url, "--tasks", "timer_tasks")
    assert done.returncode == 0, done.stderr
    assert _effects(env) == ["after"]


def test_resume_of_a_parked_run_before_its_timer_is_due_says_when(
        shared_url: str, tmp_path: Path, env: dict[str, str]) -> None:
    wf = _workflow(tmp_path, SLEEPY.replace("task: timer_tasks.mark\n    with: {{name: after}}",
                                            "noop: true").format(duration="1h"))
    with _store(shared_url) as store:
        assert Runner(str(wf), store, park_timers=True).run().status == "paused"
        row = store.list_pending()[0]
        early = _tether(env, "resume", row.execution_id, "--db", shared_url)
        assert early.returncode == 4, early.stderr
        assert f"due at {row.due.isoformat(timespec='seconds')}" in early.stderr  # type: ignore[union-attr]
        assert store.list_pending() == [row]
        assert fire_due(store) == []


@pytest.mark.parametrize(("on_timeout", "trigger", "run_status"), [
    ("fail", "all_success", "failed"),
    ("skip", "all_done", "completed"),
    ("{approved: false}", "all_success", "completed"),
])
def test_after_a_timeout_no_channel_answers_the_approval(
        shared_url: str, tmp_path: Path, env: dict[str, str], on_timeout: str, trigger: str,
        run_status: str) -> None:
    """The attack: the deadline passed and on_timeout applied (here by `tether resume ID`
    without a value); then `tether resume ID --value '{"approved": true}'`,
    Runner.resume and Runner.answer(...).record() are refused naming the run, the node and
    the moment; `tether resume ID` again never completes the approval."""
    wf = _workflow(tmp_path, APPROVAL.format(on_timeout=on_timeout, trigger=trigger))
    with _store(shared_url) as store:
        paused = Runner(str(wf), store).run()
        eid = paused.execution_id
        row = store.list_pending()[0]
        _wait_for(lambda: time.time() >= row.due_at, "the deadline passed")  # type: ignore[operator]
    first = _tether(env, "resume", eid, "--db", shared_url, "-q")
    assert first.returncode == (1 if run_status == "failed" else 0), first.stderr
    with _store(shared_url) as store:
        before = [(c.checkpoint_id, c.status) for c in store.rows(eid)]
        for attempt in (lambda: Runner(checkpointer=store).resume(eid, {"approved": True}),
                        lambda: Runner(checkpointer=store).answer(
                            eid, {"approved": True}).record()):
            with pytest.raises((ResumeError, AlreadyResumed),
                               match=r"approval 'review' timed out at \d{4}-\d\d-\d\dT[0-9:]+"
                               r"\+00:00; an answer after its deadline is refused") as raised:
                attempt()
            assert raised.value.execution_id == eid
            assert isinstance(raised.value, AlreadyResumed if run_status == "completed"
                              else ResumeError)
    late = _tether(env, "resume", eid, "--db", shared_url, "-q", "--value",
                   '{"approved": true}')
    assert late.returncode not in (0, 3), late.stdout
    assert f"run {eid}" in late.stderr and "approval 'review' timed out at " in late.stderr
    assert "Traceback" not in late.stderr
    again = _tether(env, "resume", eid, "--db", shared_url, "-q")
    assert again.returncode != 0
    with _store(shared_url) as store:
        run = store.get_run(eid)
        assert run is not None and run.status == run_status
        decisions = store.decisions(eid)
        assert [d.resolver for d in decisions] == ["timeout"]
        assert all(d.value != {"approved": True} for d in decisions)
        after = [(c.checkpoint_id, c.status) for c in store.rows(eid)]
        if run_status == "completed":
            assert after == before  # nothing written by any refused answer
        else:
            assert "completed" not in [s for _, s in after[len(before):]]
