"""The other authoring commands (compile, graph, schema, fmt, explain, --version) and the
error mapping of `tether.cli.main`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from importlib.metadata import version
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from tether.cli import main as main_module
from tether.cli.main import cli, handle_error, main, register_commands
from tether.compiler import compile
from tether.diagnostics import CODES, Span, make
from tether.errors import PlanError, TetherError, WorkflowError

CLEAN = """\
tether: 1
name: clean
inputs:
  account: {type: string}
nodes:
  lookup:
    task: billing.lookup
    with: {account: "{{ inputs.account }}"}
  review:
    needs: [lookup]
    approval: {reason: check}
"""

BROKEN = """\
tether: 1
name: broken
nodes:
  a:
    task: t.a
    needs: [b]
"""

BROKEN_TEXT = """\
broken.yaml:6:13: error[E301]: node `a` needs `b`, which does not exist
  |
6 |     needs: [b]
  |             ^

found 1 error in 1 file
"""


def tether(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k != "TETHER_DEBUG"}
    return subprocess.run([sys.executable, "-m", "tether", *args], cwd=cwd, env=environment,
                          capture_output=True, text=True, check=False, timeout=120)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "clean.yaml").write_text(CLEAN, encoding="utf-8")
    (tmp_path / "broken.yaml").write_text(BROKEN, encoding="utf-8")
    return tmp_path


# --------------------------------------------------------------------------- the group


def test_version_comes_from_the_package_metadata(tmp_path: Path) -> None:
    result = tether("--version", cwd=tmp_path)
    assert (result.returncode, result.stdout) == (0, f"tether {version('tether')}\n")


def test_help_lists_every_authoring_command(tmp_path: Path) -> None:
    result = tether("--help", cwd=tmp_path)
    assert result.returncode == 0 and result.stdout.startswith("Usage: tether ")
    for name in ("check", "compile", "graph", "schema", "fmt", "explain"):
        assert f"  {name} " in result.stdout


def test_unknown_command_is_a_usage_error(tmp_path: Path) -> None:
    result = tether("chekc", cwd=tmp_path)
    assert result.returncode == 2 and "No such command 'chekc'" in result.stderr


def test_importing_the_cli_defers_the_heavy_modules() -> None:
    code = ("import sys, tether.cli.main; print([m for m in ('tether.diagnostics.render', "
            "'tether.compiler.graph_render', 'tether.dsl.convert') if m in sys.modules])")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    assert result.stdout == "[]\n"


def test_command_modules_register_on_the_group(monkeypatch: pytest.MonkeyPatch) -> None:
    """How the operator commands will plug in: a module with ``register(group)``."""
    module = types.ModuleType("tether_test_extra_commands")

    def register(group: click.Group) -> None:
        group.add_command(click.Command("hello", callback=lambda: click.echo("hi")))

    module.register = register  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, module.__name__, module)
    group = click.Group("tether")
    register_commands(group, ["tether.cli.authoring", module.__name__])
    assert {"check", "explain", "hello"} <= set(group.commands)
    assert CliRunner().invoke(group, ["hello"]).output == "hi\n"
    assert "tether.cli.authoring" in main_module.COMMAND_MODULES


# --------------------------------------------------------------------------- error mapping


def test_internal_errors_exit_3_with_one_line(capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TETHER_DEBUG", raising=False)
    assert handle_error(RuntimeError("boom")) == 3
    assert capsys.readouterr().err == (
        "internal error: RuntimeError: boom (set TETHER_DEBUG=1 for a traceback)\n"
    )


def test_tether_debug_shows_the_traceback(capsys: pytest.CaptureFixture[str],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TETHER_DEBUG", "1")
    try:
        raise RuntimeError("boom")
    except RuntimeError as exc:
        code = handle_error(exc)
    err = capsys.readouterr().err
    assert code == 3
    assert err.startswith("Traceback (most recent call last):")
    assert err.endswith("internal error: RuntimeError: boom\n")


def test_library_errors_exit_1_with_one_clean_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert handle_error(PlanError("not a tether plan")) == 1
    assert handle_error(TetherError("something")) == 1
    assert capsys.readouterr().err == "error: not a tether plan\nerror: something\n"


def test_workflow_errors_print_their_diagnostics(capsys: pytest.CaptureFixture[str]) -> None:
    diag = make("E301", "node `a` needs `b`, which does not exist", Span("nowhere.yaml", 6, 13))
    assert handle_error(WorkflowError([diag])) == 1
    assert capsys.readouterr().err == (
        "nowhere.yaml:6:13: error[E301]: node `a` needs `b`, which does not exist\n"
        "found 1 error in 1 file\n"
    )


def test_usage_interrupt_and_exit_mapping(capsys: pytest.CaptureFixture[str]) -> None:
    assert handle_error(click.UsageError("bad")) == 2
    assert handle_error(KeyboardInterrupt()) == 130
    abort = click.Abort()
    abort.__cause__ = KeyboardInterrupt()
    assert handle_error(abort) == 130
    assert handle_error(SystemExit(4)) == 4
    assert handle_error(SystemExit(None)) == 0
    assert handle_error(click.exceptions.Exit(5)) == 5
    assert "Error: bad" in capsys.readouterr().err


def test_main_returns_the_exit_code(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "E302"]) == 0
    assert main(["explain", "nope"]) == 2
    assert main(["check", "missing.yaml"]) == 2
    assert main(["check", "broken.yaml"]) == 1
    assert main(["check", "clean.yaml"]) == 0
    assert main(["--help"]) == 0
    capsys.readouterr()


def test_main_maps_a_library_error_raised_in_a_command(
        project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "empty").mkdir()
    assert main(["check", "empty"]) == 1
    assert capsys.readouterr().err == "error: no workflow files found in empty\n"


# --------------------------------------------------------------------------- compile


def test_compile_writes_the_plan_json(project: Path) -> None:
    result = CliRunner().invoke(cli, ["compile", "clean.yaml"])
    assert result.exit_code == 0
    assert result.output == compile("clean.yaml").to_json()


def test_compile_to_a_file(project: Path) -> None:
    result = CliRunner().invoke(cli, ["compile", "clean.yaml", "-o", "plan.json"])
    assert (result.exit_code, result.output) == (0, "")
    plan = json.loads((project / "plan.json").read_text(encoding="utf-8"))
    assert plan["name"] == "clean" and len(plan["fingerprint"]) == 64


def test_compile_errors_go_to_stderr(project: Path) -> None:
    result = tether("compile", "broken.yaml", cwd=project)
    assert (result.returncode, result.stdout, result.stderr) == (1, "", BROKEN_TEXT)


def test_compile_into_a_missing_directory_is_one_clean_line(project: Path) -> None:
    result = tether("compile", "clean.yaml", "-o", "no/such/dir/plan.json", cwd=project)
    assert result.returncode == 1
    assert result.stderr.startswith("error: cannot write no/such/dir/plan.json")


# --------------------------------------------------------------------------- graph


def test_graph_defaults_to_mermaid(project: Path) -> None:
    result = CliRunner().invoke(cli, ["graph", "clean.yaml"])
    assert result.exit_code == 0
    assert result.output.splitlines()[3:6] == [
        "flowchart TD",
        '    n_lookup["lookup<br/>billing.lookup"]',
        '    n_review{{"review<br/>approval: check"}}',
    ]


def test_graph_dot_to_a_file(project: Path) -> None:
    result = CliRunner().invoke(cli, ["graph", "clean.yaml", "--format", "dot", "-o", "g.dot"])
    assert result.exit_code == 0
    text = (project / "g.dot").read_text(encoding="utf-8")
    assert text.startswith('digraph "clean" {') and '"lookup" -> "review";' in text


def test_graph_of_a_compiled_plan(project: Path) -> None:
    runner = CliRunner()
    assert runner.invoke(cli, ["compile", "clean.yaml", "-o", "plan.json"]).exit_code == 0
    from_plan = runner.invoke(cli, ["graph", "plan.json"])
    assert from_plan.exit_code == 0
    assert from_plan.output == runner.invoke(cli, ["graph", "clean.yaml"]).output


def test_graph_of_an_edited_plan_is_one_clean_line(project: Path) -> None:
    plan = json.loads(compile("clean.yaml").to_json())
    plan["name"] = "edited"
    (project / "plan.json").write_text(json.dumps(plan), encoding="utf-8")
    result = tether("graph", "plan.json", cwd=project)
    assert result.returncode == 1
    assert result.stderr == (
        "error: the plan's fingerprint does not match its content (edited by hand?)\n"
    )


def test_graph_of_a_broken_file_prints_diagnostics(project: Path) -> None:
    result = tether("graph", "broken.yaml", cwd=project)
    assert (result.returncode, result.stdout, result.stderr) == (1, "", BROKEN_TEXT)


# --------------------------------------------------------------------------- schema


def test_schema_is_sorted_json_with_an_id(project: Path) -> None:
    result = CliRunner().invoke(cli, ["schema"])
    schema = json.loads(result.output)
    assert result.exit_code == 0 and result.output.endswith("}\n")
    assert schema["$id"] == "urn:tether:schema:workflow:1"
    assert schema["title"] == "tether workflow"
    assert {"tether", "name", "nodes"} <= set(schema["required"])
    assert "with" in schema["$defs"]["NodeSpec"]["properties"]
    assert result.output == json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def test_schema_to_a_file(project: Path) -> None:
    assert CliRunner().invoke(cli, ["schema", "-o", "s.json"]).exit_code == 0
    assert json.loads((project / "s.json").read_text(encoding="utf-8"))["type"] == "object"


def test_schema_accepts_a_valid_workflow(project: Path) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    import yaml

    schema = json.loads(CliRunner().invoke(cli, ["schema"]).output)
    jsonschema.validate(yaml.safe_load(CLEAN), schema)


# --------------------------------------------------------------------------- fmt


def canonical(path: Path, to: str | None = None) -> str:
    from tether.dsl.convert import format_file

    return format_file(path, to=to)  # type: ignore[arg-type]


def test_fmt_prints_the_canonical_form(project: Path) -> None:
    """fmt prints the file in canonical form and leaves the file alone."""
    result = CliRunner().invoke(cli, ["fmt", "clean.yaml"])
    assert (result.exit_code, result.output) == (0, canonical(project / "clean.yaml"))
    assert (project / "clean.yaml").read_text(encoding="utf-8") == CLEAN


def test_fmt_to_another_syntax_writes_an_equivalent_file(project: Path) -> None:
    """--to flow -o writes a .flow file that compiles to the same plan."""
    result = CliRunner().invoke(cli, ["fmt", "clean.yaml", "--to", "flow", "-o", "clean.flow"])
    assert result.exit_code == 0
    assert (project / "clean.flow").read_text(encoding="utf-8").startswith("workflow clean\n")
    assert compile("clean.flow").fingerprint == compile("clean.yaml").fingerprint


def test_fmt_check_reports_unformatted_files_and_changes_nothing(project: Path) -> None:
    """--check exits 1 for a file not in canonical form, 0 for one that is."""
    (project / "done.yaml").write_text(canonical(project / "clean.yaml"), encoding="utf-8")
    runner = CliRunner()
    unformatted = runner.invoke(cli, ["fmt", "--check", "clean.yaml"])
    formatted = runner.invoke(cli, ["fmt", "--check", "done.yaml"])
    assert (unformatted.exit_code, unformatted.output) == (1, "would reformat clean.yaml\n")
    assert (formatted.exit_code, formatted.output) == (0, "")
    assert (project / "clean.yaml").read_text(encoding="utf-8") == CLEAN


def test_fmt_write_rewrites_in_place_once(project: Path) -> None:
    """--write rewrites the file; a second run has nothing to do; no stray files."""
    expected = canonical(project / "clean.yaml")
    result = CliRunner().invoke(cli, ["fmt", "--write", "clean.yaml"])
    assert (result.exit_code, result.output) == (0, "reformatted clean.yaml\n")
    assert (project / "clean.yaml").read_text(encoding="utf-8") == expected
    again = CliRunner().invoke(cli, ["fmt", "--write", "clean.yaml"])
    assert (again.exit_code, again.output) == (0, "")
    assert sorted(p.name for p in project.iterdir()) == ["broken.yaml", "clean.yaml"]


def test_fmt_write_refuses_to_drop_comments_unless_asked(project: Path) -> None:
    """Comments are not preserved: --write refuses, --drop-comments overrides, others warn."""
    commented = "# keep me\n" + CLEAN.replace("name: clean", "name: clean  # the name")
    (project / "c.yaml").write_text(commented, encoding="utf-8")
    runner = CliRunner()
    refused = runner.invoke(cli, ["fmt", "--write", "c.yaml"])
    assert isinstance(refused.exception, TetherError)
    assert "would drop 2 comments" in str(refused.exception)
    assert (project / "c.yaml").read_text(encoding="utf-8") == commented
    printed = runner.invoke(cli, ["fmt", "c.yaml"])
    assert printed.exit_code == 0 and "2 comments of c.yaml dropped" in printed.output
    forced = runner.invoke(cli, ["fmt", "--write", "--drop-comments", "c.yaml"])
    assert forced.exit_code == 0
    assert "#" not in (project / "c.yaml").read_text(encoding="utf-8")


def test_fmt_of_an_unreadable_document_prints_diagnostics(project: Path) -> None:
    """A document that does not validate is not formatted: diagnostics printed, exit 1.
    (A graph error such as an unknown `needs` does not stop formatting.)"""
    (project / "typo.yaml").write_text(CLEAN.replace("needs:", "neds:"), encoding="utf-8")
    result = CliRunner().invoke(cli, ["fmt", "typo.yaml"])
    assert result.exit_code == 1
    assert "error[E201]: unknown key `neds` in node `review`" in result.output
    assert "did you mean `needs`?" in result.output
    assert CliRunner().invoke(cli, ["fmt", "broken.yaml"]).exit_code == 0


@pytest.mark.parametrize("args", [
    ["--check", "--to", "flow"],
    ["--check", "--write"],
    ["--write", "-o", "x.yaml"],
    ["--write", "--to", "flow"],
])
def test_fmt_rejects_conflicting_options(project: Path, args: list[str]) -> None:
    """Contradictory options are a usage error (exit 2) and change nothing."""
    result = CliRunner().invoke(cli, ["fmt", *args, "clean.yaml"])
    assert result.exit_code == 2
    assert (project / "clean.yaml").read_text(encoding="utf-8") == CLEAN
    assert not (project / "x.yaml").exists()


def test_fmt_round_trip_with_the_real_converter(project: Path) -> None:
    """YAML -> flow -> YAML -> flow keeps the fingerprint; the canonical flow is stable."""
    runner = CliRunner()
    assert runner.invoke(cli, ["fmt", "clean.yaml", "--to", "flow", "-o", "c.flow"]).exit_code == 0
    assert runner.invoke(cli, ["fmt", "c.flow", "--to", "yaml", "-o", "c.yaml"]).exit_code == 0
    assert runner.invoke(cli, ["fmt", "--write", "c.flow"]).exit_code == 0
    assert runner.invoke(cli, ["fmt", "--check", "c.flow"]).exit_code == 0
    assert compile("c.flow").fingerprint == compile("clean.yaml").fingerprint
    assert compile("c.yaml").fingerprint == compile("clean.yaml").fingerprint


# --------------------------------------------------------------------------- explain


@pytest.mark.parametrize("spelling", ["E302", "e302", "cycle", " Cycle "])
def test_explain_accepts_code_or_slug(spelling: str) -> None:
    result = CliRunner().invoke(cli, ["explain", spelling])
    assert result.exit_code == 0
    lines = result.output.splitlines()
    assert lines[0] == "E302 (cycle): the nodes depend on each other in a cycle"
    assert lines[1] == ""
    assert result.output.endswith(CODES["E302"].explanation + "\n")


def test_explain_list_has_every_code() -> None:
    result = CliRunner().invoke(cli, ["explain", "--list"])
    lines = result.output.splitlines()
    assert result.exit_code == 0 and len(lines) == len(CODES)
    assert lines[0].split() == ["E100", "unreadable-file", *CODES["E100"].title.split()]


def test_explain_unknown_code_suggests_one() -> None:
    result = CliRunner().invoke(cli, ["explain", "cylce"])
    assert result.exit_code == 2
    assert "unknown diagnostic code 'cylce'; did you mean 'cycle'?" in result.output


@pytest.mark.parametrize("args", [[], ["E302", "--list"]])
def test_explain_needs_exactly_one_of_code_or_list(args: list[str]) -> None:
    assert CliRunner().invoke(cli, ["explain", *args]).exit_code == 2


def test_docs_describe_every_diagnostic_code() -> None:
    """docs/diagnostics.md has a section for every registered code, with its explanation."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "diagnostics.md").read_text()
    for code in CODES.values():
        assert f"### {code.code} `{code.slug}`: {code.title}" in text
        assert code.explanation in text
