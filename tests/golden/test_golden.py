"""Golden tests: invalid workflows and their exact rendered diagnostics (STYLE rule 7).

Each file in cases/ (YAML and .flow) is checked with ``tether check``; the text it prints is
compared byte for byte with ``<file>.expected`` beside it. Files named ``tasks_*`` are checked
against the task functions of golden_tasks.py. A case without its ``.expected`` file fails.
To write the expected files after an intended change of wording (or for a new case), run
``pytest tests/golden --update-golden`` and review the diff. Sub-workflow files the cases run
live in ``cases/sub/``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from tether.cli.main import cli

CASES_DIR = Path(__file__).parent / "cases"
CASES = sorted(p for p in CASES_DIR.iterdir() if p.suffix in (".yaml", ".flow"))


def render(path: Path, workdir: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[int, str]:
    """Exit code and standard output of `tether check <file>`, run from a copy of cases/
    outside the repository (so no pyproject.toml names task modules)."""
    shutil.copytree(CASES_DIR, workdir, dirs_exist_ok=True)
    monkeypatch.chdir(workdir)
    args = ["check", "--color", "never", path.name]
    if path.name.startswith("tasks_"):
        args += ["--tasks", str(Path(__file__).parent / "golden_tasks.py")]
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    return result.exit_code, result.stdout


def test_there_are_at_least_thirty_cases_in_both_syntaxes() -> None:
    """The suite covers at least 30 invalid files, in YAML and in .flow."""
    assert len(CASES) >= 30
    assert {p.suffix for p in CASES} == {".yaml", ".flow"}


def test_every_expected_file_belongs_to_a_case() -> None:
    """A renamed or deleted case leaves no stale expected output behind."""
    expected = sorted(p.name for p in CASES_DIR.glob("*.expected"))
    assert expected == sorted(p.name + ".expected" for p in CASES
                              if p.with_name(p.name + ".expected").exists())


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.name)
def test_rendered_diagnostics_match_the_golden_file(path: Path, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch,
                                                    update_golden: bool) -> None:
    """`tether check` prints exactly the expected diagnostics; exit 1 on errors, else 0."""
    code, output = render(path, tmp_path / "cases", monkeypatch)
    expected = path.with_name(path.name + ".expected")
    if update_golden:
        expected.write_text(output, encoding="utf-8")
    assert expected.exists(), (
        f"{expected.name} is missing: run `pytest tests/golden --update-golden` and review it")
    assert output == expected.read_text(encoding="utf-8")
    assert code == (1 if "error[" in output else 0), output
