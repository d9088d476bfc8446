"""No operator input makes a command exit 3, print a traceback or hang (issue 8).

The operator commands' inputs are fuzzed with hypothesis, as tests/compiler/test_fuzz.py
fuzzes the workflow reader: `--input` values, `--inputs-file` contents, `--value`, `--patch`,
execution and checkpoint ids (control characters, markup, `$(...)`, NUL, lone surrogates,
very long strings). Examples go through the real entry point, ``tether.cli.main.main``, in
process against a real SQLite file (bounded examples; pytest-timeout bounds a hang); a few
extreme ones also go through a subprocess.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tether.cli.main import main

FUZZ = settings(max_examples=60, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])
CLEAN_EXITS = {0, 1, 2, 4}

WORKFLOW = """\
tether: 1
name: fuzz
inputs:
  amount: {type: number}
  note: {type: string, default: ""}
  data: {type: object, default: {}}
nodes:
  review:
    approval:
      reason: check
      context: {amount: "{{ inputs.amount }}", note: "{{ inputs.note }}"}
      form: {approved: {type: boolean}}
  echo:
    needs: [review]
    task: fz.echo
    with: {data: "{{ inputs.data }}", note: "{{ inputs.note }}"}
output:
  echo: "{{ nodes.echo.output }}"
"""

TASKS = """\
from tether import task

@task("fz.echo")
def echo(data, note):
    return {"data": data, "note": note}
"""

nasty_text = st.one_of(
    st.text(max_size=60),
    st.sampled_from([
        "", "[/]", "[/docs]", "[link=https://evil.example]x[/link]", "$(touch PWNED)",
        "`id`", "'; DROP TABLE runs; --", "\x1b[31mred", "a\nb", "\x00", "\ud800",
        "\u202eevil", "x" * 5000, "9" * 5000, "[" * 3000, "{" * 70, "\r\n\t", "-" * 3,
        "--help", "-q",
    ]),
)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=8) | st.sampled_from(
        ["self", "approved", "values", "__class__", "nodes", "inputs"]), children, max_size=4),
    max_leaves=15,
)
json_text = st.one_of(json_values.map(json.dumps), nasty_text,
                      st.integers(1, 200).map(lambda n: "[" * n + "]" * n),
                      st.integers(1, 200).map(lambda n: '{"a":' * n + "1" + "}" * n))


@pytest.fixture(scope="module")
def tasks_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One task module for the whole module: in process, a task registers once."""
    path = tmp_path_factory.mktemp("tasks") / "fz_tasks.py"
    path.write_text(TASKS)
    return path


@pytest.fixture
def project(tmp_path: Path, tasks_file: Path) -> Iterator[Path]:
    (tmp_path / "w.yaml").write_text(WORKFLOW)
    (tmp_path / "fz_tasks.py").symlink_to(tasks_file)
    cwd = Path.cwd()
    os.chdir(tmp_path)
    yield tmp_path
    os.chdir(cwd)


def tether(project: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    """Run the command in process; return its exit code and everything it printed."""
    code = main([*args, "--db", f"sqlite:///{project / 'f.db'}"])
    out = capsys.readouterr()
    both = out.out + out.err
    assert code in CLEAN_EXITS, both
    assert "Traceback" not in both and "internal error" not in both, both
    return code, both


def start(project: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str]:
    return tether(project, capsys, "run", "w.yaml", "--tasks", "fz_tasks.py", "-q", *extra)


def paused(project: Path, capsys: pytest.CaptureFixture[str]) -> str:
    code, out = start(project, capsys, "--input", "amount=1", "--json")
    assert code == 4, out
    return str(json.loads(out)["execution_id"])


@FUZZ
@given(amount=json_text, note=nasty_text, data=json_text, execution_id=nasty_text)
def test_fuzzed_inputs_and_ids_to_run(project: Path, capsys: pytest.CaptureFixture[str],
                                      amount: str, note: str, data: str,
                                      execution_id: str) -> None:
    code, _ = start(project, capsys, "--input", f"amount={amount}", "--input", f"note={note}",
                    "--input", f"data={data}", "--execution-id", execution_id)
    if code == 4:  # a run was made: list it among the others, and show it
        tether(project, capsys, "runs")
        tether(project, capsys, "pending")
        tether(project, capsys, "show", execution_id)


@FUZZ
@given(content=st.one_of(st.binary(max_size=400), json_values.map(
    lambda v: json.dumps({"amount": 1, "data": v}).encode()), nasty_text.map(
    lambda t: f"amount: 1\nnote: {t}\n".encode(errors="surrogatepass"))),
    suffix=st.sampled_from([".yaml", ".json", ".yml", ".txt"]))
def test_fuzzed_inputs_files(project: Path, capsys: pytest.CaptureFixture[str],
                             content: bytes, suffix: str) -> None:
    path = project / f"inputs{suffix}"
    path.write_bytes(content)
    start(project, capsys, "--inputs-file", str(path))


@FUZZ
@given(value=json_text, patch=json_text, other_id=nasty_text, checkpoint=nasty_text)
def test_fuzzed_values_patches_and_ids_to_resume_fork_and_show(
        project: Path, capsys: pytest.CaptureFixture[str], value: str, patch: str,
        other_id: str, checkpoint: str) -> None:
    run_id = paused(project, capsys)
    tether(project, capsys, "resume", run_id, "--tasks", "fz_tasks.py", "-q",
           "--value", value)
    tether(project, capsys, "fork", run_id, "--tasks", "fz_tasks.py", "-q",
           "--patch", patch)
    tether(project, capsys, "fork", run_id, "--tasks", "fz_tasks.py", "-q",
           "--checkpoint", checkpoint)
    for command in (["resume", other_id, "--tasks", "fz_tasks.py", "-q"], ["show", other_id],
                    ["show", run_id, "--after", checkpoint], ["fork", other_id, "-q"]):
        tether(project, capsys, *command)
    tether(project, capsys, "runs")
    tether(project, capsys, "pending")


@pytest.mark.parametrize("execution_id", [
    "$(touch PWNED)", "[/]", "a\x1b[2Jb", "line\nbreak", "x" * 100_000, "\u202e", "--",
])
def test_extreme_ids_through_the_real_command(tmp_path: Path, execution_id: str) -> None:
    """In a subprocess: a clean exit (2 for ids no run may have), no traceback."""
    (tmp_path / "w.yaml").write_text(WORKFLOW)
    (tmp_path / "fz_tasks.py").write_text(TASKS)
    env = {k: v for k, v in os.environ.items() if k not in ("TETHER_DB", "TETHER_DEBUG")}
    for args in (["run", "w.yaml", "--tasks", "fz_tasks.py", "--input", "amount=1",
                  "--execution-id", execution_id], ["show", execution_id]):
        result = subprocess.run([sys.executable, "-m", "tether", *args, "--db",
                                 f"sqlite:///{tmp_path / 'f.db'}"], cwd=tmp_path, env=env,
                                capture_output=True, text=True, timeout=60, check=False)
        assert result.returncode in CLEAN_EXITS, result.stderr
        assert "Traceback" not in result.stderr + result.stdout
    assert not (tmp_path / "PWNED").exists()
