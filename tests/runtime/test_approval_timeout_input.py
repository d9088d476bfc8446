"""An approval `timeout` computed from an input (issue 25): checked at compile time as a
setting over the inputs, rendered and read as a duration when the approval starts, a bad
value failing the node with a clear error; the deadline then behaves as a literal one."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

import tether
from tether import open_checkpointer
from tether.errors import ResumeError
from tether.runtime.runner import Runner
from tether.runtime.timers import fire_due

WORKFLOW = """\
tether: 1
name: gated
inputs:
  approval_timeout: {type: string, default: 3d}
nodes:
  review:
    approval:
      reason: ship it?
      form: {approved: {type: boolean}}
      timeout: "{{ inputs.approval_timeout }}"
      on_timeout: fail
  ship:
    noop: true
    needs: [review]
    when: "{{ nodes.review.output.approved }}"
"""

FLOW = """\
workflow gated
input approval_timeout: string = "3d"

approval review
    reason "ship it?"
    form (approved: boolean)
    timeout "{{ inputs.approval_timeout }}"
    on_timeout "fail"
noop ship
    after review
    when {{ nodes.review.output.approved }}
"""


def _write(tmp_path: Path, text: str, name: str = "gated.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_the_deadline_is_the_input_read_as_a_duration(shared_url: str, tmp_path: Path) -> None:
    path = _write(tmp_path, WORKFLOW)
    assert tether.check(path) == []
    with open_checkpointer(shared_url) as store:
        before = time.time()
        paused = Runner(str(path), store).run({"approval_timeout": "2h"})
        assert paused.status == "paused"
        row = store.list_pending()[0]
        assert row.due_at is not None
        assert before + 7200 <= row.due_at <= time.time() + 7200


def test_an_input_deadline_times_out_like_a_literal_one(shared_url: str,
                                                        tmp_path: Path) -> None:
    """A number of seconds works too; past the deadline a human answer is refused and the
    timer fails the node naming the rendered duration."""
    path = _write(tmp_path, WORKFLOW.replace("type: string, default: 3d",
                                             "type: number, default: 1"))
    with open_checkpointer(shared_url) as store:
        assert Runner(str(path), store).run({"approval_timeout": 1}).status == "paused"
        row = store.list_pending()[0]
        assert row.due_at is not None
        deadline = time.monotonic() + 60
        while time.time() < row.due_at:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        with pytest.raises(ResumeError, match="timed out at"):
            Runner(checkpointer=store).resume(row.execution_id, {"approved": True})
        results = fire_due(store)
        assert [r.status for r in results] == ["failed"]
        review = results[0].state["nodes"]["review"]
        assert review["error"]["message"] == "approval 'review' timed out after 1s"


@pytest.mark.parametrize(("value", "message"), [
    ("soon", "`soon` is not a duration"),
    ("-5m", "`-5m` is not a duration"),
])
def test_a_bad_timeout_value_fails_the_node_with_a_clear_error(
        tmp_path: Path, value: str, message: str) -> None:
    """The attacker's case: a value that is no duration does not pause forever; the node
    fails, naming the setting and the value, and nothing pends."""
    store = tether.InMemoryCheckpointer()
    result = Runner(str(_write(tmp_path, WORKFLOW)), store).run({"approval_timeout": value})
    assert result.status == "failed"
    assert result.error is not None and result.error.node_id == "review"
    assert "approval.timeout" in result.error.message and message in result.error.message
    assert store.list_pending() == []


def test_the_timeout_template_may_read_only_inputs(tmp_path: Path) -> None:
    text = WORKFLOW.replace("inputs.approval_timeout", "inputs.approval_timout").replace(
        "    needs: [review]\n",
        "    needs: [review]\n  late:\n    approval:\n"
        "      reason: again\n      timeout: \"{{ nodes.ship.output }}\"\n    needs: [ship]\n")
    found = [(d.code, d.node_id) for d in tether.check(_write(tmp_path, text))]
    assert found == [("E402", "review"), ("E414", "late")]


def test_flow_and_yaml_compile_to_one_plan(tmp_path: Path) -> None:
    yaml_path = _write(tmp_path, WORKFLOW)
    flow_path = _write(tmp_path, FLOW, "gated.flow")
    assert tether.check(flow_path) == []
    assert tether.compile(flow_path).fingerprint == tether.compile(yaml_path).fingerprint


def test_fmt_writes_a_template_timeout_that_reads_back(tmp_path: Path) -> None:
    """`tether fmt --to flow` of the YAML gives a `.flow` file with the same plan (a bare
    template would not read back: the clause takes a duration or a string)."""
    import os
    import subprocess
    import sys

    yaml_path = _write(tmp_path, WORKFLOW)
    result = subprocess.run([sys.executable, "-m", "tether", "fmt", "--to", "flow",
                             str(yaml_path)], capture_output=True, text=True, timeout=120,
                            check=False, env=dict(os.environ))
    assert result.returncode == 0, result.stderr
    assert 'timeout "{{ inputs.approval_timeout }}"' in result.stdout
    flow_path = _write(tmp_path, result.stdout, "converted.flow")
    assert tether.compile(flow_path).fingerprint == tether.compile(yaml_path).fingerprint
