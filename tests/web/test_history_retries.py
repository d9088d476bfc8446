"""Retried attempts inside nodes, proven with real ``tether run`` processes on SQLite and
PostgreSQL: a ``for_each`` element and a sub-workflow's task that failed before they
succeeded show each failed attempt (its error, masked, and the backoff before the next) and
the completed one, the same in ``tether show --json``, ``GET /api/runs/{id}/history`` and
the console's run page."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from web_support import Project, project_with
from web_support import one_history as shared_history

SECRET = "sk-retry-Zq81xW"

TASKS = '''
import os
from tether import task


@task("retry.flaky")
def flaky(marker: str, key: str, fails: int, token: str = "") -> dict:
    path = f"{marker}.{key}"
    tries = int(open(path).read()) if os.path.exists(path) else 0
    with open(path, "w") as handle:
        handle.write(str(tries + 1))
    if tries < fails:
        raise ValueError(f"try {tries + 1} of {key} failed ({token})")
    return {"key": key, "tries": tries + 1}
'''

EACH = """
tether: 1
name: each
secrets: [API_KEY]
inputs:
  marker: {type: string}
nodes:
  fan:
    for_each: ["a", "b", "c"]
    concurrency: 1
    task: retry.flaky
    retry: {max_attempts: 3, backoff: 20ms}
    with:
      marker: "{{ inputs.marker }}"
      key: "{{ item }}"
      fails: "{{ 2 if item == 'b' else 0 }}"
      token: "{{ secrets.API_KEY }}"
  last:
    needs: [fan]
    noop: true
"""

INNER = """
tether: 1
name: inner
secrets: [API_KEY]
inputs:
  marker: {type: string}
nodes:
  one:
    noop: true
  work:
    needs: [one]
    task: retry.flaky
    retry: {max_attempts: 2, backoff: 10ms}
    with: {marker: "{{ inputs.marker }}", key: inner, fails: 1,
           token: "{{ secrets.API_KEY }}"}
output:
  done: "{{ nodes.work.output }}"
"""

OUTER = """
tether: 1
name: outer
inputs:
  marker: {type: string}
nodes:
  child:
    workflow: inner.yaml
    with: {marker: "{{ inputs.marker }}"}
output:
  inner: "{{ nodes.child.output }}"
"""

FAILING = """
tether: 1
name: failing
secrets: [API_KEY]
inputs:
  marker: {type: string}
nodes:
  fan:
    for_each: ["a", "b"]
    concurrency: 1
    task: retry.flaky
    retry: {max_attempts: 2, backoff: 10ms}
    with: {marker: "{{ inputs.marker }}", key: "{{ item }}",
           fails: "{{ 5 if item == 'b' else 0 }}", token: "{{ secrets.API_KEY }}"}
"""

ALONE = """
tether: 1
name: alone
secrets: [API_KEY]
inputs:
  marker: {type: string}
nodes:
  charge:
    task: retry.flaky
    retry: {max_attempts: 2, backoff: 10ms}
    with: {marker: "{{ inputs.marker }}", key: charge, fails: 5,
           token: "{{ secrets.API_KEY }}"}
