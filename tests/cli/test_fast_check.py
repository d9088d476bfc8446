"""``tether check`` read by hand (``cli/fast.py``) and by click: the same output, the same
exit code; every form the hand parser does not know goes to click."""

from __future__ import annotations

from pathlib import Path

import pytest

from tether.cli.fast import CheckArgs, parse_check, run_fast
from tether.cli.group import cli, handle_error

BROKEN = """\
tether: 1
name: broken
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
WARNS = "tether: 1\nname: warns\nnodes:\n  pay:\n    task: billing.pay\n" \
        "    retry: {max_attempts: 2}\n"
CLEAN = "tether: 1\nname: clean\nnodes:\n  a: {task: t.a}\n"
FLOW = "tether 1\nworkflow clean_flow\n\ntask a = t.a\n"
NOT_A_WORKFLOW = "version: 2\nservices: {}\n"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("NO_COLOR", raising=False)
    for name, text in (("broken.yaml", BROKEN), ("warns.yaml", WARNS), ("clean.yaml", CLEAN),
                       ("flows/clean.flow", FLOW), ("compose.yaml", NOT_A_WORKFLOW)):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    (tmp_path / "empty").mkdir()
    return tmp_path


def through_click(argv: list[str]) -> int:
    """The command line as the click group runs it (``main`` without the fast path)."""
    try:
        result = cli.main(args=argv, prog_name="tether", standalone_mode=False)
    except BaseException as exc:
        return handle_error(exc)
    return result if isinstance(result, int) else 0


def through_fast(argv: list[str]) -> int:
    try:
        code = run_fast(argv)
    except BaseException as exc:
        return handle_error(exc)
    assert code is not None, f"{argv} was not taken by the fast path"
    return code


SAME = [
    ["check", "clean.yaml"],
    ["check", "broken.yaml"],
    ["check", "warns.yaml"],
    ["check", "warns.yaml", "--strict"],
    ["check", "--strict", "clean.yaml", "warns.yaml"],
    ["check", "broken.yaml", "--format", "json"],
    ["check", "broken.yaml", "--format=SARIF"],
    ["check", "--format", "github", "broken.yaml", "warns.yaml"],
    ["check", "clean.yaml", "--format", "json"],
    ["check", "broken.yaml", "--color", "never"],
    ["check", "broken.yaml", "--color=Always"],
    ["check", "."],
    ["check", "flows"],
    ["check", "flows/clean.flow", "clean.yaml"],
    ["check", "compose.yaml"],
    ["check", "compose.yaml", "--skip-non-workflows"],
    ["check", "compose.yaml", "clean.yaml", "--skip-non-workflows"],
    ["check", "empty"],
]


@pytest.mark.parametrize("argv", SAME, ids=[" ".join(a[1:]) for a in SAME])
def test_the_fast_path_prints_what_click_prints(project: Path, argv: list[str],
                                                capsys: pytest.CaptureFixture[str]) -> None:
    slow = through_click(argv)
    by_click = capsys.readouterr()
    fast = through_fast(argv)
    by_hand = capsys.readouterr()
    assert (fast, by_hand.out, by_hand.err) == (slow, by_click.out, by_click.err)
    silent = argv == ["check", "compose.yaml", "--skip-non-workflows"]  # (nothing to check)
    assert bool(by_hand.out or by_hand.err) is not silent


def test_colour_is_added_only_when_asked(project: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert through_fast(["check", "broken.yaml", "--color", "always"]) == 1
    assert "\x1b[" in capsys.readouterr().out
    assert through_fast(["check", "broken.yaml"]) == 1  # auto, and not a terminal
    assert "\x1b[" not in capsys.readouterr().out


def test_what_the_fast_path_reads(project: Path) -> None:
    assert parse_check(["broken.yaml", "--format=JSON", "--strict", "--color", "never",
                        "--skip-non-workflows", "."]) == CheckArgs(
        paths=("broken.yaml", "."), output_format="json", strict=True, color="never",
        skip_non_workflows=True)
    assert parse_check(["clean.yaml"]) == CheckArgs(paths=("clean.yaml",))


LEFT_TO_CLICK = [
    [],                                   # no path: click's usage error
    ["--help"],
    ["-h", "clean.yaml"],
    ["missing.yaml"],                     # click names the missing path
    ["clean.yaml", "--tasks", "billing"],  # user code: the click command imports it
    ["clean.yaml", "--import-tasks"],
    ["clean.yaml", "--format", "xml"],    # click lists the choices
    ["clean.yaml", "--format"],           # no value
    ["clean.yaml", "--strict=yes"],
    ["clean.yaml", "--form", "json"],     # an abbreviation, or a mistake: click decides
    ["clean.yaml", "-"],
    ["--", "clean.yaml"],
]


@pytest.mark.parametrize("words", LEFT_TO_CLICK, ids=[" ".join(w) or "(none)"
                                                      for w in LEFT_TO_CLICK])
def test_other_forms_are_left_to_click(project: Path, words: list[str]) -> None:
    assert parse_check(words) is None
    assert run_fast(["check", *words]) is None


def test_other_commands_are_left_to_click(project: Path) -> None:
    assert run_fast(["compile", "clean.yaml"]) is None
    assert run_fast(["--version"]) is None
    assert run_fast([]) is None


def test_a_usage_error_still_reads_as_click_writes_it(project: Path,
                                                      capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    from tether.cli.main import main

    assert main(["check", "missing.yaml"]) == 2
    assert "Path 'missing.yaml' does not exist" in capsys.readouterr().err
    assert main(["check", "clean.yaml", "--format", "xml"]) == 2
    assert "'xml' is not one of 'text', 'json', 'sarif', 'github'" in capsys.readouterr().err
