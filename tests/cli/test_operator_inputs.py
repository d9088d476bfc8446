"""Values an operator gives the commands, within budgets (issue 8, item 13): `--inputs-file`
gets the workflow reader's guards, and `--input` / `--value` / `--patch` JSON that is huge or
deeply nested is a usage error (exit 2) naming the option, never an exit 3 or a hang.

Files and values small enough for a command line go through the real command in a
subprocess; values larger than Linux accepts as one argument (128 KiB) go through the same
entry point in process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tether.cli.main import main

WORKFLOW = """\
tether: 1
name: take
inputs:
  amount: {type: number}
  data: {type: object, default: {}}
nodes:
  review:
    approval: {reason: ok, context: {amount: "{{ inputs.amount }}"}}
  echo:
    needs: [review]
    task: t.echo
    with: {data: "{{ inputs.data }}"}
output:
  data: "{{ nodes.echo.output }}"
"""

TASKS = "from tether import task\n\n@task('t.echo')\ndef echo(data):\n    return data\n"

ALIAS_BOMB = "amount: 1\ndata:\n  a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"  a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 9))


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "w.yaml").write_text(WORKFLOW)
    (tmp_path / "t.py").write_text(TASKS)
    return tmp_path


def tether(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("TETHER_DB", "TETHER_DEBUG")}
    env["TETHER_DB"] = f"sqlite:///{project / 't.db'}"
    return subprocess.run([sys.executable, "-m", "tether", *args], cwd=project, env=env,
                          capture_output=True, text=True, timeout=60, check=False)


def run_with(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return tether(project, "run", "w.yaml", "--tasks", "t.py", "-q", *args)


def assert_usage_error(result: subprocess.CompletedProcess[str], option: str,
                       message: str) -> None:
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"Invalid value for {option}" in result.stderr or \
        f"Invalid value for '{option}'" in result.stderr, result.stderr
    assert message in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


INPUT_FILES = {
    "bomb.yaml": (ALIAS_BOMB.encode(), "expands to more than 100,000 values"),
    "digits.yaml": (b"amount: " + b"7" * 5000 + b"\n", "more than 4,300 digits"),
    "hexdigits.yaml": (b"amount: 0x" + b"f" * 5000 + b"\n", "more than 4,200 digits"),
    "digits.json": (b'{"amount": ' + b"7" * 5000 + b"}", "more than 4,300 digits"),
    "deep.yaml": (b"amount: 1\ndata: " + b"[" * 70 + b"]" * 70 + b"\n",
                  "nested more than 64 levels deep"),
    "deeper.yaml": (b"data: " + b"[" * 50_000 + b"]" * 50_000, "nesting depth"),
    "deep.json": (b'{"data": ' + b"[" * 50_000 + b"]" * 50_000 + b"}",
                  "nested more than 64 levels deep"),
    "utf8.yaml": (b"amount: 1\nname: \xff\xfe\n", "is not valid UTF-8 (byte 0xff at offset"),
    "nul.yaml": (b"amount: 1\x00\n", "contains a NUL character"),
    "dup.yaml": (b"amount: 1\namount: 2\n", "line 2: duplicate key 'amount'"),
    "tag.yaml": (b"amount: !!python/object/apply:os.system [true]\n", "has no JSON form"),
    "inf.yaml": (b"amount: .inf\n", ".inf is not a JSON number"),
    "list.yaml": (b"- 1\n- 2\n", "must hold a mapping of input names to values"),
    "broken.json": (b'{"amount": }', "broken.json:1:12: not valid JSON"),
    "big.yaml": (b"amount: 1\n#" + b"x" * 10_000_000 + b"\n", "the limit is 10,000,000"),
}


@pytest.mark.parametrize("name", sorted(INPUT_FILES))
def test_bad_inputs_files_are_usage_errors(project: Path, name: str) -> None:
    data, message = INPUT_FILES[name]
    (project / name).write_bytes(data)
    result = run_with(project, "--inputs-file", name)
    assert_usage_error(result, "--inputs-file", message)
    assert not (project / "t.db").exists() or "running" not in result.stderr


def test_files_that_are_not_regular_are_refused_without_reading(project: Path) -> None:
    """A link to /dev/zero and a FIFO with no writer: refused at once (a read would never
    end); a directory is refused by the option's own check."""
    (project / "zero.yaml").symlink_to("/dev/zero")
    os.mkfifo(project / "fifo.yaml")
    for name in ("zero.yaml", "fifo.yaml"):
        assert_usage_error(run_with(project, "--inputs-file", name), "--inputs-file",
                           f"{name} is not a regular file")
    (project / "folder.yaml").mkdir()
    assert run_with(project, "--inputs-file", "folder.yaml").returncode == 2


def test_good_inputs_files_in_yaml_and_json(project: Path) -> None:
    (project / "in.yaml").write_text("amount: 5\ndata: {when: 2001-12-14, list: [1, 2]}\n")
    (project / "in.json").write_text('{"amount": 5, "data": {"k": [true, null]}}')
    for name in ("in.yaml", "in.json"):
        result = run_with(project, "--inputs-file", name, "--json")
        assert result.returncode == 4, result.stderr
        assert json.loads(result.stdout)["pending_interrupt"]["context"] == {"amount": 5}


