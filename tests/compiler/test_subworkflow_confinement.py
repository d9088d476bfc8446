"""Files stay inside the project (issue 22): a ``workflow:`` path that leaves the directory
of the workflow naming it and the project root is E706 at the path's span, whether it climbs
with ``..``, is absolute or goes through a symlink, and the file is never read; a file that is
not a workflow is E707 and nothing it holds is printed. The attacker's file is a creds-like
YAML whose values are grepped for in every output format of ``tether check`` and ``tether
run`` (text, json, sarif, github; stdout and stderr)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import tether

SECRETS = ("Hunter2-Sup3rSecret", "AKIAEXAMPLESECRET", "tok-VALUE-123", "database_password")
CREDS = """\
database_password: "Hunter2-Sup3rSecret"
api_key: AKIAEXAMPLESECRET
nested: {token: tok-VALUE-123}
"""
BROKEN = 'tether 1\n"Hunter2-Sup3rSecret" = AKIAEXAMPLESECRET {\n'
CHILD = "tether: 1\nname: child\nnodes:\n  only: {noop: true}\n"


def parent(directory: Path, ref: str, name: str = "main.yaml") -> Path:
    path = directory / name
    path.write_text(f"tether: 1\nname: main\nnodes:\n  sub:\n    workflow: {ref}\n")
    return path


def every_output(path: Path, cwd: Path) -> str:
    """Everything ``tether check`` prints in each format, and ``tether run``, as one text."""
    env = {k: v for k, v in os.environ.items() if k != "TETHER_DB"}
    texts = []
    for args in ([*["check", str(path), "--format"], fmt] for fmt in
                 ("text", "json", "sarif", "github")):
        done = subprocess.run([sys.executable, "-m", "tether", *args], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
        texts.append(done.stdout + done.stderr)
    ran = subprocess.run([sys.executable, "-m", "tether", "run", str(path), "--db",
                          f"sqlite:///{cwd / 'r.db'}"], cwd=cwd, env=env, capture_output=True,
                         text=True, timeout=120, check=False)
    assert ran.returncode not in (0, 3) and "Traceback" not in ran.stderr, ran.stderr
    return "\n".join([*texts, ran.stdout, ran.stderr])


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    """``project/flows`` (no pyproject.toml) and ``elsewhere/creds.yaml`` beside it."""
    project = tmp_path / "project" / "flows"
    project.mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "creds.yaml").write_text(CREDS)
    return project, elsewhere


@pytest.mark.parametrize("how", ["dotdot", "absolute", "symlink", "symlinked_dir"])
def test_a_path_out_of_the_project_is_E706_at_its_span_and_nothing_leaks(
        layout: tuple[Path, Path], how: str) -> None:
    project, elsewhere = layout
    if how == "symlink":
        (project / "link.yaml").symlink_to(elsewhere / "creds.yaml")
    if how == "symlinked_dir":
        (project / "shared").symlink_to(elsewhere, target_is_directory=True)
    ref = {"dotdot": "../../elsewhere/creds.yaml", "absolute": str(elsewhere / "creds.yaml"),
           "symlink": "link.yaml", "symlinked_dir": "shared/creds.yaml"}[how]
    main = parent(project, ref)
    (error,) = tether.check(main)
    assert error.code == "E706" and (error.span.line, error.span.col) == (5, 15)
    assert "is outside the project: a sub-workflow must be inside" in error.message
    assert error.related == ()
    shown = every_output(main, project)
    assert "E706" in shown
    for secret in SECRETS:
        assert secret not in shown, (how, secret)


def test_a_file_that_is_not_a_workflow_is_E707_and_its_contents_never_shown(
        layout: tuple[Path, Path]) -> None:
    project, _ = layout
    (project / "creds.yaml").write_text(CREDS)
    (project / "broken.flow").write_text(BROKEN)
    main = parent(project, "creds.yaml")
    (error,) = tether.check(main)
    assert error.code == "E707" and error.message.endswith("/creds.yaml` is not a workflow file")
    assert error.related == ()
    broken = parent(project, "broken.flow", "broken_main.yaml")
    (error,) = tether.check(broken)
    assert error.code == "E701"
    assert [r.message for r in error.related] == ["E102: .flow syntax error"]
    for path in (main, broken):
        shown = every_output(path, project)
        for secret in SECRETS:
            assert secret not in shown, (path.name, secret)


def test_the_project_root_is_where_pyproject_says(tmp_path: Path) -> None:
    """With pyproject.toml, ../shared is inside the project (its directory); [tool.tether]
    root widens or narrows it (relative to pyproject.toml); a workflow's own directory is
    always allowed."""
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "child.yaml").write_text(CHILD)
    (tmp_path / "flows").mkdir()
    (tmp_path / "flows" / "local.yaml").write_text(CHILD)
    main = parent(tmp_path / "flows", "../shared/child.yaml")
    local = parent(tmp_path / "flows", "local.yaml", "local_main.yaml")
    assert [d.code for d in tether.check(main)] == ["E706"]  # no pyproject.toml anywhere
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    assert tether.check(main) == []
    (tmp_path / "pyproject.toml").write_text("[tool.tether]\nroot = 'flows'\n")
    assert [d.code for d in tether.check(main)] == ["E706"]
    assert tether.check(local) == []
    (tmp_path / "flows" / "pyproject.toml").write_text(
        textwrap.dedent("""\
        [tool.tether]
        root = ".."
        """))
    assert tether.check(main) == []


def test_a_plan_compiled_with_an_escaping_sub_workflow_never_runs(
        layout: tuple[Path, Path]) -> None:
    """The runtime compiles sub-plans through the same check: Runner refuses the file."""
    project, _ = layout
    main = parent(project, "../../elsewhere/creds.yaml")
    with pytest.raises(tether.WorkflowError) as raised:
        tether.Runner(main, None, tasks={})
    assert "E706" in str(raised.value)
    for secret in SECRETS:
        assert secret not in str(raised.value)
