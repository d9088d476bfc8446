"""The operator commands, run for real: run, resume, fork, runs, show, pending, prune.

Each test runs `python -m tether ...` in a fresh process against a SQLite file, as an operator
would, and checks exit codes (0 completed, 1 failed or error, 2 usage, 4 paused) and output.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

WORKFLOW = """\
tether: 1
name: approve
inputs:
  amount: {type: number}
  code: {type: string, default: "none"}
nodes:
  prepare:
    task: ops.prepare
    with: {amount: "{{ inputs.amount }}", code: "{{ inputs.code }}"}
  review:
    needs: [prepare]
    when: "{{ inputs.amount > 100 }}"
    approval:
      reason: manager_approval
      context: {amount: "{{ inputs.amount }}"}
      form: {approved: {type: boolean}, note: {type: string, default: ""}}
  apply:
    needs: [review]
    trigger: all_done
    task: ops.apply
    with: {amount: "{{ nodes.prepare.output.amount }}"}
output:
  applied: "{{ nodes.apply.output }}"
  code: "{{ nodes.prepare.output.code }}"
"""

TASKS = """\
import os
from tether import task

@task("ops.prepare")
def prepare(amount: float, code: str) -> dict:
    return {"amount": amount, "code": code}

@task("ops.apply")
def apply(amount: float) -> float:
    if os.environ.get("FAIL_APPLY"):
        raise RuntimeError("the bank is closed")
    return amount * 2
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "approve.yaml").write_text(WORKFLOW)
    (tmp_path / "ops_tasks.py").write_text(TASKS)
    return tmp_path


def tether(project: Path, *args: str, env: dict[str, str] | None = None,
           ) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k != "TETHER_DB"}
    environment.update({"TETHER_DB": f"sqlite:///{project / 'ops.db'}", **(env or {})})
    return subprocess.run([sys.executable, "-m", "tether", *args], cwd=project, env=environment,
                          capture_output=True, text=True, timeout=120, check=False)


