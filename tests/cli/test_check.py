"""`tether check`: exact output, exit codes, formats, task modules, discovery, pre-commit."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from tether.cli.main import cli

REPO = Path(__file__).resolve().parents[2]

BROKEN = """\
tether: 1
name: refund
inputs:
  amount: {type: number}
nodes:
  a:
    task: billing.lookup
    with: {x: "{{ inputs.amout }}"}
  b:
    task: billing.refund
    needs: [a]
    retry: {max_attempts: 3}
    with: {amount: "{{ inputs.amount }}"}
"""

BROKEN_TEXT = """\
broken.yaml:8:19: error[E402]: unknown input `amout`
  |
8 |     with: {x: "{{ inputs.amout }}"}
  |                   ^^^^^^^^^^^^
  = help: did you mean `amount`?

broken.yaml:12:5: warning[W100]: node `b` retries task `billing.refund`, which is not marked \
idempotent
   |
12 |     retry: {max_attempts: 3}
   |     ^^^^^
   = help: add `idempotent: true` so a retry cannot repeat a committed side effect, or \
`idempotent: false` if repeating it is safe

found 1 error and 1 warning in 1 file
"""

CLEAN = """\
tether: 1
name: clean
inputs:
  account: {type: string}
nodes:
  lookup:
    task: billing.lookup
    with: {account: "{{ inputs.account }}"}
"""

WARNS = """\
tether: 1
name: warns
nodes:
  pay:
    task: billing.pay
    retry: {max_attempts: 2}
"""

CYCLE = """\
tether: 1
name: cyc
nodes:
  a:
    task: t.a
    needs: [b]
  b:
    task: t.b
    needs: [a]
"""

NOT_A_WORKFLOW = "version: 2\nservices: {}\n"

TASKS_MODULE = """\
from tether.runtime.registry import task

@task("billing.lookup")
def lookup(account: str) -> dict:
    return {}
