"""The run's history, proven with real processes on SQLite and PostgreSQL (``tether run``,
``tether resume``, ``tether show --json``, SIGKILL): retried attempts, abandoned attempts,
skip reasons, and a text timeline that says so."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

TASKS = '''
import os
import time
from tether import task


@task("hist.flaky")
def flaky(marker: str) -> dict:
    tries = int(open(marker).read()) if os.path.exists(marker) else 0
    with open(marker, "w") as handle:
        handle.write(str(tries + 1))
    if tries < 2:
        raise ValueError(f"try {tries + 1} failed")
    return {"ok": tries + 1}


@task("hist.slow")
def slow(flag: str, seconds: float) -> dict:
    if not os.path.exists(flag):  # the first process: say so, then sleep to be killed
        with open(flag, "w") as handle:
            handle.write(str(os.getpid()))
        time.sleep(seconds)
    return {"slept": True}


@task("hist.boom")
def boom() -> dict:
    raise RuntimeError("boom")
'''

RETRIED = """
tether: 1
name: retried
inputs:
  marker: {type: string}
nodes:
  flaky:
    task: hist.flaky
    idempotent: false
    retry: {max_attempts: 3, backoff: 20ms}
    with: {marker: "{{ inputs.marker }}"}
"""

KILLED = """
tether: 1
name: killed
inputs:
  flag: {type: string}
nodes:
  first:
    noop: true
  slow:
    needs: [first]
    task: hist.slow
    with: {flag: "{{ inputs.flag }}", seconds: 600}
  last:
    needs: [slow]
    noop: true
"""

SKIPS = """
tether: 1
name: skips
inputs:
  go: {type: boolean, default: false}
nodes:
  bad:
    task: hist.boom
  after_bad:
    needs: [bad]
    noop: true
  guarded:
    when: "{{ inputs.go }}"
    noop: true
  after_guarded:
    needs: [guarded]
    noop: true
  always:
    needs: [guarded]
    trigger: all_done
    noop: true
"""

GATED = """
tether: 1
name: gated
nodes:
  review:
    approval: {reason: ship it}
  after:
    needs: [review]
    noop: true
"""

TIMED = """
tether: 1
name: timed
nodes:
  review:
    approval: {reason: ship it, timeout: 1s, on_timeout: skip}
  after:
    needs: [review]
    trigger: all_done
    noop: true
"""

DEADLINE = 120.0


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "hist_tasks.py").write_text(TASKS)
    for name, text in (("retried", RETRIED), ("killed", KILLED), ("skips", SKIPS),
                       ("gated", GATED), ("timed", TIMED)):
        (tmp_path / f"{name}.yaml").write_text(text)
    return tmp_path


def tether(project: Path, url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tether", *args, "--db", url], cwd=project,
                          capture_output=True, text=True, timeout=DEADLINE, check=False,
                          env=dict(os.environ))


def start(project: Path, url: str, workflow: str, *inputs: str) -> str:
    ran = tether(project, url, "run", f"{workflow}.yaml", "--tasks", "hist_tasks.py", "-q",
                 "--json", *[a for i in inputs for a in ("-i", i)])
    assert ran.stdout, ran.stderr
    execution_id: str = json.loads(ran.stdout)["execution_id"]
    return execution_id


def history(project: Path, url: str, execution_id: str) -> dict[str, Any]:
    shown = tether(project, url, "show", execution_id, "--json")
    assert shown.returncode == 0, shown.stderr
    found: dict[str, Any] = json.loads(shown.stdout)
    return found


def of_node(found: dict[str, Any], node: str) -> list[tuple[str, int | None]]:
    return [(e["kind"], e["attempt"]) for e in found["events"] if e["node"] == node]


def test_a_task_failing_twice_then_succeeding_shows_three_attempts(
        project: Path, shared_url: str) -> None:
    """Two failed attempts, each with its error and the backoff before the next, then the
    completed third with its duration; the node's view counts three attempts."""
    eid = start(project, shared_url, "retried", f"marker={project / 'tries'}")
    found = history(project, shared_url, eid)
    assert of_node(found, "flaky") == [
        ("node_started", 1), ("node_failed", 1), ("node_retried", 1),
        ("node_started", 2), ("node_failed", 2), ("node_retried", 2),
        ("node_started", 3), ("node_completed", 3)]
    events = [e for e in found["events"] if e["node"] == "flaky"]
    assert [e["error"] for e in events if e["kind"] == "node_failed"] == [
        {"type": "ValueError", "message": "try 1 failed"},
        {"type": "ValueError", "message": "try 2 failed"}]
    backoffs = [e["backoff_seconds"] for e in events if e["kind"] == "node_retried"]
    assert all(b > 0 for b in backoffs) and len(backoffs) == 2
    completed = events[-1]
    assert completed["duration_ms"] >= 0 and completed["detail"] == {"ok": 3}
    assert completed["checkpoint_id"]
    assert found["nodes"]["flaky"] == {"state": "completed", "reason": None, "attempts": 3,
                                       "title": None}
    text = tether(project, shared_url, "show", eid)
    assert "ValueError: try 1 failed" in text.stdout and "again after" in text.stdout


