"""Ids by unique prefix, and forks whose patch cannot take effect, run for real.

Each test runs `python -m tether ...` in a fresh process against a SQLite file, as an operator
would: what ``tether show`` prints is pasted back into ``fork --checkpoint`` and
``show --after``; an execution id is shortened to a prefix for show, resume, fork and cancel;
ambiguous, short and unknown ids fail cleanly with exit 2 or 1; an ineffective fork exits 2
and writes nothing.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from test_operator import TASKS, WORKFLOW, start, tether


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "approve.yaml").write_text(WORKFLOW)
    (tmp_path / "ops_tasks.py").write_text(TASKS)
    return tmp_path


def _paused(project: Path, *extra: str) -> str:
    result = start(project, "500", "--json", *extra)
    assert result.returncode == 4, result.stderr
    return str(json.loads(result.stdout)["execution_id"])


def _printed_checkpoints(project: Path, run: str) -> list[str]:
    """The checkpoint column of `tether show`'s history (its last column), as a user would
    copy it, once each in order."""
    shown = tether(project, "show", run)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("time"))
    found = [line.split()[-1] for line in lines[header + 1:] if line.startswith("+")]
    ids = [f for f in found if re.fullmatch(r"[0-9a-f-]{12,36}", f)]
    return list(dict.fromkeys(ids))


def _checkpoint_ids(shown: str) -> list[str]:
    """The checkpoint ids of `show --json`'s events, once each in order."""
    return list(dict.fromkeys(e["checkpoint_id"] for e in json.loads(shown)["events"]
                              if e["checkpoint_id"]))


def _runs(project: Path) -> list[str]:
    return sorted(r["execution_id"] for r in json.loads(
        tether(project, "runs", "--json").stdout))


def test_the_checkpoint_ids_show_prints_work_with_fork_and_show_after(project: Path) -> None:
    """Every id in `tether show`'s checkpoint column, and its unique 12-character suffix
    and 13-character prefix, is accepted by `fork --checkpoint` and by `show --after`, and
    names the checkpoint it was printed for."""
    run = _paused(project)
    full = _checkpoint_ids(tether(project, "show", run, "--json").stdout)
    printed = _printed_checkpoints(project, run)
    assert printed == full and len(full) == 2
    for given in (printed[0], full[0][-12:], full[0][:13]):
        after = tether(project, "show", run, "--after", given, "--json")
        assert after.returncode == 0, after.stderr
        assert full[0] not in _checkpoint_ids(after.stdout)
        forked = tether(project, "fork", run, "--checkpoint", given, "--tasks",
                        "ops_tasks.py", "--json")
        assert forked.returncode == 4, forked.stderr  # the branch asks for the approval again
        branch = json.loads(forked.stdout)["execution_id"]
        record = json.loads(tether(project, "show", branch, "--json").stdout)
        assert (record["parent_execution_id"], record["parent_checkpoint_id"]) == (run, full[0])


def test_an_execution_id_prefix_works_for_show_resume_fork_and_cancel(project: Path) -> None:
    """Thirteen characters of a run's id stand for it in every command taking one."""
    run = _paused(project)
    prefix = run[:13]
    shown = tether(project, "show", prefix, "--json")
    assert json.loads(shown.stdout)["execution_id"] == run
    forked = tether(project, "fork", prefix, "--tasks", "ops_tasks.py", "--json")
    assert forked.returncode == 4, forked.stderr
    branch = json.loads(forked.stdout)["execution_id"]
    resumed = tether(project, "resume", prefix, "--tasks", "ops_tasks.py", "--json",
                     "--value", '{"approved": true}')
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["execution_id"] == run
    cancelled = tether(project, "cancel", branch[:-4])
    assert cancelled.returncode == 0, cancelled.stderr
    assert f"cancelled run {branch}" in cancelled.stdout


def test_ambiguous_short_and_unknown_ids_fail_cleanly(project: Path) -> None:
    """Several runs sharing a prefix: exit 2 listing them; 7 characters: exit 2; a prefix
    of nothing: exit 1 naming it. No traceback, nothing changed."""
    ids = [_paused(project, "--execution-id", f"nightly-2026-{n:02d}") for n in range(12)]
    before = _runs(project)
    ambiguous = tether(project, "resume", "nightly-2026", "--value", '{"approved": true}')
    assert ambiguous.returncode == 2, ambiguous.stderr
    assert "execution id 'nightly-2026' is ambiguous: 12 match" in ambiguous.stderr
    assert all(i in ambiguous.stderr for i in ids[:10]) and ids[10] not in ambiguous.stderr
    assert "and 2 more" in ambiguous.stderr
    short = tether(project, "show", "nightly")
    assert (short.returncode, short.stderr.strip()) == (2, "error: execution id 'nightly' is "
                                                        "not an exact id, and a prefix needs "
                                                        "at least 8 characters")
    unknown = tether(project, "cancel", "nightly-2027")
    assert (unknown.returncode, unknown.stderr.strip()) == (
        1, "error: no run with execution id 'nightly-2027'")
    checkpoint = tether(project, "fork", ids[0], "--checkpoint", "ffffffffffff")
    assert checkpoint.returncode == 1 and "checkpoint 'ffffffffffff'" in checkpoint.stderr
    for result in (ambiguous, short, unknown, checkpoint):
        assert "Traceback" not in result.stderr
    assert _runs(project) == before
    assert tether(project, "show", "nightly-2026-03", "--json").returncode == 0