"""


def tether(*args: str, cwd: Path, env: dict[str, str] | None = None
           ) -> subprocess.CompletedProcess[str]:
    """Run the real command line in a fresh interpreter."""
    environment = {k: v for k, v in os.environ.items() if k not in ("TETHER_DEBUG", "NO_COLOR")}
    environment.update(env or {})
    return subprocess.run([sys.executable, "-m", "tether", *args], cwd=cwd, env=environment,
                          capture_output=True, text=True, check=False, timeout=120)


def write(directory: Path, name: str, text: str) -> Path:
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory (with no pyproject.toml above it that configures tasks)."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


# --------------------------------------------------------------------------- text, exit codes


def test_errors_print_exact_text_and_exit_1(project: Path) -> None:
    write(project, "broken.yaml", BROKEN)
    result = tether("check", "broken.yaml", cwd=project)
    assert (result.returncode, result.stdout, result.stderr) == (1, BROKEN_TEXT, "")


def test_clean_file_exits_0_with_a_note_on_stderr(project: Path) -> None:
    write(project, "clean.yaml", CLEAN)
    result = tether("check", "clean.yaml", cwd=project)
    assert (result.returncode, result.stdout) == (0, "")
    assert result.stderr == "checked 1 file: no problems\n"


def test_warnings_pass_unless_strict(project: Path) -> None:
    write(project, "warns.yaml", WARNS)
    runner = CliRunner()
    relaxed = runner.invoke(cli, ["check", "warns.yaml"])
    strict = runner.invoke(cli, ["check", "--strict", "warns.yaml"])
    assert relaxed.exit_code == 0 and "warning[W100]" in relaxed.output
    assert strict.exit_code == 1 and strict.output == relaxed.output


def test_cycle_lists_every_edge_as_a_note(project: Path) -> None:
    write(project, "cyc.yaml", CYCLE)
    result = CliRunner().invoke(cli, ["check", "cyc.yaml"])
    assert result.exit_code == 1
    assert result.output.splitlines()[:7] == [
        "cyc.yaml:4:3: error[E302]: dependency cycle: a -> b -> a",
        "  |",
        "4 |   a:",
        "  |   ^",
        "  = note: cyc.yaml:9:13: `b` needs `a`",
        "  = note: cyc.yaml:6:13: `a` needs `b`",
        "  = help: `needs` must not loop; to repeat nodes, declare a bounded `loop:` on the "
        "node that closes the cycle",
    ]


def test_nonexistent_path_is_a_usage_error(project: Path) -> None:
    result = tether("check", "nope.yaml", cwd=project)
    assert result.returncode == 2
    assert "Path 'nope.yaml' does not exist" in result.stderr
    assert "Traceback" not in result.stderr


def test_no_path_is_a_usage_error(project: Path) -> None:
    assert CliRunner().invoke(cli, ["check"]).exit_code == 2


def test_unknown_format_is_a_usage_error(project: Path) -> None:
    write(project, "clean.yaml", CLEAN)
    assert CliRunner().invoke(cli, ["check", "--format", "xml", "clean.yaml"]).exit_code == 2


# --------------------------------------------------------------------------- discovery


def test_directories_are_searched_for_workflows(project: Path) -> None:
    write(project, "flows/clean.yaml", CLEAN)
    write(project, "flows/sub/broken.yml", BROKEN.replace("broken", "b2"))
    write(project, "flows/compose.yaml", NOT_A_WORKFLOW)
    write(project, "flows/.hidden/cyc.yaml", CYCLE)
    result = CliRunner().invoke(cli, ["check", "--format", "json", "flows"])
    data = json.loads(result.output)
    assert result.exit_code == 1
    assert data["summary"] == {"errors": 1, "warnings": 1, "files": 2}
    assert {d["file"] for d in data["diagnostics"]} == {os.path.join("flows", "sub", "broken.yml")}


def test_directory_without_workflows_is_an_error(project: Path) -> None:
    write(project, "empty/compose.yaml", NOT_A_WORKFLOW)
    result = tether("check", "empty", cwd=project)
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == "error: no workflow files found in empty\n"


def test_summary_counts_files_checked(project: Path) -> None:
    write(project, "a.yaml", BROKEN)
    write(project, "b.yaml", CLEAN)
    result = CliRunner().invoke(cli, ["check", "a.yaml", "b.yaml"])
    assert result.output.endswith("\nfound 1 error and 1 warning in 1 file (2 files checked)\n")


def test_non_workflow_yaml_named_explicitly_is_checked(project: Path) -> None:
    write(project, "compose.yaml", NOT_A_WORKFLOW)
    result = CliRunner().invoke(cli, ["check", "compose.yaml"])
    assert result.exit_code == 1 and "compose.yaml:1:1: error[" in result.output


def test_skip_non_workflows_skips_them_silently(project: Path) -> None:
    write(project, "compose.yaml", NOT_A_WORKFLOW)
    write(project, "clean.yaml", CLEAN)
    runner = CliRunner()
    only = runner.invoke(cli, ["check", "--skip-non-workflows", "compose.yaml"])
    both = runner.invoke(cli, ["check", "--skip-non-workflows", "compose.yaml", "clean.yaml"])
    assert (only.exit_code, only.output) == (0, "")
    assert both.exit_code == 0 and "checked 1 file: no problems" in both.output


def test_flow_files_are_checked(project: Path) -> None:
    pytest.importorskip("tether.dsl.flow_reader")
    write(project, "w.flow", "workflow w\ntask a = t.a()\ntask a = t.b()\n")
    result = CliRunner().invoke(cli, ["check", "--format", "json", "w.flow"])
    assert result.exit_code == 1
    assert "E300" in {d["code"] for d in json.loads(result.output)["diagnostics"]}


# --------------------------------------------------------------------------- formats


def test_json_format(project: Path) -> None:
    write(project, "broken.yaml", BROKEN)
    result = CliRunner().invoke(cli, ["check", "--format", "json", "broken.yaml"])
    data = json.loads(result.output)
    assert result.exit_code == 1
    assert [d["code"] for d in data["diagnostics"]] == ["E402", "W100"]
    assert data["diagnostics"][0]["node_id"] == "a"


def test_json_format_when_clean_still_prints_a_document(project: Path) -> None:
    write(project, "clean.yaml", CLEAN)
    result = tether("check", "--format", "json", "clean.yaml", cwd=project)
    assert result.returncode == 0
    assert json.loads(result.stdout)["summary"] == {"errors": 0, "warnings": 0, "files": 1}


def test_sarif_format(project: Path) -> None:
    write(project, "broken.yaml", BROKEN)
    result = CliRunner().invoke(cli, ["check", "--format", "sarif", "broken.yaml"])
    log = json.loads(result.output)
    (run,) = log["runs"]
    assert result.exit_code == 1 and log["version"] == "2.1.0"
    assert [r["ruleId"] for r in run["results"]] == ["E402", "W100"]
    location = run["results"][0]["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"] == "broken.yaml"


def test_github_format(project: Path) -> None:
    write(project, "broken.yaml", BROKEN)
    result = tether("check", "--format", "github", "broken.yaml", cwd=project)
    assert result.returncode == 1
    assert result.stdout.splitlines()[0] == (
        "::error file=broken.yaml,line=8,col=19,endLine=8,endColumn=30,title=E402::"
        "unknown input `amout`%0Ahelp: did you mean `amount`?"
    )
    assert result.stdout.splitlines()[1].startswith("::warning file=broken.yaml,line=12,")
    assert result.stderr == "found 1 error and 1 warning in 1 file\n"


@pytest.mark.parametrize(("choice", "colored"), [("always", True), ("never", False),
                                                 ("auto", False)])
def test_color_choice(project: Path, choice: str, colored: bool) -> None:
    write(project, "broken.yaml", BROKEN)
    result = CliRunner().invoke(cli, ["check", "--color", choice, "broken.yaml"])
    assert ("\x1b[" in result.output) is colored


# --------------------------------------------------------------------------- task modules


def test_tasks_option_checks_task_names(project: Path) -> None:
    write(project, "mytasks.py", TASKS_MODULE)
    write(project, "clean.yaml", CLEAN.replace("billing.lookup", "billing.lookpu"))
    result = tether("check", "--tasks", "mytasks.py", "clean.yaml", cwd=project)
    assert result.returncode == 1
    assert "error[E600]: unknown task `billing.lookpu`" in result.stdout
    assert "did you mean `billing.lookup`?" in result.stdout


def test_tasks_option_accepts_dotted_module_names(project: Path) -> None:
    write(project, "mytasks.py", TASKS_MODULE)
    write(project, "clean.yaml", CLEAN)
    result = tether("check", "--tasks", "mytasks", "clean.yaml", cwd=project)
    assert result.returncode == 0, result.stdout + result.stderr


def test_without_task_modules_no_task_is_checked(project: Path) -> None:
    write(project, "clean.yaml", CLEAN.replace("billing.lookup", "no.such.task"))
    assert tether("check", "clean.yaml", cwd=project).returncode == 0


def test_a_task_module_that_fails_to_import_is_one_clean_line(project: Path) -> None:
    write(project, "bad.py", "raise ValueError('boom')\n")
    write(project, "clean.yaml", CLEAN)
    result = tether("check", "--tasks", "bad.py", "clean.yaml", cwd=project)
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == (
        "error[E603]: cannot import task module 'bad.py': ValueError: boom\n"
    )


def test_pyproject_tasks_are_relative_to_the_pyproject(project: Path) -> None:
    """With --import-tasks, the pyproject's modules are found relative to it."""
    write(project, "pyproject.toml", '[tool.tether]\ntasks = ["lib/mytasks.py"]\n')
    write(project, "lib/mytasks.py", TASKS_MODULE)
    write(project, "flows/w.yaml", CLEAN.replace("billing.lookup", "billing.nope"))
    result = tether("check", "--import-tasks", "w.yaml", cwd=project / "flows")
    assert result.returncode == 1
    assert "error[E600]: unknown task `billing.nope`" in result.stdout