@pytest.mark.parametrize(("args", "option", "message"), [
    (["--input", "amount=" + "[" * 30_000 + "]" * 30_000], "--input amount (number)",
     "nested more than 64 levels deep"),
    (["--input", "amount=" + "9" * 5000], "--input amount (number)",
     "more than 4,300 digits"),
    (["--input", "amount=1e999"], "--input amount (number)", "too large for a JSON number"),
    (["--input", "amount=NaN"], "--input amount (number)", "NaN is not a JSON number"),
    (["--input", "data=" + '{"a":' * 65 + "1" + "}" * 65], "--input data (object)",
     "nested more than 64 levels deep"),
    (["--input", "data=\"\\udc80\""], "--input data (object)", "lone surrogate"),
    (["--input", "noequals"], "--input", "is not NAME=VALUE"),
])
def test_bad_input_values_are_usage_errors(project: Path, args: list[str], option: str,
                                           message: str) -> None:
    assert_usage_error(run_with(project, *args), option, message)


def paused_run(project: Path) -> str:
    result = run_with(project, "--input", "amount=5", "--json")
    assert result.returncode == 4, result.stderr
    return str(json.loads(result.stdout)["execution_id"])


def test_bad_resume_values_and_fork_patches_change_nothing(project: Path) -> None:
    run_id = paused_run(project)
    cases = [
        ("--value", "[" * 40_000 + "]" * 40_000, "nested more than 64 levels deep"),
        ("--value", '{"approved": ' + "1" * 4500 + "}", "more than 4,300 digits"),
        ("--value", "[1, 2]", "must be a JSON object"),
        ("--value", "{", "not valid JSON"),
        ("--patch", '{"nodes": ' + '{"a":' * 70 + "1" + "}" * 71, "nested more than 64"),
        ("--patch", '"text"', "must be a JSON object"),
    ]
    for option, value, message in cases:
        command = "resume" if option == "--value" else "fork"
        result = tether(project, command, run_id, "--tasks", "t.py", option, value)
        assert_usage_error(result, option, message)
    assert run_id in tether(project, "pending").stdout
    done = tether(project, "resume", run_id, "--tasks", "t.py", "--value", "{}")
    assert done.returncode == 0, done.stderr


def test_fork_patches_that_break_the_state_shape_are_refused_and_write_nothing(
        project: Path) -> None:
    """A patch replacing `nodes`, `inputs` or `counters` with a non-object, a node entry
    with a bad status, or a node the plan lacks: exit 2 (usage) naming the part, no branch."""
    run_id = paused_run(project)
    runs_before = tether(project, "runs", "--json").stdout
    cases = [
        ('{"nodes": null}', "'nodes' must be an object, not null"),
        ('{"inputs": [1]}', "'inputs' must be an object, not an array"),
        ('{"counters": {"x": "y"}}', "'counters.x' must be a whole number"),
        ('{"nodes": {"review": 3}}', "'nodes.review' must be an object, not a number"),
        ('{"nodes": {"review": {"status": "done"}}}', "'nodes.review.status' must be one of"),
        ('{"nodes": {"nope": {}}}', "'nodes' has no node 'nope' in this plan"),
    ]
    for patch, message in cases:
        result = tether(project, "fork", run_id, "--tasks", "t.py", "--patch", patch)
        assert result.returncode == 2, (patch, result.stderr)
        assert "Traceback" not in result.stderr and "internal error" not in result.stderr
        assert f"cannot fork run {run_id}" in result.stderr and message in result.stderr, \
            result.stderr
    assert tether(project, "runs", "--json").stdout == runs_before


def test_a_resume_value_may_name_any_field(project: Path) -> None:
    """Keys such as `self` are answers like any other (not Python keywords of Resume)."""
    run_id = paused_run(project)
    done = tether(project, "resume", run_id, "--tasks", "t.py", "--json",
                  "--value", '{"self": 1, "values": 2, "approved": true}')
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["status"] == "completed"


def test_values_too_large_for_a_command_line_are_refused_in_process(
        project: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Over 1,000,000 characters (possible in process, or through xargs-free wrappers):
    exit 2 before parsing; 200,000 levels of nesting: exit 2, no RecursionError."""
    monkeypatch.chdir(project)
    db = ["--db", f"sqlite:///{project / 't.db'}"]
    huge = '{"approved": "' + "x" * 1_000_001 + '"}'
    deep = "[" * 200_000 + "]" * 200_000
    wide = "[" + ",".join(["0"] * 100_001) + "]"
    for args, message in (
            (["run", "w.yaml", "--tasks", "t.py", "--input", "data=" + wide],
             "holds more than 100,000 values"),
            (["run", "w.yaml", "--tasks", "t.py", "--input", "data=" + huge], "the limit is"),
            (["run", "w.yaml", "--tasks", "t.py", "--input", "data=" + deep], "nested more"),
            (["resume", "some-id", "--value", huge], "the limit is 1,000,000"),
            (["fork", "some-id", "--patch", deep], "nested more than 64 levels deep")):
        assert main([*args, *db, "-q"]) == 2
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err