def test_a_fork_whose_patch_cannot_take_effect_is_refused_and_writes_nothing(
        project: Path) -> None:
    """From a finished run (the old silent no-op), with an unknown input, with an input no
    node left to run reads, or with a node output nothing left to run reads: exit 2, a
    message naming the reason, and no new run; from the run's `run_end` checkpoint named
    with --checkpoint (as `tether show` prints it): exit 1 naming the end marker."""
    done = json.loads(start(project, "50", "--json").stdout)["execution_id"]
    paused = _paused(project)
    before = _runs(project)
    cases = [
        (done, '{"inputs": {"code": "B"}}', "every node has finished at checkpoint"),
        (paused, '{"inputs": {"code": "B"}}', "reads 'inputs.code'"),
        (paused, '{"extra": 1}', "'extra' is not part of a run's state"),
    ]
    for run, patch, reason in cases:
        refused = tether(project, "fork", run, "--tasks", "ops_tasks.py", "--patch", patch)
        assert refused.returncode == 2, (patch, refused.stderr)
        assert f"cannot fork run {run}: " in refused.stderr and reason in refused.stderr, \
            refused.stderr
        assert "nothing was written" in refused.stderr and "Traceback" not in refused.stderr
    shown = json.loads(tether(project, "show", done, "--json").stdout)
    end = next(e["checkpoint_id"] for e in shown["events"] if e["kind"] == "run_ended")
    from_end = tether(project, "fork", done, "--checkpoint", end, "--tasks", "ops_tasks.py",
                      "--patch", '{"inputs": {"code": "B"}}')
    assert from_end.returncode == 1 and "Traceback" not in from_end.stderr
    assert f"checkpoint '{end}' is the run's end marker, not a point to fork from" in \
        from_end.stderr
    unknown = tether(project, "fork", paused, "--tasks", "ops_tasks.py", "--patch",
                     '{"inputs": {"nope": 1}}')
    assert unknown.returncode == 1  # an input the plan lacks: the inputs' own error
    assert "unknown input 'nope' (declared: amount, code)" in unknown.stderr
    assert _runs(project) == before


SIDE = """\
tether: 1
name: side
inputs:
  amount: {type: number}
nodes:
  prepare:
    task: ops.prepare
    with: {amount: "{{ inputs.amount }}", code: "c"}
  review:
    approval: {reason: check}
  apply:
    needs: [review]
    task: ops.apply
    with: {amount: 2}
output:
  code: "{{ nodes.prepare.output.code }}"
"""


def test_a_patched_output_no_node_left_to_run_reads_is_refused(project: Path) -> None:
    """`prepare` finished and nothing left to run is downstream of it: patching its output
    would change nothing the branch runs (only the output template reads it): exit 2."""
    (project / "side.yaml").write_text(SIDE)
    started = tether(project, "run", "side.yaml", "--tasks", "ops_tasks.py", "--input",
                     "amount=5", "--json")
    assert started.returncode == 4, started.stderr
    run = json.loads(started.stdout)["execution_id"]
    before = _runs(project)
    refused = tether(project, "fork", run, "--tasks", "ops_tasks.py", "--patch",
                     '{"nodes": {"prepare": {"output": {"code": "Z"}}}}')
    assert refused.returncode == 2, refused.stderr
    assert "'nodes.prepare' stays finished and no node left to run reads it" in refused.stderr
    rerun = tether(project, "fork", run, "--tasks", "ops_tasks.py", "--json", "--patch",
                   '{"nodes": {"prepare": {"status": "pending"}}, "inputs": {"amount": 9}}')
    assert rerun.returncode == 4, rerun.stderr  # prepare runs again, then review asks
    assert len(_runs(project)) == len(before) + 1


def test_a_fork_whose_patch_is_read_runs_with_it(project: Path) -> None:
    """A patched input the waiting approval reads, and a patched output a node left to run
    reads, both take effect in the branch."""
    paused = _paused(project)
    forked = tether(project, "fork", paused, "--tasks", "ops_tasks.py", "--json", "--patch",
                    '{"inputs": {"amount": 700}, "nodes": {"prepare": {"output": '
                    '{"amount": 3, "code": "X"}}}}')
    assert forked.returncode == 4, forked.stderr
    branch = json.loads(forked.stdout)["execution_id"]
    resumed = tether(project, "resume", branch, "--tasks", "ops_tasks.py", "--json",
                     "--value", '{"approved": true}')
    assert json.loads(resumed.stdout)["output"] == {"applied": 6, "code": "X"}