def test_check_ignores_pyproject_tasks_unless_asked(project: Path) -> None:
    """No flag: the pyproject's task list is not read; --import-tasks reads it; --tasks adds
    modules of its own."""
    write(project, "pyproject.toml", '[tool.tether]\ntasks = ["missing_module"]\n')
    write(project, "mytasks.py", TASKS_MODULE)
    write(project, "w.yaml", CLEAN)
    assert tether("check", "w.yaml", cwd=project).returncode == 0
    assert tether("check", "--tasks", "mytasks.py", "w.yaml", cwd=project).returncode == 0
    failing = tether("check", "--import-tasks", "w.yaml", cwd=project)
    assert failing.returncode == 1
    assert failing.stderr.startswith("error[E603]: cannot import task module 'missing_module'")


def test_broken_pyproject_is_one_clean_line(project: Path) -> None:
    """A pyproject that is not TOML: ignored by a plain check, one line with --import-tasks."""
    write(project, "pyproject.toml", "[tool.tether\n")
    write(project, "w.yaml", CLEAN)
    assert tether("check", "w.yaml", cwd=project).returncode == 0
    result = tether("check", "--import-tasks", "w.yaml", cwd=project)
    assert result.returncode == 1
    assert result.stderr.startswith("error: cannot read ") and "Traceback" not in result.stderr


