"""Abandoned attempts inside nodes, proven with ``kill -9`` of a real ``tether run`` on
SQLite and PostgreSQL: a ``for_each`` element and a sub-workflow's task that were in flight
when their owner died show one abandoned attempt and one completed (never two completed),
the same in ``tether show --json``, ``GET /api/runs/{id}/history`` and the console's page."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from web_support import Project, project_with
from web_support import one_history as shared_history

TASKS = '''
import os
import time
from tether import task


@task("nest.slow")
def slow(flag: str, key: str = "") -> dict:
    if key in ("", "b") and not os.path.exists(flag):  # the first process sleeps, killed
        with open(flag, "w") as handle:
            handle.write(str(os.getpid()))
        time.sleep(600)
    return {"key": key}
'''

EACH = """
tether: 1
name: each
inputs:
  flag: {type: string}
nodes:
  first:
    noop: true
  fan:
    needs: [first]
    for_each: ["a", "b", "c"]
    concurrency: 1
    task: nest.slow
    with: {flag: "{{ inputs.flag }}", key: "{{ item }}"}
  last:
    needs: [fan]
    noop: true
"""

INNER = """
tether: 1
name: inner
inputs:
  flag: {type: string}
nodes:
  one:
    noop: true
  work:
    needs: [one]
    task: nest.slow
    with: {flag: "{{ inputs.flag }}"}
output:
  done: "{{ nodes.work.output }}"
"""

OUTER = """
tether: 1
name: outer
inputs:
  flag: {type: string}
nodes:
  first:
    noop: true
  child:
    needs: [first]
    workflow: inner.yaml
    with: {flag: "{{ inputs.flag }}"}
  last:
    needs: [child]
    noop: true
"""

FAN_OF_CHILDREN = """
tether: 1
name: fan_of_children
inputs:
  flag: {type: string}
nodes:
  fan:
    for_each: ["a", "b", "c"]
    concurrency: 2
    workflow: keyed.yaml
    with: {flag: "{{ inputs.flag }}", key: "{{ item }}"}
"""

KEYED = """
tether: 1
name: keyed
inputs:
  flag: {type: string}
  key: {type: string}
nodes:
  work:
    task: nest.slow
    with: {flag: "{{ inputs.flag }}", key: "{{ inputs.key }}"}
output:
  done: "{{ nodes.work.output }}"