def _wait_for(path: Path) -> int:
    deadline = time.monotonic() + DEADLINE
    while not path.exists() or not path.read_text():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {path}")
        time.sleep(0.02)
    return int(path.read_text())


def test_kill_9_during_a_task_shows_one_abandoned_attempt_and_one_completed(
        project: Path, shared_url: str) -> None:
    """SIGKILL while the task sleeps: the history shows the node abandoned (never
    completed) until it is resumed; then attempt 1 abandoned, attempt 2 completed, and
    two owners' claims, the first one's pid the killed process's."""
    flag = project / "started"
    child = subprocess.Popen(
        [sys.executable, "-m", "tether", "run", "killed.yaml", "--tasks", "hist_tasks.py",
         "-q", "--json", "-i", f"flag={flag}", "--db", shared_url],
        cwd=project, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert _wait_for(flag) == child.pid
        child.send_signal(signal.SIGKILL)
        child.wait(DEADLINE)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        child.stdout.close()  # type: ignore[union-attr]
        child.stderr.close()  # type: ignore[union-attr]
    runs = json.loads(tether(project, shared_url, "runs", "--json").stdout)
    (eid,) = [r["execution_id"] for r in runs if r["workflow"] == "killed"]

    before = history(project, shared_url, eid)
    assert before["status"] == "running"
    assert before["nodes"]["slow"]["state"] == "abandoned"
    assert ("node_completed", 1) not in of_node(before, "slow")
    assert of_node(before, "slow") == [("node_started", 1), ("node_abandoned", 1)]

    resumed = tether(project, shared_url, "resume", eid, "--tasks", "hist_tasks.py", "-q")
    assert resumed.returncode == 0, resumed.stderr
    after = history(project, shared_url, eid)
    assert of_node(after, "slow") == [("node_started", 1), ("node_abandoned", 1),
                                      ("node_started", 2), ("node_completed", 2)]
    assert of_node(after, "first") == [("node_started", 1), ("node_completed", 1)]
    claims = [e for e in after["events"] if e["kind"] == "claimed"]
    assert [(c["attempt"], c["reason"]) for c in claims] == [(1, "started"), (2, "resumed")]
    assert claims[0]["pid"] == child.pid and claims[1]["pid"] != child.pid
    abandoned = next(e for e in after["events"] if e["kind"] == "node_abandoned")
    assert abandoned["owner"] == claims[0]["owner"]
    assert after["nodes"]["slow"]["state"] == "completed"
    assert after["nodes"]["slow"]["attempts"] == 2
    assert after["events"][-1]["kind"] == "run_ended"


def test_skipped_nodes_show_why(project: Path, shared_url: str) -> None:
    """A false ``when``, a trigger rule over a skipped need, and a failed need: each node
    is skipped with its reason, in the events and in the graph's node states; ``all_done``
    runs after a skipped need."""
    eid = start(project, shared_url, "skips")
    found = history(project, shared_url, eid)
    skips = {e["node"]: (e["status"], e["reason"]) for e in found["events"]
             if e["kind"] == "node_skipped"}
    assert skips == {"guarded": ("skipped", "when"),
                     "after_guarded": ("skipped", "trigger_rule"),
                     "after_bad": ("upstream_failed", "upstream_failed")}
    states = {n: (v["state"], v["reason"]) for n, v in found["nodes"].items()}
    assert states == {"bad": ("failed", None), "after_bad": ("upstream_failed",
                                                             "upstream_failed"),
                      "guarded": ("skipped", "when"),
                      "after_guarded": ("skipped", "trigger_rule"),
                      "always": ("completed", None)}
    failed = next(e for e in found["events"] if e["kind"] == "node_failed")
    assert failed["error"] == {"type": "RuntimeError", "message": "boom"}
    text = tether(project, shared_url, "show", eid).stdout
    assert "skipped: when" in text and "skipped: trigger_rule" in text
    skipped = next(line for line in text.splitlines() if "after_bad" in line)
    assert "upstream_failed" in skipped and "upstream_failed: upstream_failed" not in skipped


def test_a_paused_run_cancelled_shows_the_request_and_its_never_started_nodes_skipped(
        project: Path, shared_url: str) -> None:
    """``tether cancel`` of a paused run: the pause, the cancel request (channel cli, done at
    once), and the nodes that never ran skipped with the reason ``cancelled``."""
    eid = start(project, shared_url, "gated")
    cancelled = tether(project, shared_url, "cancel", eid)
    assert cancelled.returncode == 0, cancelled.stderr
    found = history(project, shared_url, eid)
    assert found["status"] == "cancelled"
    request = next(e for e in found["events"] if e["kind"] == "cancel_requested")
    assert (request["channel"], request["status"]) == ("cli", "cancelled")
    assert [e["kind"] for e in found["events"]].index("paused") < \
        [e["kind"] for e in found["events"]].index("cancel_requested")
    assert found["nodes"]["after"] == {"state": "skipped", "reason": "cancelled",
                                       "attempts": 0, "title": None}
    assert found["nodes"]["review"]["state"] == "interrupted"


def test_an_approval_that_times_out_shows_the_timer_answer_and_the_skip(
        project: Path, shared_url: str) -> None:
    """An approval with ``timeout: 1s, on_timeout: skip``, fired by ``tether resume`` once
    due: the pause, the timer's answer (``timed_out``, channel ``timer``), the approval
    skipped with the reason ``timed_out``, and the run completed."""
    eid = start(project, shared_url, "timed")
    deadline = time.monotonic() + DEADLINE
    while True:
        resumed = tether(project, shared_url, "resume", eid, "--tasks", "hist_tasks.py", "-q")
        if resumed.returncode == 0:
            break
        assert time.monotonic() < deadline, resumed.stderr
        time.sleep(0.2)  # not due yet
    found = history(project, shared_url, eid)
    assert found["status"] == "completed"
    kinds = [(e["kind"], e["node"]) for e in found["events"]
             if e["kind"] in ("paused", "timed_out", "answered", "node_skipped")]
    assert kinds == [("paused", "review"), ("timed_out", "review"),
                     ("node_skipped", "review")]
    timer = next(e for e in found["events"] if e["kind"] == "timed_out")
    assert timer["channel"] == "timer"
    assert found["nodes"]["review"]["reason"] == "timed_out"


def test_a_worker_claim_names_the_worker(project: Path, shared_url: str) -> None:
    """A run submitted to the queue and executed by ``tether worker``: its claim names the
    worker (its id, whose pid is the worker process's) and the reason ``claimed``."""
    submitted = tether(project, shared_url, "submit", "retried.yaml",
                       "-i", f"marker={project / 'tries'}")
    assert submitted.returncode == 0, submitted.stderr
    eid = submitted.stdout.strip()
    worker = subprocess.Popen(
        [sys.executable, "-m", "tether", "worker", "--tasks", "hist_tasks.py", "--poll",
         "0.1", "--db", shared_url], cwd=project, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, env=dict(os.environ))
    try:
        deadline = time.monotonic() + DEADLINE
        while history(project, shared_url, eid)["status"] != "completed":
            assert time.monotonic() < deadline, "the worker never completed the run"
            time.sleep(0.2)
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(DEADLINE)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()
    found = history(project, shared_url, eid)
    (claim,) = [e for e in found["events"] if e["kind"] == "claimed"]
    assert claim["reason"] == "claimed" and claim["pid"] == worker.pid
    assert claim["worker"] and claim["worker"].split("@")[1].split("/")[1] == str(worker.pid)
    assert found["events"][0]["kind"] == "run_created" and found["events"][0]["detail"] == {
        "queue": "default"}
