"""Results and node outputs have a size cap, ``max_value_bytes`` (issue 22): on every
backend, a task returning more bytes of JSON than the cap fails its node with
``ValueTooLarge`` (naming the node, the size and the limit), nothing that large is stored,
and the run's result is capped alike. The attacker's value is a real 100 MB string against
the default 16 MB cap, through the real ``tether run`` command."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conformance_helpers import write_workflow

import tether
from tether.errors import ValueTooLarge
from tether.runtime.values import MAX_VALUE_BYTES, check_size
from tether.stores.base import Checkpointer

FLOW = """
tether: 1
name: capped
inputs:
  n: {type: integer}
  char: {type: string, default: x}
nodes:
  big:
    task: t.big
    with: {n: "{{ inputs.n }}", char: "{{ inputs.char }}"}
  after:
    needs: [big]
    task: t.small
output:
  size: "{{ nodes.big.output | length }}"
"""
OUTPUT = """
tether: 1
name: capped_output
inputs:
  n: {type: integer}
nodes:
  small:
    task: t.small
output:
  echo: "{{ 'y' * inputs.n }}"
"""
TASKS = {"t.big": lambda n, char: char * n, "t.small": lambda: {"ok": True}}


def _stored_sizes(store: Checkpointer, execution_id: str) -> list[int]:
    return [len(row.node_output or "") for row in store.rows(execution_id)]


@pytest.mark.parametrize(("n", "char", "fails"), [
    (998, "x", False), (999, "x", True), (499, "é", False), (500, "é", True), (2, "😀" * 249, True),
    (2, "😀" * 124, False),
])
def test_an_output_over_the_cap_fails_its_node_and_is_never_stored(
        store: Checkpointer, tmp_path: Path, n: int, char: str, fails: bool) -> None:
    """The cap counts UTF-8 bytes of the JSON text (quotes included): 998 x's are 1,000
    bytes and pass; 999 fail; 499 é are 998 bytes + 2 quotes (pass), 500 are 1,002."""
    runner = tether.Runner(write_workflow(tmp_path, FLOW), store, tasks=TASKS,
                           max_value_bytes=1000)
    result = runner.run({"n": n, "char": char})
    if not fails:
        assert result.status == "completed", result
        return
    assert result.status == "failed"
    error = result.state["nodes"]["big"]["error"]
    assert error["type"] == "ValueTooLarge" and error["node_id"] == "big"
    size = len(("\"" + char * n + "\"").encode())
    assert error["message"].startswith(f"the output of node 'big' is {size:,} bytes of JSON, "
                                       "more than max_value_bytes (1,000)")
    assert result.state["nodes"]["after"]["status"] != "completed"
    assert max(_stored_sizes(store, result.execution_id)) < 1000


def test_the_workflows_output_is_capped_too(store: Checkpointer, tmp_path: Path) -> None:
    runner = tether.Runner(write_workflow(tmp_path, OUTPUT), store, tasks=TASKS,
                           max_value_bytes=500)
    result = runner.run({"n": 600})
    assert result.status == "failed"
    assert "the workflow's output is " in str(result.state.get("error") or result)
    assert max(_stored_sizes(store, result.execution_id)) < 500
    assert runner.run({"n": 10}).status == "completed"


FANNED = """
tether: 1
name: fanned
nodes:
  each:
    task: t.big
    for_each: "{{ range(8) | list }}"
    with: {n: 200, char: x}
"""


def test_a_for_each_whose_list_is_over_the_cap_fails_though_each_element_fits(
        store: Checkpointer, tmp_path: Path) -> None:
    runner = tether.Runner(write_workflow(tmp_path, FANNED), store, tasks=TASKS,
                           max_value_bytes=1000)
    result = runner.run()
    assert result.status == "failed"
    error = result.state["nodes"]["each"]["error"]
    assert error["type"] == "ValueTooLarge" and "node 'each' is 1,625 bytes" in error["message"]


def test_check_size_measures_bytes_only_near_the_limit() -> None:
    check_size("x" * 250, 1000, "n")  # a quarter of the limit: never measured
    check_size("é" * 500, 1000, "n")
    with pytest.raises(ValueTooLarge) as raised:
        check_size("é" * 501, 1000, "n")
    assert (raised.value.node_id, raised.value.size, raised.value.limit) == ("n", 1002, 1000)
    assert MAX_VALUE_BYTES == 16 * 1024 * 1024


def test_a_bad_setting_is_refused(tmp_path: Path) -> None:
    for bad in (0, -1, True, 1.5):
        with pytest.raises(ValueError, match="max_value_bytes must be a positive integer"):
            tether.Runner(None, None, {}, max_value_bytes=bad)  # type: ignore[arg-type]


def test_a_100_mb_result_fails_against_the_default_cap_through_the_command(
        tmp_path: Path) -> None:
    """The red team's case: `tether run` of a task returning 100 MB; the run fails naming
    the node and the default limit, the store file stays small; TETHER_MAX_VALUE_BYTES
    changes the limit and a value that is not a number is a clean error."""
    write_workflow(tmp_path, FLOW)
    (tmp_path / "cap_tasks.py").write_text(
        "from tether import task\n\n@task('t.big')\ndef big(n: int, char: str) -> str:\n"
        "    return char * n\n\n@task('t.small')\ndef small() -> dict:\n"
        "    return {'ok': True}\n")
    env = {k: v for k, v in os.environ.items() if k not in ("TETHER_DB",
                                                            "TETHER_MAX_VALUE_BYTES")}

    def run(n: int, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "tether", "run", "wf.yaml", "--tasks",
                               "cap_tasks.py", "-q", "-i", f"n={n}", "--db",
                               f"sqlite:///{tmp_path / 'c.db'}"], cwd=tmp_path,
                              env={**env, **extra}, capture_output=True, text=True,
                              timeout=300, check=False)

    huge = run(100 * 1024 * 1024)
    assert huge.returncode == 1, huge.stderr
    assert "ValueTooLarge: the output of node 'big' is 104,857,602 bytes of JSON, more " \
        "than max_value_bytes (16,777,216)" in huge.stdout + huge.stderr
    assert (tmp_path / "c.db").stat().st_size < 5 * 1024 * 1024
    small = run(5000, TETHER_MAX_VALUE_BYTES="4096")
    assert small.returncode == 1 and "max_value_bytes (4,096)" in small.stdout + small.stderr
    bad = run(5, TETHER_MAX_VALUE_BYTES="lots")
    assert bad.returncode not in (0, 3) and "Traceback" not in bad.stderr
    assert "TETHER_MAX_VALUE_BYTES must be a positive whole number of bytes" in bad.stderr