"""

DEADLINE = 120.0


@pytest.fixture
def project(tmp_path: Path, shared_url: str,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[Project]:
    found = project_with(tmp_path, tmp_path_factory.getbasetemp(), shared_url, {
        "each.yaml": EACH, "inner.yaml": INNER, "outer.yaml": OUTER,
        "failing.yaml": FAILING, "alone.yaml": ALONE, "retry_tasks.py": TASKS})
    yield found
    found.close()


def run(project: Project, workflow: str) -> dict[str, Any]:
    """``tether run`` in a subprocess (the secret in its environment); its JSON result."""
    ran = subprocess.run(
        [sys.executable, "-m", "tether", "run", f"{workflow}.yaml", "--tasks",
         "retry_tasks.py", "-q", "--json", "-i", f"marker={project.root / 'tries'}",
         "--db", project.db], cwd=project.root, capture_output=True, text=True,
        timeout=DEADLINE, check=False, env={**os.environ, "API_KEY": SECRET})
    assert ran.stdout, ran.stderr
    found: dict[str, Any] = json.loads(ran.stdout)
    return found


def one_history(project: Project, eid: str) -> tuple[dict[str, Any], str]:
    """The run's one history (:func:`web_support.one_history`) and its page, which has a
    row for each failed attempt."""
    found, page = shared_history(project, eid)
    assert page.count('data-kind="node_failed"') == \
        sum(e["kind"] == "node_failed" for e in found["events"])
    return found, page


def events(found: dict[str, Any], node: str, agent_path: str = "") -> list[dict[str, Any]]:
    return [e for e in found["events"] if e["node"] == node and e["agent_path"] == agent_path]


def kinds(found: dict[str, Any], node: str, agent_path: str = "") -> list[tuple[str, int]]:
    return [(e["kind"], e["attempt"]) for e in events(found, node, agent_path)]


ONE_DONE = [("node_started", 1), ("node_completed", 1)]


def test_a_for_each_element_failing_twice_then_succeeding_shows_three_attempts(
        project: Project) -> None:
    """Element 1 fails twice (its error echoes a secret) and then succeeds: two failed
    attempts with their masked errors and backoffs, then the completed third; elements 0
    and 2 one completed attempt each; the secret is nowhere in the history or the page."""
    result = run(project, "each")
    assert result["status"] == "completed", result
    found, page = one_history(project, result["execution_id"])
    assert kinds(found, "fan/item:1") == [
        ("node_started", 1), ("node_failed", 1), ("node_retried", 1),
        ("node_started", 2), ("node_failed", 2), ("node_retried", 2),
        ("node_started", 3), ("node_completed", 3)]
    assert kinds(found, "fan/item:0") == ONE_DONE
    assert kinds(found, "fan/item:2") == ONE_DONE
    element = events(found, "fan/item:1")
    errors = [e["error"] for e in element if e["kind"] == "node_failed"]
    assert [e["type"] for e in errors] == ["ValueError", "ValueError"]
    assert [e["message"] for e in errors] == ["try 1 of b failed (***)",
                                              "try 2 of b failed (***)"]
    retried = [e for e in element if e["kind"] == "node_retried"]
    assert all(e["backoff_seconds"] > 0 for e in retried) and len(retried) == 2
    started = [e for e in element if e["kind"] == "node_started"]
    assert started[1]["at"] >= retried[0]["at"] and started[2]["at"] >= retried[1]["at"]
    assert element[-1]["detail"] == {"key": "b", "tries": 3}
    assert SECRET not in json.dumps(found) and SECRET not in page
    assert found["nodes"]["fan"]["state"] == "completed"


def test_a_sub_workflow_task_failing_once_then_succeeding_shows_two_attempts(
        project: Project) -> None:
    """The sub-workflow's ``work`` fails once (its error echoes a secret), then succeeds:
    at its ``agent_path``, one failed attempt with its masked error and backoff and one
    completed; its sibling one attempt."""
    result = run(project, "outer")
    assert result["status"] == "completed", result
    found, page = one_history(project, result["execution_id"])
    inner = "workflow:outer/node:child"
    assert kinds(found, "work", inner) == [
        ("node_started", 1), ("node_failed", 1), ("node_retried", 1),
        ("node_started", 2), ("node_completed", 2)]
    failed = next(e for e in events(found, "work", inner) if e["kind"] == "node_failed")
    assert failed["error"]["type"] == "ValueError"
    assert failed["error"]["message"].startswith("try 1 of inner failed"), failed
    assert failed["error"]["message"].endswith("(***)"), failed
    retried = next(e for e in events(found, "work", inner) if e["kind"] == "node_retried")
    assert retried["backoff_seconds"] > 0
    assert kinds(found, "one", inner) == ONE_DONE
    assert kinds(found, "child") == ONE_DONE
    assert SECRET not in json.dumps(found) and SECRET not in page


def test_a_for_each_element_that_fails_for_good_shows_each_failed_attempt(
        project: Project) -> None:
    """Element 1 fails both its attempts (its error echoes a secret): both show failed
    with their masked errors (the first with its backoff), and the node fails after them."""
    result = run(project, "failing")
    assert result["status"] == "failed", result
    found, page = one_history(project, result["execution_id"])
    assert kinds(found, "fan/item:1") == [
        ("node_started", 1), ("node_failed", 1), ("node_retried", 1),
        ("node_started", 2), ("node_failed", 2)]
    assert kinds(found, "fan/item:0") == ONE_DONE
    assert kinds(found, "fan") == [("node_started", 1), ("node_failed", 1)]
    errors = [e["error"]["message"] for e in events(found, "fan/item:1")
              if e["kind"] == "node_failed"]
    assert errors == ["try 1 of b failed (***)", "try 2 of b failed (***)"]
    assert SECRET not in json.dumps(found) and SECRET not in page


def test_a_node_failing_for_good_with_a_masked_error_keeps_its_failed_attempts(
        project: Project) -> None:
    """A top-level node's last error echoes a secret, so it is masked before it is stored:
    the node still shows both attempts (masking the final error kept them)."""
    result = run(project, "alone")
    assert result["status"] == "failed", result
    found, page = one_history(project, result["execution_id"])
    assert kinds(found, "charge") == [
        ("node_started", 1), ("node_failed", 1), ("node_retried", 1),
        ("node_started", 2), ("node_failed", 2)]
    assert [e["error"]["message"] for e in events(found, "charge")
            if e["kind"] == "node_failed"] == ["try 1 of charge failed (***)",
                                               "try 2 of charge failed (***)"]
    assert found["nodes"]["charge"]["attempts"] == 2
    assert SECRET not in json.dumps(found) and SECRET not in page