def start(project: Path, amount: str = "250", *extra: str,
          env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return tether(project, "run", "approve.yaml", "--tasks", "ops_tasks.py",
                  "--input", f"amount={amount}", *extra, env=env)


def test_a_run_that_completes_exits_0_and_prints_its_output(project: Path) -> None:
    """Below the threshold: no pause; exit 0; the output as JSON; progress on stderr."""
    result = start(project, "50", "--input", "code=007")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("completed run ")
    assert json.loads("\n".join(lines[1:])) == {"applied": 100, "code": "007"}
    assert "✓ prepare completed" in result.stderr and "▶ apply" in result.stderr


def test_a_paused_run_exits_4_and_says_how_to_resume(project: Path) -> None:
    """Above the threshold: exit 4, the frozen context, and a resume command with an example
    value built from the approval's form."""
    result = start(project)
    assert result.returncode == 4, result.stderr
    run_id = result.stdout.split()[2]
    assert f"paused run {run_id} at node 'review' (manager_approval)" in result.stdout
    assert 'context: {"amount": 250}' in result.stdout
    assert f"resume with: tether resume {run_id} --value '{{\"approved\": true}}'" \
        in result.stdout


def test_pause_pending_resume_show_runs(project: Path) -> None:
    """The whole operator loop: pending lists the pause; resume without a value or with a
    wrong one is refused and changes nothing; the right value completes the run; resuming
    again is refused; show and runs report it."""
    run_id = json.loads(start(project, "250", "--json").stdout)["execution_id"]
    pending = tether(project, "pending")
    assert pending.returncode == 0
    assert f"{run_id}  review  manager_approval" in pending.stdout
    assert '"amount": 250' in pending.stdout

    bare = tether(project, "resume", run_id, "--tasks", "ops_tasks.py")
    assert bare.returncode == 1
    assert "waiting for input" in bare.stderr and "Traceback" not in bare.stderr
    wrong = tether(project, "resume", run_id, "--tasks", "ops_tasks.py",
                   "--value", '{"approved": "yes"}')
    assert wrong.returncode == 1
    assert "field 'approved' must be a boolean" in wrong.stderr
    assert run_id in tether(project, "pending").stdout

    done = tether(project, "resume", run_id, "--tasks", "ops_tasks.py", "--json",
                  "--value", '{"approved": true}')
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["output"] == {"applied": 500, "code": "none"}
    again = tether(project, "resume", run_id, "--tasks", "ops_tasks.py",
                   "--value", '{"approved": true}')
    assert again.returncode == 1 and "already finished" in again.stderr
    assert tether(project, "pending").stdout.strip() == "no paused runs"

    shown = json.loads(tether(project, "show", run_id, "--json").stdout)
    assert shown["status"] == "completed"
    assert [c["node_id"] for c in shown["checkpoints"]] == [
        "prepare", "review", "review", "apply", "run_end"]
    assert [c["step_type"] for c in shown["checkpoints"]][1] == "hitl_pause"
    table = tether(project, "show", run_id)
    assert table.returncode == 0 and "run_end" in table.stdout and "hitl_pause" in table.stdout
    runs = json.loads(tether(project, "runs", "--status", "completed", "--json").stdout)
    assert [r["execution_id"] for r in runs] == [run_id]


def test_a_failed_run_exits_1_and_resume_completes_it(project: Path) -> None:
    """A task that raises: exit 1 with the node and error; once fixed, resume completes it."""
    failed = start(project, "50", env={"FAIL_APPLY": "1"})
    assert failed.returncode == 1
    assert "at node 'apply': RuntimeError: the bank is closed" in failed.stdout
    run_id = failed.stdout.split()[2]
    assert f"tether resume {run_id}" in failed.stderr
    resumed = tether(project, "resume", run_id, "--tasks", "ops_tasks.py")
    assert resumed.returncode == 0, resumed.stderr


def test_fork_branches_a_new_run_and_leaves_the_original(project: Path) -> None:
    """fork: a new execution id linked to the original; the original is unchanged."""
    run_id = json.loads(start(project, "50", "--json").stdout)["execution_id"]
    before = tether(project, "show", run_id, "--json").stdout
    forked = tether(project, "fork", run_id, "--tasks", "ops_tasks.py", "--json", "--patch",
                    '{"inputs": {"code": "B"}, "nodes": {"prepare": {"status": "pending"}}}')
    assert forked.returncode == 0, forked.stderr
    branch = json.loads(forked.stdout)["execution_id"]
    assert branch != run_id
    assert json.loads(forked.stdout)["output"]["code"] == "B"
    shown = json.loads(tether(project, "show", branch, "--json").stdout)
    assert shown["parent_execution_id"] == run_id
    assert shown["checkpoints"][0]["step_type"] == "fork_origin"
    assert tether(project, "show", run_id, "--json").stdout == before


def test_prune_removes_finished_runs_and_keeps_paused_ones(project: Path) -> None:
    """prune --older-than 0s removes completed runs; a paused run survives and resumes."""
    done = json.loads(start(project, "50", "--json").stdout)["execution_id"]
    paused = json.loads(start(project, "500", "--json").stdout)["execution_id"]
    pruned = tether(project, "prune", "--older-than", "0s", "--json")
    assert pruned.returncode == 0, pruned.stderr
    assert json.loads(pruned.stdout)["execution_ids"] == [done]
    assert tether(project, "show", done).returncode == 1
    resumed = tether(project, "resume", paused, "--tasks", "ops_tasks.py", "--value",
                     '{"approved": false}')
    assert resumed.returncode == 0, resumed.stderr


def test_inputs_are_read_by_their_declared_type(project: Path) -> None:
    """--input amount=1e2 is a number; a value that is not one is a usage error (exit 2)."""
    assert start(project, "1e2").returncode == 0
    bad = start(project, "lots")
    assert bad.returncode == 2
    assert "Invalid value for --input amount (number): not valid JSON" in bad.stderr
    missing = tether(project, "run", "approve.yaml", "--tasks", "ops_tasks.py")
    assert missing.returncode == 1
    assert "missing required input 'amount'" in missing.stderr


def test_clean_errors_for_unknown_runs_and_missing_tasks(project: Path) -> None:
    """No traceback: an unknown execution id, and a workflow whose tasks are not imported."""
    no_tasks = tether(project, "run", "approve.yaml", "--input", "amount=1")
    assert no_tasks.returncode == 1
    assert "ops.apply, ops.prepare" in no_tasks.stderr and "--tasks" in no_tasks.stderr
    unknown = tether(project, "resume", "nope-nope")
    assert unknown.returncode == 1
    assert unknown.stderr.strip() == "error: no run with execution id 'nope-nope'"
    assert "Traceback" not in unknown.stderr + no_tasks.stderr
    short = tether(project, "resume", "nope")  # no id starts with it: not found, not "too short"
    assert short.returncode == 1
    assert short.stderr.strip() == "error: no run with execution id 'nope'"


def test_a_compiled_plan_runs_without_its_source(project: Path) -> None:
    """tether compile -o plan.json, delete the workflow, run the plan."""
    assert tether(project, "compile", "approve.yaml", "-o", "plan.json").returncode == 0
    (project / "approve.yaml").unlink()
    result = tether(project, "run", "plan.json", "--tasks", "ops_tasks.py", "--input",
                    "amount=5", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["output"] == {"applied": 10, "code": "none"}