def test_import_tasks_without_a_task_list_is_a_usage_error(project: Path) -> None:
    write(project, "w.yaml", CLEAN)
    result = tether("check", "--import-tasks", "w.yaml", cwd=project)
    assert result.returncode == 2
    assert "--import-tasks: no pyproject.toml found, so there is no [tool.tether] tasks" \
        in result.stderr
    write(project, "pyproject.toml", "[project]\nname = 'x'\n")
    result = tether("compile", "--import-tasks", "w.yaml", cwd=project)
    assert result.returncode == 2
    assert "pyproject.toml has no [tool.tether] tasks to import" in result.stderr


EVIL_TASKS = TASKS_MODULE + """\
from pathlib import Path
Path(__file__).with_name("IMPORTED").write_text("user code ran")
"""


@pytest.mark.parametrize("command", [
    ["check", "flows/w.yaml"], ["check", "flows"], ["compile", "flows/w.yaml"],
    ["graph", "flows/w.yaml"], ["fmt", "flows/w.yaml"], ["schema"],
    ["check", "--skip-non-workflows", "flows/w.yaml"],
], ids=" ".join)
def test_authoring_commands_never_import_the_pyproject_task_modules(
        project: Path, command: list[str]) -> None:
    """A pull request's pyproject.toml names a module that would write a marker file: no
    authoring command imports it (run from the project and from a subdirectory)."""
    write(project, "pyproject.toml", '[tool.tether]\ntasks = ["evil.py"]\n')
    write(project, "evil.py", EVIL_TASKS)
    write(project, "flows/w.yaml", CLEAN)
    for cwd, prefix in ((project, ""), (project / "flows", "../")):
        args = [prefix + a if a.startswith("flows") else a for a in command]
        result = tether(*args, cwd=cwd)
        assert result.returncode == 0, result.stderr
        assert not (project / "IMPORTED").exists()


def test_import_tasks_does_import_the_pyproject_task_modules(project: Path) -> None:
    """The marker test above can fail: with --import-tasks the module runs."""
    write(project, "pyproject.toml", '[tool.tether]\ntasks = ["evil.py"]\n')
    write(project, "evil.py", EVIL_TASKS)
    write(project, "w.yaml", CLEAN)
    assert tether("compile", "--import-tasks", "w.yaml", cwd=project).returncode == 0
    assert (project / "IMPORTED").read_text() == "user code ran"


def test_help_says_which_commands_run_user_code(project: Path) -> None:
    """check/compile: nothing without --tasks/--import-tasks; run/resume/fork: say they
    read pyproject.toml."""
    runner = CliRunner()
    for command in ("check", "compile"):
        help_text = " ".join(runner.invoke(cli, [command, "--help"]).output.split())
        assert "No user code is imported unless --tasks or --import-tasks" in help_text
        assert "--import-tasks" in help_text
    for command in ("run", "resume", "fork"):
        help_text = " ".join(runner.invoke(cli, [command, "--help"]).output.split())
        assert "[tool.tether] tasks in the nearest pyproject.toml" in help_text
        assert "Running user code is this command's job" in help_text


# --------------------------------------------------------------------------- pre-commit


def test_pre_commit_hook_definition() -> None:
    (hook,) = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))
    assert hook["id"] == "tether-check"
    assert hook["entry"] == "tether check --skip-non-workflows"
    assert (hook["language"], hook["pass_filenames"]) == ("python", True)
    pattern = re.compile(hook["files"])
    assert all(pattern.search(n) for n in ("a.yaml", "b/c.yml", "d.flow"))
    assert not any(pattern.search(n) for n in ("a.json", "yaml.txt", "a.yaml.bak"))


def test_pre_commit_style_run_over_mixed_files(project: Path) -> None:
    write(project, ".github/workflows/ci.yml", "on: push\njobs: {}\n")
    write(project, "flows/broken.yaml", BROKEN)
    args = ["check", "--skip-non-workflows", ".github/workflows/ci.yml", "flows/broken.yaml"]
    result = tether(*args, cwd=project)
    assert result.returncode == 1
    assert "ci.yml" not in result.stdout
    assert result.stdout.startswith(os.path.join("flows", "broken.yaml") + ":8:19: error[E402]")