"""

DEADLINE = 120.0


@pytest.fixture
def project(tmp_path: Path, shared_url: str,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[Project]:
    found = project_with(tmp_path, tmp_path_factory.getbasetemp(), shared_url, {
        "each.yaml": EACH, "inner.yaml": INNER, "outer.yaml": OUTER,
        "fan_of_children.yaml": FAN_OF_CHILDREN, "keyed.yaml": KEYED,
        "nest_tasks.py": TASKS})
    yield found
    found.close()


def tether(project: Project, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tether", *args, "--db", project.db],
                          cwd=project.root, capture_output=True, text=True,
                          timeout=DEADLINE, check=False, env=dict(os.environ))


def run_killed(project: Project, workflow: str) -> tuple[str, int]:
    """``tether run`` killed with SIGKILL inside its slow task: the run's id, the pid."""
    flag = project.root / "started"
    child = subprocess.Popen(
        [sys.executable, "-m", "tether", "run", f"{workflow}.yaml", "--tasks",
         "nest_tasks.py", "-q", "-i", f"flag={flag}", "--db", project.db],
        cwd=project.root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + DEADLINE
        while not flag.exists() or not flag.read_text():
            assert time.monotonic() < deadline, "the task never started"
            time.sleep(0.02)
        assert int(flag.read_text()) == child.pid
        child.send_signal(signal.SIGKILL)
        child.wait(DEADLINE)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    (run,) = [r for r in json.loads(tether(project, "runs", "--json").stdout)
              if r["workflow"] == workflow]
    return run["execution_id"], child.pid


def attempts(found: dict[str, Any], node: str, agent_path: str = "") -> list[tuple[str, int]]:
    return [(e["kind"], e["attempt"]) for e in found["events"]
            if e["node"] == node and e["agent_path"] == agent_path]


ONE_LOST_ONE_DONE = [("node_started", 1), ("node_abandoned", 1), ("node_started", 2),
                     ("node_completed", 2)]


def one_history(project: Project, eid: str) -> dict[str, Any]:
    """The run's one history (:func:`web_support.one_history`); the page has a row for each
    abandoned attempt."""
    from_cli, page = shared_history(project, eid)
    lost = [e for e in from_cli["events"] if e["kind"] == "node_abandoned"]
    assert page.count('data-kind="node_abandoned"') == len(lost)
    return from_cli


def resume(project: Project, eid: str) -> dict[str, Any]:
    """Resume the run in a fresh process; its history (:func:`one_history`)."""
    resumed = tether(project, "resume", eid, "--tasks", "nest_tasks.py", "-q")
    assert resumed.returncode == 0, resumed.stderr
    return one_history(project, eid)


def test_kill_9_during_a_for_each_element_shows_it_abandoned_then_completed(
        project: Project) -> None:
    """Element 1 of three (concurrency 1) was running when its owner died: before the
    resume it and its node show abandoned; after it, element 1 has one abandoned attempt
    and one completed, element 0 (done before) and element 2 (not started) one completed
    attempt each, and the node's view counts the abandoned attempt."""
    eid, pid = run_killed(project, "each")
    before = one_history(project, eid)
    assert before["status"] == "running"
    assert before["nodes"]["fan"]["state"] == "abandoned"
    assert attempts(before, "fan/item:1") == [("node_started", 1), ("node_abandoned", 1)]
    assert attempts(before, "fan/item:2") == []

    after = resume(project, eid)
    assert after["status"] == "completed"
    assert attempts(after, "fan/item:1") == ONE_LOST_ONE_DONE
    assert attempts(after, "fan/item:0") == [("node_started", 1), ("node_completed", 1)]
    assert attempts(after, "fan/item:2") == [("node_started", 1), ("node_completed", 1)]
    assert attempts(after, "fan") == ONE_LOST_ONE_DONE
    lost = next(e for e in after["events"]
                if e["kind"] == "node_abandoned" and e["node"] == "fan/item:1")
    claims = [e for e in after["events"] if e["kind"] == "claimed"]
    assert claims[0]["pid"] == pid and lost["owner"] == claims[0]["owner"]
    assert after["nodes"]["fan"] == {"state": "completed", "reason": None, "attempts": 2,
                                     "title": None}


def test_kill_9_during_a_sub_workflow_task_shows_it_abandoned_then_completed(
        project: Project) -> None:
    """The sub-workflow's ``work`` was running when its owner died: the inner node (at its
    ``agent_path``) and the ``workflow`` node each show one abandoned attempt and one
    completed; the inner node finished before the crash shows one completed attempt."""
    eid, pid = run_killed(project, "outer")
    inner = "workflow:outer/node:child"
    before = one_history(project, eid)
    assert before["nodes"]["child"]["state"] == "abandoned"
    assert attempts(before, "work", inner) == [("node_started", 1), ("node_abandoned", 1)]

    after = resume(project, eid)
    assert after["status"] == "completed"
    assert attempts(after, "work", inner) == ONE_LOST_ONE_DONE
    assert attempts(after, "one", inner) == [("node_started", 1), ("node_completed", 1)]
    assert attempts(after, "child") == ONE_LOST_ONE_DONE
    lost = next(e for e in after["events"]
                if e["kind"] == "node_abandoned" and e["node"] == "work")
    claims = [e for e in after["events"] if e["kind"] == "claimed"]
    assert claims[0]["pid"] == pid and lost["owner"] == claims[0]["owner"]
    assert lost["agent_path"] == inner


def test_kill_9_inside_a_for_each_of_sub_workflows_never_shows_two_completions(
        project: Project) -> None:
    """Elements 0 and 1 run (concurrency 2), each a sub-workflow; the owner dies while
    element 1's task sleeps: element 1 and its task (at the element's ``agent_path``) show
    one abandoned attempt and one completed, element 2 (never started) one completed; no
    unit anywhere shows two completions, and every abandoned attempt is followed by a
    completed one."""
    eid, _ = run_killed(project, "fan_of_children")
    after = resume(project, eid)
    assert after["status"] == "completed"
    assert attempts(after, "fan/item:1") == ONE_LOST_ONE_DONE
    assert attempts(after, "work", "workflow:fan_of_children/node:fan/item:1") == \
        ONE_LOST_ONE_DONE
    assert attempts(after, "fan/item:2") == [("node_started", 1), ("node_completed", 1)]
    units: dict[tuple[str, str], list[str]] = {}
    for event in after["events"]:
        if event["kind"] in ("node_abandoned", "node_completed"):
            units.setdefault((event["agent_path"], event["node"]), []).append(event["kind"])
    assert all(kinds.count("node_completed") == 1 and kinds[-1] == "node_completed"
               for kinds in units.values()), units
